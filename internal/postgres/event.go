package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.EventStore = (*DB)(nil)

// WorkerSession bounds what a stuck worker can hold: a lock wait longer than
// lockTimeout fails the statement (SQLSTATE 55P03) instead of queueing
// behind a frozen sandbox, and a session idle inside a transaction for
// longer than idleInTx is ended by the server. It is an option for Open.
func WorkerSession(lockTimeout, idleInTx time.Duration) func(*pgxpool.Config) {
	return func(cfg *pgxpool.Config) {
		params := cfg.ConnConfig.RuntimeParams
		if params == nil {
			params = map[string]string{}
			cfg.ConnConfig.RuntimeParams = params
		}
		params["lock_timeout"] = fmt.Sprint(lockTimeout.Milliseconds())
		params["idle_in_transaction_session_timeout"] = fmt.Sprint(idleInTx.Milliseconds())
	}
}

// Step one: claim the event id with a lease and load what the email needs,
// in one statement (one round trip, its own short transaction). The primary
// key admits one row per event id:
//
//   - the "new" statement inserts a new claim. Two workers claiming at once
//     are ordered by the index: the second waits for the first's statement
//     to commit, then finds its row. A conflict writes nothing, takes no
//     lock, logs nothing and burns no transaction id, so a duplicate
//     delivery costs no WAL flush (only the reads of its target).
//   - Only when the row it met is unfinished, its lease run out (its worker
//     died) and its payload the same, the "take-over" statement moves the
//     lease to the new token; its WHERE is re-checked against the latest
//     row, so of two workers taking over at once one wins.
//
// Each statement first reads its target (the application with its job,
// company and candidate; or the account), and decides there whether there
// is anything to send: a claim with nothing to send (the application is
// gone, the candidate's address is unverified; the account is gone or
// verified already) is inserted finished, in the same statement. The
// statements of both types return the same columns, those of the other
// type NULL.
//
// A verification event's statement also stores the hash of the token the
// worker will send ($7, valid for $8 seconds), keyed by the event id: a
// take-over replaces it, so a link from the earlier attempt stops working,
// and a release deletes the claim and, by its foreign key, the token.
const (
	claimOutcomeColumns = `
	outcome, CASE WHEN outcome IS NOT NULL THEN now() END`

	// A decided outcome of 'busy' (the order of a status event's
	// application is held) claims nothing.
	insertClaimSQL = `
	INSERT INTO processed_events (event_id, event_type, payload_hash, lease_token, lease_until, outcome, finished_at)
	SELECT $1, $2, $3, $4, now() + make_interval(secs => $5),` + claimOutcomeColumns + `
	FROM decided
	WHERE decided.outcome IS DISTINCT FROM 'busy'
	ON CONFLICT (event_id) DO NOTHING
	RETURNING event_id, attempts, outcome`

	takeOverClaimSQL = `
	UPDATE processed_events p
	SET lease_token = $4, lease_until = now() + make_interval(secs => $5), attempts = p.attempts + 1,
	    outcome = decided.outcome, finished_at = CASE WHEN decided.outcome IS NOT NULL THEN now() END
	FROM decided
	WHERE p.event_id = $1 AND p.event_type = $2 AND p.payload_hash = $3 AND p.outcome IS NULL AND p.lease_until < now()
	  AND decided.outcome IS DISTINCT FROM 'busy'
	RETURNING p.event_id, p.attempts, p.outcome`
)

