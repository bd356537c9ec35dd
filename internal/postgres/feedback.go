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
	_ jobboard.FeedbackStore   = (*DB)(nil)
	_ jobboard.SuppressionList = (*DB)(nil)
)

// applyFeedbackSQL records one SES event, once, in one statement: the
// first CTE inserts its key, and every other one acts only when that
// insert took a row, so a second copy of the event (even at the same
// instant: the primary key puts it behind the first) changes nothing.
//
//   - the email's delivery state moves up sent < delivered < bounced <
//     complained, never down;
//   - a hard bounce ($2 = 'bounced') or a complaint suppresses every
//     recipient ($6); a complaint replaces a bounce, a bounce leaves a
//     complaint as it is. suppressed returns the addresses whose row this
//     event wrote;
//   - a soft bounce is counted.
const applyFeedbackSQL = `
WITH applied AS (
	INSERT INTO email_feedback_events (feedback_id, kind, ses_message_id)
	VALUES ($1, $2, $3)
	ON CONFLICT (feedback_id) DO NOTHING
	RETURNING feedback_id
), delivery AS (
	INSERT INTO email_deliveries (ses_message_id, event_id, email, state, detail, updated_at)
	SELECT $3, nullif($4, ''), ($6::text[])[1], $2, $5, $7
	FROM applied
	WHERE $2 IN ('sent', 'delivered', 'bounced', 'complained') AND cardinality($6::text[]) > 0
	ON CONFLICT (ses_message_id) DO UPDATE
	SET state = EXCLUDED.state, detail = EXCLUDED.detail, updated_at = EXCLUDED.updated_at,
	    event_id = coalesce(email_deliveries.event_id, EXCLUDED.event_id)
	WHERE array_position(ARRAY['sent', 'delivered', 'bounced', 'complained'], EXCLUDED.state)
	    > array_position(ARRAY['sent', 'delivered', 'bounced', 'complained'], email_deliveries.state)
), suppressed AS (
	INSERT INTO email_suppressions (email, reason, detail, ses_message_id, suppressed_at)
	SELECT DISTINCT ON (r.email) r.email, CASE $2 WHEN 'complained' THEN 'complaint' ELSE 'bounce' END, $5, $3, $7
	FROM applied, unnest($6::text[]) AS r (email)
	WHERE $2 IN ('bounced', 'complained')
	ON CONFLICT (email) DO UPDATE
	SET reason = EXCLUDED.reason, detail = EXCLUDED.detail, ses_message_id = EXCLUDED.ses_message_id,
	    suppressed_at = EXCLUDED.suppressed_at
	WHERE email_suppressions.reason = 'bounce' AND EXCLUDED.reason = 'complaint'
	RETURNING email
), soft AS (
	INSERT INTO email_soft_bounces (email, bounces, last_bounce_at)
	SELECT DISTINCT r.email, 1, $7::timestamptz
	FROM applied, unnest($6::text[]) AS r (email)
	WHERE $2 = 'soft_bounced'
	ON CONFLICT (email) DO UPDATE
	SET bounces = email_soft_bounces.bounces + 1,
	    last_bounce_at = greatest(email_soft_bounces.last_bounce_at, EXCLUDED.last_bounce_at)
)
SELECT EXISTS (SELECT 1 FROM applied), coalesce((SELECT array_agg(email ORDER BY email) FROM suppressed), '{}')`

// ApplyFeedback records one delivery event once (see
// jobboard.FeedbackStore). Errors: database errors.
func (db *DB) ApplyFeedback(ctx context.Context, f jobboard.Feedback) (jobboard.FeedbackResult, error) {
	if f.ID == "" || f.MessageID == "" {
		return jobboard.FeedbackResult{}, fmt.Errorf("apply feedback: an event needs its id and the email's message id")
	}
	at := f.At
	if at.IsZero() {
		at = time.Now()
	}
	recipients := make([]string, len(f.Recipients))
	for i, r := range f.Recipients {
		recipients[i] = jobboard.NormalizeEmail(r)
	}
	var (
		applied    bool
		suppressed []string
	)
	err := db.pool.QueryRow(ctx, applyFeedbackSQL, f.ID, string(f.Kind), f.MessageID, f.EventID, f.Detail, recipients, at).
		Scan(&applied, &suppressed)
	if err != nil {
		return jobboard.FeedbackResult{}, fmt.Errorf("apply feedback %s: %w", f.ID, timeout(ctx, err))
	}
	return jobboard.FeedbackResult{Duplicate: !applied, Suppressed: suppressed}, nil
}

