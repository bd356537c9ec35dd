package postgres

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.PasswordResetStore = (*DB)(nil)

// resetLockClass is the first key of the advisory locks that put the reset
// requests of one address in line; the second is drawn from the address's
// digest. Idempotency keys use class 10; tern's one-key lock is apart.
const resetLockClass int32 = 11

// lockResetAddressSQL takes the transaction's advisory lock of the address
// ($1, $2) and finds the account that has the address ($3), if any. It is
// the same statement, with the same plan, whether or not one has.
const lockResetAddressSQL = `
SELECT (SELECT u.id FROM users u WHERE u.email = lower($3))
FROM (SELECT pg_advisory_xact_lock($1::int4, $2::int4)) AS locked`

// resetHistorySQL reads the requests for the address ($1) since $2. It is
// its own statement so that its snapshot, taken after the lock, sees every
// request counted before.
const resetHistorySQL = `
SELECT count(*), min(requested_at), max(requested_at)
FROM password_reset_requests
WHERE email_digest = $1 AND requested_at > $2`

// queueResetSQL counts the request ($1 address, $2 now), forgets the
// address's requests older than the window ($3), and writes the event to
// the outbox ($4 id, $5 type, $6 payload, JSON text as in storeAnswerSQL):
// one statement.
const queueResetSQL = `
WITH forgotten AS (
	DELETE FROM password_reset_requests WHERE email_digest = $1 AND requested_at <= $3
), counted AS (
	INSERT INTO password_reset_requests (email_digest, requested_at) VALUES ($1, $2)
)
INSERT INTO outbox (event_id, event_type, payload, created_at) VALUES ($4, $5, $6::jsonb, $2)`

// RequestPasswordReset queues a reset email for the account that has the
// address, within p's bounds for the address (see
// jobboard.PasswordResetWrites). Whether or not an account has it, the
// request runs the same three statements, and a request within the bounds
// writes one request row and one outbox row: without an account the event
// has no user id and the worker sends nothing. Two requests for one
// address are counted one after the other (an advisory lock on the
// address, held to the commit), across API instances. Errors: database
// errors.
func (u *unit) RequestPasswordReset(ctx context.Context, email string, p jobboard.VerificationPolicy, now time.Time) (bool, error) {
	digest := jobboard.EmailDigest(email)
	since := now.Add(-p.Window)
	var ev *jobboard.Event
	err := u.inTx(ctx, func(tx pgx.Tx) error {
		var userID *int64
		lockKey := int32(binary.BigEndian.Uint32(digest))
		if err := tx.QueryRow(ctx, lockResetAddressSQL, resetLockClass, lockKey, email).Scan(&userID); err != nil {
			return fmt.Errorf("lock address: %w", err)
		}
		var (
			h            jobboard.VerificationHistory
			oldest, last *time.Time
		)
		if err := tx.QueryRow(ctx, resetHistorySQL, digest, since).Scan(&h.AddressCount, &oldest, &last); err != nil {
			return fmt.Errorf("read reset requests: %w", err)
		}
		if last != nil {
			// The cooldown, too, is the address's: the account's would tell.
			h.LastForAccount, h.AddressOldest = *last, *oldest
		}
		if wait, _ := p.Wait(h, now); wait > 0 {
			return nil
		}
		e := jobboard.Event{
			Type:       jobboard.EventTypePasswordResetRequested,
			EventID:    uuid.NewString(),
			OccurredAt: now.UTC().Truncate(time.Microsecond),
		}
		if userID != nil {
			e.UserID = *userID
		}
		payload, err := jobboard.EncodeEvent(e)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, queueResetSQL, digest, e.OccurredAt, since, e.EventID, e.Type, string(payload)); err != nil {
			return fmt.Errorf("queue reset email: %w", err)
		}
		ev = &e
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("request password reset: %w", timeout(ctx, err))
	}
	if ev != nil {
		u.emit(*ev)
	}
	return ev != nil, nil
}

// resetTokenStateSQL says whether the token whose hash is $1 can reset a
// password at $2: used, reset since it was made (the account's password
// changed after the link was sent: another link, or another reset, came
// first), expired, and whether its account still has the address it went
// to.
const resetTokenStateSQL = `
SELECT t.used_at IS NOT NULL, u.password_changed_at IS DISTINCT FROM t.password_changed_at,
       t.expires_at <= $2, u.email = t.email
FROM password_reset_tokens t JOIN users u ON u.id = t.user_id
WHERE t.token_hash = $1`

// resetTokenState runs resetTokenStateSQL and returns why the token cannot
// reset a password, or nil when it can.
func resetTokenState(ctx context.Context, q querier, tokenHash []byte, now time.Time) error {
	var used, resetSince, expired, sameAddress bool
	err := q.QueryRow(ctx, resetTokenStateSQL, tokenHash, now).Scan(&used, &resetSince, &expired, &sameAddress)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return jobboard.ErrPasswordResetTokenInvalid
	case err != nil:
		return timeout(ctx, err)
	case used, resetSince:
		return jobboard.ErrPasswordResetTokenUsed
	case expired:
		return jobboard.ErrPasswordResetTokenExpired
	case !sameAddress:
		return jobboard.ErrPasswordResetTokenInvalid
	}
	return nil
}

