package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var (
	_ jobboard.LoginThrottle         = (*DB)(nil)
	_ jobboard.LoginFailureRetention = (*DB)(nil)
)

// loginAttemptSQL counts an attempt unless the key is blocked at $2, in
// one statement: the upsert holds the row's lock from the check to the
// count, so attempts at the same moment are counted one after the other and
// each sees the block the one before it set. A count whose last failure is
// older than the reset period ($3) starts again at 1. $4 is the policy's
// delays, Delay(1), Delay(2), ... (see jobboard.LoginPolicy.Delays); the
// n-th attempt blocks the key until $2 + $4[n], or the last delay beyond
// the array. It returns a row only when it counted the attempt.
const loginAttemptSQL = `
INSERT INTO login_failures AS f (email_digest, failures, last_failure, blocked_until)
VALUES ($1, 1, $2::timestamptz, $2::timestamptz + ($4::interval[])[1])
ON CONFLICT (email_digest) DO UPDATE
SET failures = CASE WHEN f.last_failure < $2::timestamptz - $3::interval THEN 1 ELSE f.failures + 1 END,
    last_failure = $2::timestamptz,
    blocked_until = $2::timestamptz + ($4::interval[])[least(
        CASE WHEN f.last_failure < $2::timestamptz - $3::interval THEN 1 ELSE f.failures + 1 END,
        cardinality($4::interval[]))]
WHERE f.blocked_until IS NULL OR f.blocked_until <= $2::timestamptz
RETURNING failures`

const loginBlockedSQL = `
SELECT blocked_until FROM login_failures WHERE email_digest = $1`

// LoginAttempt counts an attempt with key at now and blocks the key for
// p.Delay of the consecutive attempts, unless it is blocked at now: then
// it counts nothing and returns how long the block lasts (at least a
// microsecond). Errors: database errors.
func (db *DB) LoginAttempt(ctx context.Context, key []byte, now time.Time, p jobboard.LoginPolicy) (time.Duration, error) {
	var n int
	err := db.pool.QueryRow(ctx, loginAttemptSQL, key, now, p.ResetAfter, p.Delays()).Scan(&n)
	if err == nil {
		return 0, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("count login attempt: %w", timeout(ctx, err))
	}
	// Blocked. The block read here may already be over, or gone after a
	// success; the attempt was refused all the same.
	var until *time.Time
	err = db.pool.QueryRow(ctx, loginBlockedSQL, key).Scan(&until)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("login blocked: %w", timeout(ctx, err))
	}
	wait := time.Microsecond
	if until != nil && until.Sub(now) > wait {
		wait = until.Sub(now)
	}
	return wait, nil
}

const loginSucceededSQL = `DELETE FROM login_failures WHERE email_digest = $1`

// LoginSucceeded forgets the failures of key. Errors: database errors.
func (db *DB) LoginSucceeded(ctx context.Context, key []byte) error {
	if _, err := db.pool.Exec(ctx, loginSucceededSQL, key); err != nil {
		return fmt.Errorf("clear failed logins: %w", timeout(ctx, err))
	}
	return nil
}

// deleteOldLoginFailuresSQL deletes one batch of counts whose last failure
// is older than $1 seconds (through login_failures_last_failure_idx) and
// that block nothing any more. Such a count no longer matters: the next
// failure would start it again at 1. A count that a new failure updates
// meanwhile has another ctid and stays.
const deleteOldLoginFailuresSQL = `
DELETE FROM login_failures
WHERE ctid = ANY (ARRAY(
	SELECT ctid FROM login_failures
	WHERE last_failure < now() - make_interval(secs => $1)
	  AND (blocked_until IS NULL OR blocked_until < now())
	LIMIT $2))`

// DeleteOldLoginFailures deletes the counts of keys whose last failure is
// older than olderThan and that are not blocked, batch rows per statement
// (each its own transaction), until none is left, and returns how many it
// deleted. Errors: database errors (with the count so far).
func (db *DB) DeleteOldLoginFailures(ctx context.Context, olderThan time.Duration, batch int) (int64, error) {
	n, err := db.deleteInBatches(ctx, deleteOldLoginFailuresSQL, olderThan, batch)
	if err != nil {
		return n, fmt.Errorf("delete old login failures: %w", err)
	}
	return n, nil
}
