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

// Step one for a status event: claim the event id with a lease and load
// what the email needs, in one statement (one round trip, its own short
// transaction). The primary key admits one row per event id:
//
//   - claimNewSQL inserts a new claim. Two workers claiming at once are
//     ordered by the index: the second waits for the first's statement to
//     commit, then finds its row. A conflict writes nothing, takes no lock,
//     logs nothing and burns no transaction id, so a duplicate delivery
//     costs no WAL flush.
//   - Only when the row it met is unfinished, its lease run out (its worker
//     died) and its payload the same, takeOverSQL moves the lease to the
//     new token; its WHERE is re-checked against the latest row, so of two
//     workers taking over at once one wins.
//
// Both end with loadClaimedApplicationSQL, whose LEFT JOINs return the
// claim even when the application is gone.
const (
	claimNewSQL = `
WITH claim AS (
	INSERT INTO processed_events (event_id, event_type, payload_hash, lease_token, lease_until)
	VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5))
	ON CONFLICT (event_id) DO NOTHING
	RETURNING attempts
)` + loadClaimedApplicationSQL

	takeOverSQL = `
WITH claim AS (
	UPDATE processed_events
	SET lease_token = $4, lease_until = now() + make_interval(secs => $5), attempts = attempts + 1
	WHERE event_id = $1 AND event_type = $2 AND payload_hash = $3 AND outcome IS NULL AND lease_until < now()
	RETURNING attempts
)` + loadClaimedApplicationSQL

	loadClaimedApplicationSQL = `
SELECT claim.attempts, a.id, a.status, u.email, u.name, j.title, co.name
FROM claim
LEFT JOIN applications a ON a.id = $6
LEFT JOIN jobs j ON j.id = a.job_id
LEFT JOIN companies co ON co.id = j.company_id
LEFT JOIN users u ON u.id = a.candidate_id`
)

// claimStateSQL reads an existing claim that claimNewSQL met: its
// statement's snapshot sees the row that conflicted.
const claimStateSQL = `
SELECT outcome, payload_hash, lease_until < now(), greatest(lease_until - now(), '0')
FROM processed_events WHERE event_id = $1`

// ClaimEvent is step one of handling ev (see jobboard.EventStore). A claim
// of a status event whose application is gone is finished at once as
// OutcomeApplicationMissing. A claim that waits longer than the session's
// lock_timeout behind another claimer is OutcomeBusy. Errors: database
// errors, an event type this store cannot load.
func (db *DB) ClaimEvent(ctx context.Context, ev jobboard.Event, lease time.Duration) (jobboard.Claim, error) {
	if ev.Type != jobboard.EventTypeStatusChanged {
		return jobboard.Claim{}, fmt.Errorf("claim event %s: no claim for event type %q", ev.EventID, ev.Type)
	}
	hash := ev.PayloadHash()
	// The claim met can change between the statements (released, taken
	// over by another worker): look again. A few rounds are plenty.
	for range 3 {
		c, found, err := db.claimWith(ctx, claimNewSQL, ev, hash, lease)
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
		c, found, err = db.claimWith(ctx, takeOverSQL, ev, hash, lease)
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

// claimWith runs claimNewSQL or takeOverSQL; found is false when the
// statement took no claim.
func (db *DB) claimWith(ctx context.Context, sql string, ev jobboard.Event, hash []byte, lease time.Duration) (jobboard.Claim, bool, error) {
	c := jobboard.Claim{Token: uuid.NewString()}
	var (
		appID                            *int64
		status                           *jobboard.ApplicationStatus
		email, name, jobTitle, companyNm *string
	)
	err := db.pool.QueryRow(ctx, sql, ev.EventID, ev.Type, hash, c.Token, lease.Seconds(), ev.ApplicationID).
		Scan(&c.Attempts, &appID, &status, &email, &name, &jobTitle, &companyNm)
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
	if appID == nil {
		if err := db.finishClaim(ctx, jobboard.Finish{EventID: ev.EventID, Token: c.Token, Outcome: jobboard.OutcomeApplicationMissing}); err != nil {
			return jobboard.Claim{}, false, err
		}
		c.Outcome = jobboard.OutcomeApplicationMissing
		return c, true, nil
	}
	c.Application = jobboard.ApplicationDetails{
		ApplicationID: *appID, Status: *status, CandidateEmail: *email,
		CandidateName: *name, JobTitle: *jobTitle, CompanyName: *companyNm,
	}
	return c, true, nil
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
// same token matches too, so a retry after a lost answer succeeds.
const finishClaimsSQL = `
UPDATE processed_events p
SET outcome = f.outcome, ses_message_id = NULLIF(f.ses_message_id, ''), finished_at = now()
FROM unnest($1::text[], $2::uuid[], $3::text[], $4::text[]) AS f(event_id, lease_token, outcome, ses_message_id)
WHERE p.event_id = f.event_id AND p.lease_token = f.lease_token AND (p.outcome IS NULL OR p.outcome = f.outcome)
RETURNING p.event_id`

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

// finishClaim records one outcome. Errors: jobboard.ErrLeaseLost, database
// errors.
func (db *DB) finishClaim(ctx context.Context, f jobboard.Finish) error {
	lost, err := db.FinishClaims(ctx, []jobboard.Finish{f})
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return fmt.Errorf("finish claim of event %s as %s: %w", f.EventID, f.Outcome, jobboard.ErrLeaseLost)
	}
	return nil
}

// releaseClaimSQL deletes an unfinished claim held by the token.
const releaseClaimSQL = `
DELETE FROM processed_events WHERE event_id = $1 AND lease_token = $2 AND outcome IS NULL`

// ReleaseClaim deletes an owned claim so that a retry can claim the event
// (see jobboard.EventStore). Errors: jobboard.ErrLeaseLost, database errors.
func (db *DB) ReleaseClaim(ctx context.Context, eventID, token string) error {
	tag, err := db.pool.Exec(ctx, releaseClaimSQL, eventID, token)
	if err != nil {
		return fmt.Errorf("release claim of event %s: %w", eventID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("release claim of event %s: %w", eventID, jobboard.ErrLeaseLost)
	}
	return nil
}