// CheckPasswordResetToken reports whether the token with this hash could
// reset a password at now (see jobboard.PasswordResetStore). Errors:
// jobboard.ErrPasswordResetTokenInvalid, jobboard.ErrPasswordResetTokenUsed,
// jobboard.ErrPasswordResetTokenExpired.
func (db *DB) CheckPasswordResetToken(ctx context.Context, tokenHash []byte, now time.Time) error {
	if err := resetTokenState(ctx, db.pool, tokenHash, now); err != nil {
		return fmt.Errorf("check password reset token: %w", err)
	}
	return nil
}

// resetPasswordSQL uses up the token whose hash is $1, if it is unused,
// unexpired at $2, and its account still has the address and the password
// it was sent under; and sets that account's password hash ($3), marks its
// address verified (keeping the first time) and records the reset at $2
// (strictly after the last one, whatever the clock did), which ends every
// session and every reset link issued before it: one statement. The
// account's row lock puts two resets with different tokens in line: the
// second finds the password changed and sets nothing.
const resetPasswordSQL = `
WITH token AS (
	UPDATE password_reset_tokens t SET used_at = $2
	FROM users u
	WHERE t.token_hash = $1 AND t.used_at IS NULL AND t.expires_at > $2
	  AND u.id = t.user_id AND u.email = t.email
	  AND u.password_changed_at IS NOT DISTINCT FROM t.password_changed_at
	RETURNING t.user_id, t.password_changed_at
)
UPDATE users AS u
SET password_hash = $3,
	password_changed_at = greatest($2, u.password_changed_at + interval '1 microsecond'),
	email_verified_at = greatest(u.email_verified_at, $2)
FROM token
WHERE u.id = token.user_id AND u.password_changed_at IS NOT DISTINCT FROM token.password_changed_at
RETURNING ` + userColumns

// ResetPassword sets a new password with the token with this hash (see
// jobboard.PasswordResetWrites). Errors: jobboard.ErrPasswordResetTokenInvalid,
// jobboard.ErrPasswordResetTokenUsed, jobboard.ErrPasswordResetTokenExpired.
func (u *unit) ResetPassword(ctx context.Context, tokenHash []byte, passwordHash string, now time.Time) (jobboard.User, error) {
	q, err := u.writer(ctx)
	if err != nil {
		return jobboard.User{}, fmt.Errorf("reset password: %w", err)
	}
	now = now.Truncate(time.Microsecond) // as stored, and as sessions carry it
	rows, _ := q.Query(ctx, resetPasswordSQL, tokenHash, now, passwordHash)
	user, err := pgx.CollectExactlyOneRow(rows, scanUser)
	if errors.Is(err, pgx.ErrNoRows) {
		if err = resetTokenState(ctx, q, tokenHash, now); err == nil {
			// Usable a moment ago, and used up by a reset with another of
			// the account's tokens meanwhile.
			err = jobboard.ErrPasswordResetTokenUsed
		}
	}
	if err != nil {
		return jobboard.User{}, fmt.Errorf("reset password: %w", timeout(ctx, err))
	}
	return user, nil
}

// The claim of a password reset event (see ClaimEvent, and the claim of a
// verification event, which it follows): the account is read by the id
// the event carries, none for an address no account had ($6 is 0), and
// then the claim is finished at once as no_account. An owned claim stores
// the hash of the token the worker will send ($7, valid for $8 seconds),
// with the address and the password change it is made for.
const (
	resetTargetSQL = `
WITH target AS (
	SELECT u.id, u.email, u.password_changed_at FROM users u WHERE u.id = $6
), decided AS (
	SELECT CASE WHEN t.id IS NULL THEN 'no_account' END AS outcome
	FROM (SELECT) AS one LEFT JOIN target t ON true
), claim AS (`

	resetClaimedSQL = `
), token AS (
	INSERT INTO password_reset_tokens (event_id, token_hash, user_id, email, password_changed_at, expires_at)
	SELECT claim.event_id, $7, t.id, t.email, t.password_changed_at, now() + make_interval(secs => $8)
	FROM claim JOIN target t ON true
	WHERE claim.outcome IS NULL
	ON CONFLICT (event_id) DO UPDATE
	SET token_hash = EXCLUDED.token_hash, user_id = EXCLUDED.user_id, email = EXCLUDED.email,
	    password_changed_at = EXCLUDED.password_changed_at, created_at = now(),
	    expires_at = EXCLUDED.expires_at, used_at = NULL
	RETURNING expires_at
)
SELECT claim.attempts, claim.outcome, NULL::bigint, NULL::text, t.email, NULL::text, NULL::text, NULL::text,
       t.id, token.expires_at, NULL::interval, NULL::timestamptz
FROM claim LEFT JOIN target t ON true LEFT JOIN token ON true`

	claimResetNewSQL      = resetTargetSQL + insertClaimSQL + resetClaimedSQL
	takeOverResetClaimSQL = resetTargetSQL + takeOverClaimSQL + resetClaimedSQL
)

// linkTokenTTL is how long the token that the claim of an event makes
// works, by event type: the event types whose email carries a link.
var linkTokenTTL = map[string]time.Duration{
	jobboard.EventTypeEmailVerificationRequested: jobboard.VerificationTokenTTL,
	jobboard.EventTypePasswordResetRequested:     jobboard.PasswordResetTokenTTL,
}