const suppressionSQL = `
SELECT email, reason, detail, ses_message_id, suppressed_at FROM email_suppressions WHERE email = $1`

// Suppression returns the suppression of the address, if any (see
// jobboard.SuppressionList). Errors: database errors.
func (db *DB) Suppression(ctx context.Context, email string) (jobboard.Suppression, bool, error) {
	var s jobboard.Suppression
	err := db.pool.QueryRow(ctx, suppressionSQL, jobboard.NormalizeEmail(email)).
		Scan(&s.Email, &s.Reason, &s.Detail, &s.SESMessageID, &s.Since)
	if errors.Is(err, pgx.ErrNoRows) {
		return jobboard.Suppression{}, false, nil
	}
	if err != nil {
		return jobboard.Suppression{}, false, fmt.Errorf("suppression of an address: %w", timeout(ctx, err))
	}
	return s, true, nil
}

// withdrawComplaintSQL deletes the complaint suppression of the address of
// account $1, whose session ($2, as liveSession takes it) is live, when
// the account verified the address after the complaint: the address comes
// from the account's row, never from the request, so an account lifts its
// own address's suppression only, and only once it has shown that the
// address is its own since (anyone can register an address that
// complained). It answers whether the session is live, whether a row was
// deleted, the suppression's reason as the statement found it (the
// snapshot before the delete: a bounce, or a complaint another request
// has just lifted, or none), and whether the verification came after it.
var withdrawComplaintSQL = `
WITH owner AS (
	SELECT u.email, u.email_verified_at FROM users u WHERE u.id = $1 AND ` + liveSession("$1", "$2") + `
), lifted AS (
	DELETE FROM email_suppressions s USING owner
	WHERE s.email = owner.email AND s.reason = 'complaint' AND owner.email_verified_at > s.suppressed_at
	RETURNING s.email
)
SELECT EXISTS (SELECT 1 FROM owner), EXISTS (SELECT 1 FROM lifted),
       (SELECT s.reason FROM email_suppressions s JOIN owner ON s.email = owner.email),
       coalesce((SELECT owner.email_verified_at > s.suppressed_at FROM email_suppressions s JOIN owner ON s.email = owner.email), false)`

// WithdrawComplaint lifts the complaint suppression of the actor's own
// address (see jobboard.SuppressionWrites), in the scope of its writes: a
// statement of its own, or the keyed write's transaction. Errors:
// jobboard.ErrNotSuppressed, jobboard.ErrVerificationRequired,
// jobboard.ErrSuppressedByBounce, jobboard.ErrSessionRevoked,
// jobboard.ErrNotFound, database errors.
func (u *unit) WithdrawComplaint(ctx context.Context, actor jobboard.Actor) (jobboard.AddressDelivery, error) {
	q, err := u.writer(ctx)
	if err != nil {
		return jobboard.AddressDelivery{}, fmt.Errorf("withdraw complaint of user %d: %w", actor.UserID, err)
	}
	var (
		live, lifted, verifiedSince bool
		reason                      *string
	)
	err = q.QueryRow(ctx, withdrawComplaintSQL, actor.UserID, actor.PasswordChangedAt).Scan(&live, &lifted, &reason, &verifiedSince)
	switch {
	case err != nil:
		err = timeout(ctx, err)
	case !live:
		err = refusal(ctx, q, actor, jobboard.ErrNotFound)
	case lifted:
		// One address, one row: with the complaint gone nothing is left.
		return jobboard.AddressDelivery{Deliverable: true}, nil
	case reason != nil && *reason == string(jobboard.SuppressedByBounce):
		err = jobboard.ErrSuppressedByBounce
	case reason != nil && !verifiedSince:
		err = jobboard.ErrVerificationRequired
	default:
		err = jobboard.ErrNotSuppressed
	}
	return jobboard.AddressDelivery{}, fmt.Errorf("withdraw complaint of user %d: %w", actor.UserID, err)
}
