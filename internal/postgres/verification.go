package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Register stores a new user and, in the same transaction, queues its
// verification email (see jobboard.UserWrites): the account and its email
// commit together, like a status change and its event. When p's bounds
// for the address refuse the email (the address asked often within the
// window, under an earlier account), the user is created without it and
// queued is false. Errors: jobboard.ErrEmailTaken.
func (u *unit) Register(ctx context.Context, r jobboard.Registration, passwordHash string,
	p jobboard.VerificationPolicy, now time.Time,
) (jobboard.User, bool, error) {
	var (
		user jobboard.User
		ev   *jobboard.Event
	)
	err := u.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if user, err = createUser(ctx, tx, r, passwordHash); err != nil {
			return err
		}
		e, err := queueVerification(ctx, tx, user.ID, user.Email, p, now)
		var throttled *jobboard.VerificationThrottledError
		switch {
		case errors.As(err, &throttled):
			return nil // the account is created all the same
		case err != nil:
			return err
		}
		ev = &e
		return nil
	})
	if err != nil {
		return jobboard.User{}, false, fmt.Errorf("register user: %w", timeout(ctx, err))
	}
	if ev != nil {
		u.emit(*ev)
	}
	return user, ev != nil, nil
}

// lockUnverifiedSQL locks the account for the rest of the transaction, so
// that two resends of one account are counted one after the other. FOR NO
// KEY UPDATE does not block inserts that reference the user.
// An address verified once counts as unverified here when it is
// reverifiable.
const lockUnverifiedSQL = `
SELECT u.email, u.email_verified_at IS NOT NULL AND NOT ` + reverifiable + `
FROM users u WHERE u.id = $1 FOR NO KEY UPDATE OF u`

// reverifiable tells whether the verification flow is open again to the
// address of users u although it was verified: it hard-bounced since (a
// new link, followed, lifts the bounce: verifyEmailSQL), or its owner
// complained after its last verification (a new link, followed, lets the
// account withdraw the complaint: withdrawComplaintSQL; the worker lets
// that link through the complaint, jobboard.Suppression.Blocks).
const reverifiable = `EXISTS (SELECT 1 FROM email_suppressions s WHERE s.email = u.email
	AND (s.reason = 'bounce' OR s.suppressed_at >= u.email_verified_at))`

// RequestVerification queues another verification email for the user
// (see jobboard.UserWrites). Errors: jobboard.ErrNotFound,
// jobboard.ErrAlreadyVerified, a *jobboard.VerificationThrottledError.
func (u *unit) RequestVerification(ctx context.Context, userID int64, p jobboard.VerificationPolicy, now time.Time) error {
	var ev jobboard.Event
	err := u.inTx(ctx, func(tx pgx.Tx) error {
		var (
			email    string
			verified bool
		)
		if err := tx.QueryRow(ctx, lockUnverifiedSQL, userID).Scan(&email, &verified); err != nil {
			return notFound(err)
		}
		if verified {
			return jobboard.ErrAlreadyVerified
		}
		var err error
		ev, err = queueVerification(ctx, tx, userID, email, p, now)
		return err
	})
	if err != nil {
		return fmt.Errorf("request verification of user %d: %w", userID, timeout(ctx, err))
	}
	u.emit(ev)
	return nil
}

// verificationHistorySQL reads the requests of the account ($1) and of the
// address ($2) since $3, through the two indexes of the table.
const verificationHistorySQL = `
SELECT max(requested_at) FILTER (WHERE user_id = $1),
       count(*) FILTER (WHERE user_id = $1), min(requested_at) FILTER (WHERE user_id = $1),
       count(*) FILTER (WHERE email_digest = $2), min(requested_at) FILTER (WHERE email_digest = $2)
FROM email_verification_requests
WHERE (user_id = $1 OR email_digest = $2) AND requested_at > $3`

// queueVerificationSQL counts the request ($1 user, $2 address, $3 now),
// forgets the account's and the address's requests older than the window
// ($4: now less the window), and writes the event to the outbox ($5 id,
// $6 type, $7 payload, JSON text as in storeAnswerSQL): one statement.
const queueVerificationSQL = `
WITH forgotten AS (
	DELETE FROM email_verification_requests
	WHERE (user_id = $1 OR email_digest = $2) AND requested_at <= $4
), counted AS (
	INSERT INTO email_verification_requests (user_id, email_digest, requested_at) VALUES ($1, $2, $3)
)
INSERT INTO outbox (event_id, event_type, payload, created_at) VALUES ($5, $6, $7::jsonb, $3)`