// The claim statement of a status event also keeps the application's
// emails in order (application_email_order, docs/design.md "Order"). The
// event's version is $7, or, for an event written before versions
// existed, the place of its history row ($8, the event id as a UUID) in
// the application's history; an event with neither is not ordered.
//
//   - ordered takes the application's row under its row lock: inserted, or
//     updated when the event is newer than the row's version or is the
//     row's own event, and no other claim's lease on it is live. Its WHERE
//     is re-checked against the latest row, so of two workers claiming two
//     events of one application at once, one takes it and the other sees
//     it taken.
//   - When it took nothing, the row as the statement's snapshot saw it
//     (seen) tells why: a higher version, or the same version under
//     another event, means superseded (versions only grow, so a later row
//     is higher still); anything else is busy (a live lease, or a row
//     that moved after the snapshot: the retry sees it), and then no claim
//     is written.
//
// The order is taken only by the statement that takes the event: the
// new-claim statement when the event has no claim yet (a claim met is
// read by claimState, as for any type), the take-over statement when its
// claim is unfinished and its lease has run out.
func statusTargetSQL(orderGuard string) string {
	return `
WITH target AS (
	SELECT a.id, a.status, u.email, u.name, u.email_verified_at IS NOT NULL AS verified, j.title, co.name AS company
	FROM applications a
	JOIN jobs j ON j.id = a.job_id
	JOIN companies co ON co.id = j.company_id
	JOIN users u ON u.id = a.candidate_id
	WHERE a.id = $6
), version AS (
	SELECT coalesce(nullif($7::bigint, 0),
	       (SELECT (SELECT count(*) FROM application_status_history h2
	                WHERE h2.application_id = h.application_id AND h2.id <= h.id) + 1
	        FROM application_status_history h WHERE h.event_id = $8::uuid AND h.application_id = $6)) AS v
), seen AS (
	SELECT o.version, o.event_id, greatest(o.lease_until - now(), '0') AS lease_left
	FROM application_email_order o WHERE o.application_id = $6
), ordered AS (
	INSERT INTO application_email_order AS o (application_id, version, event_id, lease_token, lease_until)
	SELECT t.id, version.v, $1, $4, now() + make_interval(secs => $5)
	FROM target t, version
	WHERE t.verified AND version.v IS NOT NULL AND ` + orderGuard + `
	ON CONFLICT (application_id) DO UPDATE
	SET version = EXCLUDED.version, event_id = EXCLUDED.event_id,
	    lease_token = EXCLUDED.lease_token, lease_until = EXCLUDED.lease_until
	WHERE (o.version < EXCLUDED.version OR o.event_id = EXCLUDED.event_id)
	  AND (o.lease_until IS NULL OR o.lease_until < now())
	RETURNING o.application_id
), decided AS (
	SELECT CASE WHEN t.id IS NULL THEN 'application_missing'
	            WHEN NOT t.verified THEN 'recipient_unverified'
	            WHEN version.v IS NULL OR NOT (` + orderGuard + `) OR EXISTS (SELECT FROM ordered) THEN NULL
	            WHEN seen.version > version.v OR (seen.version = version.v AND seen.event_id <> $1) THEN 'superseded'
	            ELSE 'busy' END AS outcome,
	       seen.lease_left
	FROM (SELECT) AS one LEFT JOIN target t ON true LEFT JOIN version ON true LEFT JOIN seen ON true
), claim AS (`
}

const (
	// The guards of the order (see statusTargetSQL): the event has no
	// claim yet; its claim is unfinished and its lease has run out.
	newClaimOrderGuard = `NOT EXISTS (SELECT FROM processed_events WHERE event_id = $1)`
	takeOverOrderGuard = `EXISTS (SELECT FROM processed_events WHERE event_id = $1 AND outcome IS NULL AND lease_until < now())`

	// statusClaimedSQL returns a row for a claim written, or for busy
	// (the order is held: no claim), with how long that lease has left.
	statusClaimedSQL = `
)
SELECT coalesce(claim.attempts, 0), CASE WHEN claim.event_id IS NULL THEN 'busy' ELSE claim.outcome END,
       t.id, t.status, t.email, t.name, t.title, t.company,
       NULL::bigint, NULL::timestamptz, CASE WHEN claim.event_id IS NULL THEN d.lease_left END, NULL::timestamptz
FROM decided d LEFT JOIN claim ON true LEFT JOIN target t ON true
WHERE claim.event_id IS NOT NULL OR d.outcome = 'busy'`
)

var (
	claimStatusNewSQL      = statusTargetSQL(newClaimOrderGuard) + insertClaimSQL + statusClaimedSQL
	takeOverStatusClaimSQL = statusTargetSQL(takeOverOrderGuard) + takeOverClaimSQL + statusClaimedSQL
)

