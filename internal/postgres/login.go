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

// countAttempt is the upsert that counts an attempt under one key unless
// the key is blocked at $2, in one step: it holds the row's lock from the
// check to the count, so attempts at the same moment are counted one after
// the other and each sees the block the one before it set. A count whose
// last failure is older than the key's reset period starts again at 1. The
// key's delays are its policy's Delay(1), Delay(2), ... (see
// jobboard.LoginPolicy.Delays): the n-th attempt blocks the key until $2 +
// delays[n], or the last delay beyond the array; a zero delay blocks nothing
// (NULL), so that an attempt whose clock reads a little earlier than the
// one counted before it (two instances, or two requests of one) is not
// taken for blocked. It returns a row only when it counted the attempt. %[1]s is the key's row (VALUES or SELECT), %[2]s
// its reset period, %[3]s its delays.
const countAttempt = `
	INSERT INTO login_failures AS f (email_digest, failures, last_failure, blocked_until)
	%[1]s
	ON CONFLICT (email_digest) DO UPDATE
	SET failures = CASE WHEN f.last_failure < $2::timestamptz - %[2]s THEN 1 ELSE f.failures + 1 END,
	    last_failure = $2::timestamptz,
	    blocked_until = nullif($2::timestamptz + (%[3]s)[least(
	        CASE WHEN f.last_failure < $2::timestamptz - %[2]s THEN 1 ELSE f.failures + 1 END,
	        cardinality(%[3]s))], $2::timestamptz)
	WHERE f.blocked_until IS NULL OR f.blocked_until <= $2::timestamptz
	RETURNING 1`

// loginAttemptSQL counts an attempt at $2 under the first key ($1, with
// its reset period $3 and delays $4) and, when that one counted it, under
// the second ($5, $6, $7; none when $5 is NULL), in one statement. It
// tells which of the two counted it. (The second key's row is another row
// than the first's, so the two upserts of one statement never meet.)
var loginAttemptSQL = `
WITH first AS (` + fmt.Sprintf(countAttempt,
	`VALUES ($1, 1, $2::timestamptz, nullif($2::timestamptz + ($4::interval[])[1], $2::timestamptz))`, `$3::interval`, `$4::interval[]`) + `),
second AS (` + fmt.Sprintf(countAttempt,
	`SELECT $5::bytea, 1, $2::timestamptz, nullif($2::timestamptz + ($7::interval[])[1], $2::timestamptz)
		WHERE $5::bytea IS NOT NULL AND EXISTS (SELECT FROM first)`,
	`$6::interval`, `$7::interval[]`) + `)
SELECT EXISTS (SELECT FROM first), EXISTS (SELECT FROM second)`

const loginBlockedSQL = `
SELECT blocked_until FROM login_failures WHERE email_digest = $1`

// LoginAttempt counts an attempt at now under each key, in order, and
// blocks it for its policy's Delay of the consecutive attempts, stopping at
// the first key blocked at now: then it returns how long that block lasts
// (at least a microsecond). It takes one or two keys. Errors: database
// errors.
func (db *DB) LoginAttempt(ctx context.Context, now time.Time, keys ...jobboard.ThrottleKey) (time.Duration, error) {
	if len(keys) < 1 || len(keys) > 2 {
		return 0, fmt.Errorf("count login attempt: %d keys, want 1 or 2", len(keys))
	}
	first := keys[0]
	var second jobboard.ThrottleKey
	if len(keys) == 2 {
		second = keys[1]
	}
	var firstCounted, secondCounted bool
	err := db.pool.QueryRow(ctx, loginAttemptSQL, first.Digest, now, first.Policy.ResetAfter, first.Policy.Delays(),
		second.Digest, second.Policy.ResetAfter, second.Policy.Delays()).Scan(&firstCounted, &secondCounted)
	switch {
	case err != nil:
		return 0, fmt.Errorf("count login attempt: %w", timeout(ctx, err))
	case !firstCounted:
		return db.blockedFor(ctx, first.Digest, now)
	case second.Digest != nil && !secondCounted:
		return db.blockedFor(ctx, second.Digest, now)
	}
	return 0, nil
}

// blockedFor returns how long the key stays blocked after now, at least a
// microsecond: the block read here may already be over, or gone after a
// success, but the attempt was refused all the same. Errors: database
// errors.
func (db *DB) blockedFor(ctx context.Context, digest []byte, now time.Time) (time.Duration, error) {
	var until *time.Time
	err := db.pool.QueryRow(ctx, loginBlockedSQL, digest).Scan(&until)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("login blocked: %w", timeout(ctx, err))
	}
	wait := time.Microsecond
	if until != nil && until.Sub(now) > wait {
		wait = until.Sub(now)
	}
	return wait, nil
}

// loginSucceededSQL forgets the failures of the keys in $1 and takes one
// attempt back from those in $2 (LoginSucceeded, LoginUndecided).
const loginSucceededSQL = `
WITH forget AS (DELETE FROM login_failures WHERE email_digest = ANY ($1::bytea[]))
UPDATE login_failures SET failures = failures - 1
WHERE email_digest = ANY ($2::bytea[]) AND failures > 0`

// LoginSucceeded forgets the failures of the keys that are not Shared and
// takes the attempt back from those that are. Errors: database errors.
func (db *DB) LoginSucceeded(ctx context.Context, keys ...jobboard.ThrottleKey) error {
	forget, takeBack := [][]byte{}, [][]byte{}
	for _, k := range keys {
		if k.Shared {
			takeBack = append(takeBack, k.Digest)
		} else {
			forget = append(forget, k.Digest)
		}
	}
	if _, err := db.pool.Exec(ctx, loginSucceededSQL, forget, takeBack); err != nil {
		return fmt.Errorf("clear failed logins: %w", timeout(ctx, err))
	}
	return nil
}

// LoginUndecided takes the attempt back from every key. Errors: database
// errors.
func (db *DB) LoginUndecided(ctx context.Context, keys ...jobboard.ThrottleKey) error {
	takeBack := make([][]byte, len(keys))
	for i, k := range keys {
		takeBack[i] = k.Digest
	}
	if _, err := db.pool.Exec(ctx, loginSucceededSQL, [][]byte{}, takeBack); err != nil {
		return fmt.Errorf("take back login attempt: %w", timeout(ctx, err))
	}
	return nil
}
