package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.EventStore = (*DB)(nil)

// WorkerSession bounds what a stuck worker can hold: a lock wait longer than
// lockTimeout fails the statement (SQLSTATE 55P03) instead of queueing
// behind a frozen sandbox, and a session idle inside a transaction for
// longer than idleInTx is ended by the server, releasing its claim. It is an
// option for Open.
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

// claimEventSQL is the whole idempotency mechanism: the primary key admits
// one row per event id, and a second claimer waits for the first
// transaction, then finds its row (committed) or takes the id (rolled back).
// No row back means somebody else has the event. Unlike an INSERT that fails
// inside a savepoint, a conflict here writes nothing, logs nothing and burns
// no transaction id.
const claimEventSQL = `
INSERT INTO processed_events (event_id, event_type, payload_hash)
VALUES ($1, $2, $3)
ON CONFLICT (event_id) DO NOTHING
RETURNING event_id`

// claimedHashSQL reads the payload hash of the delivery that claimed the
// event first. It runs after the claim found a committed row, so the
// statement's snapshot sees that row.
const claimedHashSQL = `
SELECT payload_hash FROM processed_events WHERE event_id = $1`

// applicationDetailsSQL loads everything the status email needs in one
// round trip.
const applicationDetailsSQL = `
SELECT a.id, a.status, u.email, u.name, j.title, c.name
FROM applications a
JOIN jobs j ON j.id = a.job_id
JOIN companies c ON c.id = j.company_id
JOIN users u ON u.id = a.candidate_id
WHERE a.id = $1`

// setOutcomeSQL records an outcome other than the default 'sent'.
const setOutcomeSQL = `
UPDATE processed_events SET outcome = $2 WHERE event_id = $1`

// ProcessStatusEvent claims ev.EventID, loads the application and calls send,
// all in one transaction; see jobboard.EventStore for the outcomes.
// Errors: jobboard.ErrEventBusy (lock_timeout while another transaction holds
// the claim), send's retryable errors (wrapped, claim rolled back), database
// errors.
func (db *DB) ProcessStatusEvent(ctx context.Context, ev jobboard.Event, payloadHash []byte,
	send func(ctx context.Context, d jobboard.ApplicationDetails) error,
) (jobboard.EventOutcome, error) {
	var outcome jobboard.EventOutcome
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		outcome, err = processStatusEvent(ctx, tx, ev, payloadHash, send)
		return err
	})
	if err != nil {
		if pgCode(err) == lockNotAvailable {
			return "", fmt.Errorf("process event %s: %w (%w)", ev.EventID, jobboard.ErrEventBusy, err)
		}
		return "", fmt.Errorf("process event %s: %w", ev.EventID, err)
	}
	return outcome, nil
}

// processStatusEvent is ProcessStatusEvent's transaction. Returning nil
// commits whatever it wrote; an error rolls the claim back.
func processStatusEvent(ctx context.Context, tx pgx.Tx, ev jobboard.Event, payloadHash []byte,
	send func(ctx context.Context, d jobboard.ApplicationDetails) error,
) (jobboard.EventOutcome, error) {
	claimed, err := claimEvent(ctx, tx, ev.EventID, ev.Type, payloadHash)
	if err != nil {
		return "", err
	}
	if !claimed {
		var first []byte
		if err := tx.QueryRow(ctx, claimedHashSQL, ev.EventID).Scan(&first); err != nil {
			return "", fmt.Errorf("read claim: %w", err)
		}
		if !bytes.Equal(first, payloadHash) {
			return jobboard.OutcomePayloadMismatch, nil
		}
		return jobboard.OutcomeDuplicate, nil
	}

	d, err := applicationDetails(ctx, tx, ev.ApplicationID)
	if errors.Is(err, jobboard.ErrNotFound) {
		return jobboard.OutcomeApplicationMissing, setOutcome(ctx, tx, ev.EventID, jobboard.OutcomeApplicationMissing)
	}
	if err != nil {
		return "", err
	}

	err = send(ctx, d)
	switch {
	case err == nil:
		return jobboard.OutcomeSent, nil
	case errors.Is(err, jobboard.ErrMailRejected):
		// Retrying cannot help: keep the claim so redeliveries skip it.
		return jobboard.OutcomeRejected, setOutcome(ctx, tx, ev.EventID, jobboard.OutcomeRejected)
	default:
		return "", fmt.Errorf("send: %w", err)
	}
}

// claimEvent inserts the claim row and reports whether this transaction got
// it. A concurrent claimer makes it wait (up to lock_timeout).
func claimEvent(ctx context.Context, q querier, eventID, eventType string, payloadHash []byte) (bool, error) {
	var id string
	err := q.QueryRow(ctx, claimEventSQL, eventID, eventType, payloadHash).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("claim: %w", err)
	}
	return true, nil
}

// applicationDetails loads the application with its job, company and
// candidate. Errors: jobboard.ErrNotFound.
func applicationDetails(ctx context.Context, q querier, id int64) (jobboard.ApplicationDetails, error) {
	var d jobboard.ApplicationDetails
	err := q.QueryRow(ctx, applicationDetailsSQL, id).Scan(
		&d.ApplicationID, &d.Status, &d.CandidateEmail, &d.CandidateName, &d.JobTitle, &d.CompanyName)
	if err != nil {
		return jobboard.ApplicationDetails{}, fmt.Errorf("load application %d: %w", id, notFound(err))
	}
	return d, nil
}

func setOutcome(ctx context.Context, q querier, eventID string, o jobboard.EventOutcome) error {
	if _, err := q.Exec(ctx, setOutcomeSQL, eventID, string(o)); err != nil {
		return fmt.Errorf("record outcome %s: %w", o, err)
	}
	return nil
}