// queueVerification queues a verification email for the account, inside
// the caller's transaction, if p's bounds allow it at now. Errors: a
// *jobboard.VerificationThrottledError (nothing written), database errors.
func queueVerification(ctx context.Context, tx pgx.Tx, userID int64, email string,
	p jobboard.VerificationPolicy, now time.Time,
) (jobboard.Event, error) {
	digest := jobboard.EmailDigest(email)
	since := now.Add(-p.Window)
	var (
		h                    jobboard.VerificationHistory
		last, accOld, adrOld *time.Time
	)
	if err := tx.QueryRow(ctx, verificationHistorySQL, userID, digest, since).
		Scan(&last, &h.AccountCount, &accOld, &h.AddressCount, &adrOld); err != nil {
		return jobboard.Event{}, fmt.Errorf("read verification requests: %w", err)
	}
	for _, t := range []struct {
		dst *time.Time
		src *time.Time
	}{{&h.LastForAccount, last}, {&h.AccountOldest, accOld}, {&h.AddressOldest, adrOld}} {
		if t.src != nil {
			*t.dst = *t.src
		}
	}
	if wait, bound := p.Wait(h, now); wait > 0 {
		return jobboard.Event{}, &jobboard.VerificationThrottledError{RetryAfter: wait, Bound: bound}
	}
	ev := jobboard.Event{
		Type:       jobboard.EventTypeEmailVerificationRequested,
		EventID:    uuid.NewString(),
		OccurredAt: now.UTC().Truncate(time.Microsecond),
		UserID:     userID,
	}
	payload, err := jobboard.EncodeEvent(ev)
	if err != nil {
		return jobboard.Event{}, err
	}
	if _, err := tx.Exec(ctx, queueVerificationSQL, userID, digest, ev.OccurredAt, since, ev.EventID, ev.Type, string(payload)); err != nil {
		return jobboard.Event{}, fmt.Errorf("queue verification email: %w", err)
	}
	return ev, nil
}

// verifyEmailSQL uses up the token whose hash is $1, if it is unused,
// unexpired at $2 and was sent to the address its account still has, and
// marks that account verified at the latest time it showed the address
// is its own (which a complaint's withdrawal compares with the
// complaint's): one statement. Of
// two requests with one token, the second waits for the first's row lock,
// then finds the token used. The link reached the address, so a bounce
// suppression of it is lifted in the same statement (never a complaint:
// the owner said they do not want our mail).
const verifyEmailSQL = `
WITH token AS (
	UPDATE email_verification_tokens t SET used_at = $2
	WHERE t.token_hash = $1 AND t.used_at IS NULL AND t.expires_at > $2
	  AND EXISTS (SELECT 1 FROM users u WHERE u.id = t.user_id AND u.email = t.email)
	RETURNING t.user_id, t.email
), lifted AS (
	DELETE FROM email_suppressions s USING token
	WHERE s.email = token.email AND s.reason = 'bounce'
)
UPDATE users AS u SET email_verified_at = greatest(u.email_verified_at, $2)
FROM token WHERE u.id = token.user_id
RETURNING ` + userColumns

// tokenStateSQL says why verifyEmailSQL found no token to use.
const tokenStateSQL = `
SELECT used_at IS NOT NULL, expires_at <= $2 FROM email_verification_tokens WHERE token_hash = $1`

// VerifyEmail verifies the address the token with this hash was sent to
// and uses the token up (see jobboard.UserWrites). Errors:
// jobboard.ErrVerificationTokenInvalid, jobboard.ErrVerificationTokenUsed,
// jobboard.ErrVerificationTokenExpired.
func (u *unit) VerifyEmail(ctx context.Context, tokenHash []byte, now time.Time) (jobboard.User, error) {
	q, err := u.writer(ctx)
	if err != nil {
		return jobboard.User{}, fmt.Errorf("verify email: %w", err)
	}
	rows, _ := q.Query(ctx, verifyEmailSQL, tokenHash, now)
	user, err := pgx.CollectExactlyOneRow(rows, scanUser)
	if err == nil {
		return user, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return jobboard.User{}, fmt.Errorf("verify email: %w", timeout(ctx, err))
	}
	var used, expired bool
	err = q.QueryRow(ctx, tokenStateSQL, tokenHash, now).Scan(&used, &expired)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		err = jobboard.ErrVerificationTokenInvalid
	case err != nil:
		err = timeout(ctx, err)
	case used:
		err = jobboard.ErrVerificationTokenUsed
	case expired:
		err = jobboard.ErrVerificationTokenExpired
	default:
		// Unused and unexpired, yet not usable: it was sent to an address
		// its account no longer has.
		err = jobboard.ErrVerificationTokenInvalid
	}
	return jobboard.User{}, fmt.Errorf("verify email: %w", err)
}
