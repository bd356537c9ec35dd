package postgres

import (
	"context"
	"fmt"
)

// jobListingVersionSQL reads the counter that the triggers of migration 004
// bump with every statement that changes jobs or company memberships.
const jobListingVersionSQL = `SELECT version FROM job_listing_version`

// JobListingVersion returns the version of the job listings: it changes, in
// the same transaction, with every change to a job or a membership, so a
// search run after reading it sees at least that version's jobs. Errors:
// database errors.
func (db *DB) JobListingVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := db.pool.QueryRow(ctx, jobListingVersionSQL).Scan(&v); err != nil {
		return 0, fmt.Errorf("job listing version: %w", err)
	}
	return v, nil
}
