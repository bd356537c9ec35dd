package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The baselines of the worker benchmark (internal/worker/bench_test.go).
// They live here, beside the statements they mirror, so that no SQL is
// written outside this package; production code does not call them.

// benchInsertSQL is the cheapest durable write there is: one row, one index.
const benchInsertSQL = `
INSERT INTO processed_events (event_id, event_type, payload_hash) VALUES ($1, $2, $3)`

// BenchBareInsert runs BEGIN; INSERT INTO processed_events; COMMIT, the floor
// that any claim transaction is measured against. Errors: database errors.
func (db *DB) BenchBareInsert(ctx context.Context, eventID string) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, benchInsertSQL, eventID, "bench", []byte{0})
		return err
	})
	if err != nil {
		return fmt.Errorf("bench insert %s: %w", eventID, err)
	}
	return nil
}

// BenchBareClaim runs the statements of ProcessStatusEvent's first delivery
// and nothing else: BEGIN; the claim (INSERT ... ON CONFLICT DO NOTHING
// RETURNING); the application load; COMMIT. It reports whether the claim was
// taken. Errors: database errors, jobboard.ErrNotFound.
func (db *DB) BenchBareClaim(ctx context.Context, eventID string, applicationID int64) (bool, error) {
	var claimed bool
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if claimed, err = claimEvent(ctx, tx, eventID, "bench", []byte{0}); err != nil || !claimed {
			return err
		}
		_, err = applicationDetails(ctx, tx, applicationID)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("bench claim %s: %w", eventID, err)
	}
	return claimed, nil
}