const (
	verificationTargetSQL = `
WITH target AS (
	SELECT u.id, u.email, u.email_verified_at, u.email_verified_at IS NOT NULL AND NOT ` + reverifiable + ` AS verified
	FROM users u WHERE u.id = $6
), decided AS (
	SELECT CASE WHEN t.id IS NULL THEN 'user_missing'
	            WHEN t.verified THEN 'already_verified' END AS outcome
	FROM (SELECT) AS one LEFT JOIN target t ON true
), claim AS (`

	verificationClaimedSQL = `
), token AS (
	INSERT INTO email_verification_tokens (event_id, token_hash, user_id, email, expires_at)
	SELECT claim.event_id, $7, t.id, t.email, now() + make_interval(secs => $8)
	FROM claim JOIN target t ON true
	WHERE claim.outcome IS NULL
	ON CONFLICT (event_id) DO UPDATE
	SET token_hash = EXCLUDED.token_hash, user_id = EXCLUDED.user_id, email = EXCLUDED.email,
	    created_at = now(), expires_at = EXCLUDED.expires_at, used_at = NULL
	RETURNING expires_at
)
SELECT claim.attempts, claim.outcome, NULL::bigint, NULL::text, t.email, NULL::text, NULL::text, NULL::text,
       t.id, token.expires_at, NULL::interval, t.email_verified_at
FROM claim LEFT JOIN target t ON true LEFT JOIN token ON true`

	claimVerificationNewSQL      = verificationTargetSQL + insertClaimSQL + verificationClaimedSQL
	takeOverVerificationClaimSQL = verificationTargetSQL + takeOverClaimSQL + verificationClaimedSQL
)

// claimStatements are the new-claim and take-over statements by event type.
var claimStatements = map[string]struct{ claimNew, takeOver string }{
	jobboard.EventTypeStatusChanged:              {claimStatusNewSQL, takeOverStatusClaimSQL},
	jobboard.EventTypeEmailVerificationRequested: {claimVerificationNewSQL, takeOverVerificationClaimSQL},
	jobboard.EventTypePasswordResetRequested:     {claimResetNewSQL, takeOverResetClaimSQL},
}

// claimStateSQL reads an existing claim that the new-claim statement met:
// its statement's snapshot sees the row that conflicted.
const claimStateSQL = `
SELECT outcome, payload_hash, lease_until < now(), greatest(lease_until - now(), '0')
FROM processed_events WHERE event_id = $1`

// ClaimEvent is step one of handling ev (see jobboard.EventStore). A claim
// with nothing to send is finished at once: a status event whose
// application is gone (OutcomeApplicationMissing) or whose candidate has
// not verified their address (OutcomeRecipientUnverified); a verification
// event whose account is gone (OutcomeUserMissing) or verified already
// (OutcomeAlreadyVerified). An owned verification claim comes with a new
// token, whose hash it stores. A claim that waits longer than the
// session's lock_timeout behind another claimer is OutcomeBusy. Errors:
// database errors, an event type this store cannot claim.
func (db *DB) ClaimEvent(ctx context.Context, ev jobboard.Event, lease time.Duration) (jobboard.Claim, error) {
	stmts, ok := claimStatements[ev.Type]
	if !ok {
		return jobboard.Claim{}, fmt.Errorf("claim event %s: no claim for event type %q", ev.EventID, ev.Type)
	}
	hash := ev.PayloadHash()
	// The claim met can change between the statements (released, taken
	// over by another worker): look again. A few rounds are plenty.
	for range 3 {
		c, found, err := db.claimWith(ctx, stmts.claimNew, ev, hash, lease)
		if err != nil || found {
			return c, wrapClaimErr(ev, err)
		}
		c, found, expired, err := db.claimState(ctx, ev.EventID, hash)
		if err != nil {
			return jobboard.Claim{}, wrapClaimErr(ev, err)
		}
		if !found {
			continue // released meanwhile: claim it anew
		}
		if !expired {
			return c, nil
		}
		c, found, err = db.claimWith(ctx, stmts.takeOver, ev, hash, lease)
		if err != nil || found {
			return c, wrapClaimErr(ev, err)
		}
	}
	return jobboard.Claim{}, fmt.Errorf("claim event %s: the claim kept changing under us", ev.EventID)
}

