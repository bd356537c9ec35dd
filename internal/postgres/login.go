package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.LoginThrottle = (*DB)(nil)

const loginBlockedSQL = `
SELECT blocked_until FROM login_failures WHERE email_digest = $1`

// LoginBlocked returns how long logins with key stay refused at now; zero
// when they are not. Errors: database errors.
func (db *DB) LoginBlocked(ctx context.Context, key []byte, now time.Time) (time.Duration, error) {
	var until *time.Time
	err := db.pool.QueryRow(ctx, loginBlockedSQL, key).Scan(&until)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("login blocked: %w", timeout(ctx, err))
	case until == nil || !until.After(now):
		return 0, nil
	}
	return until.Sub(now), nil
}

// loginFailedSQL counts one more failure, or starts the count again when
// the last failure is older than the reset period ($4), and blocks the key
// until $2 + the policy's delay for the new count. The delay is computed in
// Go from the count this statement returns, so the doubling lives in one
// place; the second statement sets it.
const loginFailedSQL = `
INSERT INTO login_failures AS f (email_digest, failures, last_failure)
VALUES ($1, 1, $2)
ON CONFLICT (email_digest) DO UPDATE
SET failures = CASE WHEN f.last_failure < $2 - $3::interval THEN 1 ELSE f.failures + 1 END,
    last_failure = $2
RETURNING failures`

const loginBlockSQL = `
UPDATE login_failures SET blocked_until = $2 WHERE email_digest = $1`

// LoginFailed records a failed login with key at now and blocks the key for
// p.Delay of the consecutive failures. Errors: database errors.
func (db *DB) LoginFailed(ctx context.Context, key []byte, now time.Time, p jobboard.LoginPolicy) error {
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, loginFailedSQL, key, now, p.ResetAfter).Scan(&n); err != nil {
			return err
		}
		var until *time.Time
		if d := p.Delay(n); d > 0 {
			t := now.Add(d)
			until = &t
		}
		_, err := tx.Exec(ctx, loginBlockSQL, key, until)
		return err
	})
	if err != nil {
		return fmt.Errorf("record failed login: %w", timeout(ctx, err))
	}
	return nil
}

const loginSucceededSQL = `DELETE FROM login_failures WHERE email_digest = $1`

// LoginSucceeded forgets the failures of key. Errors: database errors.
func (db *DB) LoginSucceeded(ctx context.Context, key []byte) error {
	if _, err := db.pool.Exec(ctx, loginSucceededSQL, key); err != nil {
		return fmt.Errorf("clear failed logins: %w", timeout(ctx, err))
	}
	return nil
}