func wrapClaimErr(ev jobboard.Event, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("claim event %s: %w", ev.EventID, err)
}

// claimWith runs a new-claim or take-over statement; found is false when
// the statement took no claim.
func (db *DB) claimWith(ctx context.Context, sql string, ev jobboard.Event, hash []byte, lease time.Duration) (jobboard.Claim, bool, error) {
	c := jobboard.Claim{Token: uuid.NewString()}
	args := []any{ev.EventID, ev.Type, hash, c.Token, lease.Seconds(), ev.ApplicationID}
	var linkToken string
	if ev.Type == jobboard.EventTypeWebhookEndpointDisabled {
		args[5] = ev.UserID // webhook_notice.go
	}
	if ttl, ok := linkTokenTTL[ev.Type]; ok {
		var tokenHash []byte
		linkToken, tokenHash = jobboard.NewVerificationToken()
		args = append(args[:5], ev.UserID, tokenHash, ttl.Seconds())
	}
	if ev.Type == jobboard.EventTypeStatusChanged {
		args = append(args, ev.Version, historyEventID(ev))
	}
	var (
		outcome                          *string
		appID, userID                    *int64
		status                           *jobboard.ApplicationStatus
		email, name, jobTitle, companyNm *string
		expiresAt, verifiedAt            *time.Time
		orderBusyFor                     *time.Duration
	)
	err := db.pool.QueryRow(ctx, sql, args...).
		Scan(&c.Attempts, &outcome, &appID, &status, &email, &name, &jobTitle, &companyNm, &userID, &expiresAt, &orderBusyFor, &verifiedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return jobboard.Claim{}, false, nil
	case pgCode(err) == lockNotAvailable:
		// Another claim statement holds the row longer than lock_timeout
		// (its session is stuck): as good as a live lease.
		return jobboard.Claim{Outcome: jobboard.OutcomeBusy}, true, nil
	case err != nil:
		return jobboard.Claim{}, false, err
	}
	if outcome != nil {
		c.Outcome = jobboard.EventOutcome(*outcome)
		if c.Outcome == jobboard.OutcomeBusy {
			// The application's order is held: nothing was claimed.
			c = jobboard.Claim{Outcome: jobboard.OutcomeBusy, BusyOrder: true}
			if orderBusyFor != nil {
				c.BusyFor = *orderBusyFor
			}
		}
		return c, true, nil
	}
	switch {
	case appID != nil:
		c.Application = jobboard.ApplicationDetails{
			ApplicationID: *appID, Status: *status, CandidateEmail: *email,
			CandidateName: *name, JobTitle: *jobTitle, CompanyName: *companyNm,
		}
	case userID != nil && expiresAt != nil:
		c.Recipient = jobboard.RecipientDetails{UserID: *userID, Email: *email, Token: linkToken, ExpiresAt: *expiresAt, VerifiedAt: deref(verifiedAt)}
	case userID != nil && ev.Type == jobboard.EventTypeWebhookEndpointDisabled:
		c.Recipient = jobboard.RecipientDetails{UserID: *userID, Email: *email}
	default:
		return jobboard.Claim{}, false, errors.New("the claim statement returned no target")
	}
	return c, true, nil
}

// historyEventID is the argument that finds the history row of a status
// event that carries no version ($8 of its claim statements): its event
// id, when it is a UUID (the history's key), else NULL.
func historyEventID(ev jobboard.Event) any {
	if ev.Version != 0 {
		return nil
	}
	id, err := uuid.Parse(ev.EventID)
	if err != nil {
		return nil
	}
	return id.String()
}

// claimState says why a claim could not be taken, or that it may be taken
// over (expired). found is false when the claim is gone (released
// meanwhile).
func (db *DB) claimState(ctx context.Context, eventID string, hash []byte) (c jobboard.Claim, found, expired bool, err error) {
	var (
		outcome    *string
		storedHash []byte
		leaseOver  *bool
		leaseLeft  *time.Duration
	)
	err = db.pool.QueryRow(ctx, claimStateSQL, eventID).Scan(&outcome, &storedHash, &leaseOver, &leaseLeft)
	if errors.Is(err, pgx.ErrNoRows) {
		return jobboard.Claim{}, false, false, nil
	}
	if err != nil {
		return jobboard.Claim{}, false, false, fmt.Errorf("read claim: %w", err)
	}
	switch {
	case !bytes.Equal(storedHash, hash):
		c.Outcome = jobboard.OutcomePayloadMismatch
	case outcome != nil:
		c.Outcome = jobboard.OutcomeDuplicate
	case leaseOver != nil && *leaseOver:
		return jobboard.Claim{}, true, true, nil
	default:
		c.Outcome = jobboard.OutcomeBusy
		if leaseLeft != nil {
			c.BusyFor = *leaseLeft
		}
	}
	return c, true, false, nil
}

// finishClaimsSQL is step three: the outcomes, each recorded only by the
// lease token that holds its unfinished claim, in one statement (and one
// commit, whose WAL flush is most of its cost) for all the records of a
// batch that finished together. Recording the same outcome again under the
// same token matches too, so a retry after a lost answer succeeds. A status
// claim's lease on its application's order ends in the same statement
// (the version stays: an older event is superseded by it).
const finishClaimsSQL = `
WITH done AS (
	UPDATE processed_events p
	SET outcome = f.outcome, ses_message_id = NULLIF(f.ses_message_id, ''), finished_at = now()
	FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[]) AS f(event_id, lease_token, outcome, ses_message_id)
	WHERE p.event_id = f.event_id AND p.lease_token = f.lease_token AND (p.outcome IS NULL OR p.outcome = f.outcome)
	RETURNING p.event_id, p.lease_token
), unordered AS (
	UPDATE application_email_order o SET lease_token = NULL, lease_until = NULL
	FROM done WHERE o.lease_token = done.lease_token
)
SELECT event_id FROM done`

// FinishClaims records the outcomes of owned claims in one statement (see
// jobboard.EventStore) and returns the ids whose lease was lost.
// Errors: database errors.
func (db *DB) FinishClaims(ctx context.Context, fs []jobboard.Finish) (lost []string, err error) {
	n := len(fs)
	ids, tokens, outcomes, sesIDs := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, f := range fs {
		ids[i], tokens[i], outcomes[i], sesIDs[i] = f.EventID, f.Token, string(f.Outcome), f.ProviderMessageID
	}
	rows, _ := db.pool.Query(ctx, finishClaimsSQL, ids, tokens, outcomes, sesIDs)
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("finish %d claims: %w", n, err)
	}
	for _, id := range ids {
		if !slices.Contains(done, id) {
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// releaseClaimSQL deletes an unfinished claim held by the token, and ends
// its lease on its application's order (the version stays: the event is
// retried, and an older one is superseded by it meanwhile). It returns
// how many claims it deleted.
const releaseClaimSQL = `
WITH released AS (
	DELETE FROM processed_events WHERE event_id = $1 AND lease_token = $2 AND outcome IS NULL
	RETURNING lease_token
), unordered AS (
	UPDATE application_email_order o SET lease_token = NULL, lease_until = NULL
	FROM released WHERE o.lease_token = released.lease_token
)
SELECT count(*) FROM released`

// ReleaseClaim deletes an owned claim so that a retry can claim the event
// (see jobboard.EventStore). Errors: jobboard.ErrLeaseLost, database errors.
func (db *DB) ReleaseClaim(ctx context.Context, eventID, token string) error {
	var released int
	if err := db.pool.QueryRow(ctx, releaseClaimSQL, eventID, token).Scan(&released); err != nil {
		return fmt.Errorf("release claim of event %s: %w", eventID, err)
	}
	if released == 0 {
		return fmt.Errorf("release claim of event %s: %w", eventID, jobboard.ErrLeaseLost)
	}
	return nil
}
