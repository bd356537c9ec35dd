package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/schema"
)

// The harness reads the ground truth and ages rows straight from the
// database: it is a test of the system, not a part of it, so these
// statements live here rather than in internal/postgres's stores.

// createDatabase creates a database with a fresh name on the server at
// serverURL, migrates it, and returns its name and URL.
func createDatabase(ctx context.Context, serverURL string) (name, dbURL string, err error) {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	name = "chaos_" + hex.EncodeToString(b)
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", "", fmt.Errorf("create database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("create database %s: %w", name, err)
	}
	dbURL, err = withDatabase(serverURL, name, "")
	if err != nil {
		return name, "", err
	}
	if err := schema.Migrate(ctx, dbURL); err != nil {
		return name, dbURL, fmt.Errorf("migrate %s: %w", name, err)
	}
	return name, dbURL, nil
}

// dropDatabase drops the run's database, ending the sessions still in it.
func dropDatabase(ctx context.Context, serverURL, name string) error {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// withDatabase returns serverURL pointing at database name, with the
// session's application_name set when appName is not empty (so that the
// harness can find a worker's sessions in pg_stat_activity).
func withDatabase(serverURL, name, appName string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("parse server URL: %w", err)
	}
	u.Path = "/" + name
	q := u.Query()
	if appName != "" {
		q.Set("application_name", appName)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// db is the harness's own connection to the run's database.
type db struct {
	pool *pgxpool.Pool
	name string
}

func openDB(ctx context.Context, dbURL, name string) (*db, error) {
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return &db{pool: pool, name: name}, nil
}

// committedSQL lists every committed status change: the history row is
// written in the same transaction as the outbox row, and unlike the outbox
// row it is never deleted.
const committedSQL = `SELECT event_id::text, application_id FROM application_status_history`

// committed returns the event id → application id of every committed
// status change.
func (d *db) committed(ctx context.Context) (map[string]int64, error) {
	rows, _ := d.pool.Query(ctx, committedSQL)
	out := map[string]int64{}
	var id string
	var app int64
	_, err := pgx.ForEachRow(rows, []any{&id, &app}, func() error {
		out[id] = app
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read committed events: %w", err)
	}
	return out, nil
}

// versionsSQL gives every committed status change its version: its place
// in its application's history, plus one (the version the change made,
// which its event carries).
const versionsSQL = `
SELECT event_id::text, row_number() OVER (PARTITION BY application_id ORDER BY id) + 1
FROM application_status_history`

// versions returns the event id → version of every committed status
// change.
func (d *db) versions(ctx context.Context) (map[string]int64, error) {
	rows, _ := d.pool.Query(ctx, versionsSQL)
	out := map[string]int64{}
	var id string
	var v int64
	_, err := pgx.ForEachRow(rows, []any{&id, &v}, func() error {
		out[id] = v
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read versions: %w", err)
	}
	return out, nil
}

// verifyAccountsSQL marks every seeded account's address verified, as if
// each had followed its verification link: status emails go only to
// verified addresses, and the run is about those.
const verifyAccountsSQL = `UPDATE users SET email_verified_at = now() WHERE email_verified_at IS NULL`

func (d *db) verifyAccounts(ctx context.Context) error {
	if _, err := d.pool.Exec(ctx, verifyAccountsSQL); err != nil {
		return fmt.Errorf("verify the seeded accounts: %w", err)
	}
	return nil
}

// verificationEventsSQL lists the events of verification emails, which
// the verdict leaves out: it is about status changes.
const verificationEventsSQL = `SELECT event_id::text FROM outbox WHERE event_type = $1`

func (d *db) verificationEvents(ctx context.Context) (map[string]bool, error) {
	rows, _ := d.pool.Query(ctx, verificationEventsSQL, jobboard.EventTypeEmailVerificationRequested)
	out := map[string]bool{}
	var id string
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
		out[id] = true
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read verification events: %w", err)
	}
	return out, nil
}

// pendingSQL counts the outbox rows still to be published, leaving out
// those older than the retention, which must never be published.
const pendingSQL = `
SELECT count(*) FROM outbox
WHERE published_at IS NULL AND created_at > now() - make_interval(secs => $1)`

func (d *db) pending(ctx context.Context, retention time.Duration) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, pendingSQL, retention.Seconds()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count pending outbox rows: %w", err)
	}
	return n, nil
}

// busyWorkersSQL counts the workers' sessions that are inside a
// transaction or running a statement.
const busyWorkersSQL = `
SELECT count(*) FROM pg_stat_activity
WHERE datname = $1 AND application_name LIKE 'chaos-worker-%'
  AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')`

func (d *db) busyWorkers(ctx context.Context) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, busyWorkersSQL, d.name).Scan(&n); err != nil {
		return 0, fmt.Errorf("count busy worker sessions: %w", err)
	}
	return n, nil
}

// terminateWorkersSQL ends every session of the workers, reporting for each
// whether it was inside a transaction (a claim, or for a worker that sends
// inside its transaction, a send). With $2 true it ends them only when at
// least one is inside a transaction, so that the harness can wait for that
// moment. Sessions younger than two seconds are spared: a worker starting
// up pings the database once and exits if that fails, and a failed start
// is not the fault under test.
const terminateWorkersSQL = `
WITH workers AS (
    SELECT pid, state LIKE 'idle in transaction%' AS in_tx
    FROM pg_stat_activity
    WHERE datname = $1 AND application_name LIKE 'chaos-worker-%'
      AND backend_start < now() - interval '2 seconds'
)
SELECT in_tx, pg_terminate_backend(pid) FROM workers
WHERE NOT $2 OR EXISTS (SELECT 1 FROM workers WHERE in_tx)`

// terminateWorkers ends the workers' sessions (with onlyInTx, only if one
// of them is inside a transaction) and returns how many it ended and how
// many of those were inside a transaction.
func (d *db) terminateWorkers(ctx context.Context, onlyInTx bool) (ended, inTx int, err error) {
	rows, _ := d.pool.Query(ctx, terminateWorkersSQL, d.name, onlyInTx)
	var tx, ok bool
	_, err = pgx.ForEachRow(rows, []any{&tx, &ok}, func() error {
		if ok {
			ended++
			if tx {
				inTx++
			}
		}
		return nil
	})
	if err != nil {
		return 0, 0, fmt.Errorf("terminate worker sessions: %w", err)
	}
	return ended, inTx, nil
}

// sentClaimsSQL lists events whose claim says the email was sent.
const sentClaimsSQL = `SELECT event_id FROM processed_events WHERE outcome = 'sent' ORDER BY event_id`

func (d *db) sentClaims(ctx context.Context) ([]string, error) {
	rows, _ := d.pool.Query(ctx, sentClaimsSQL)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read sent claims: %w", err)
	}
	return ids, nil
}

// ageClaimSQL moves a claim's time back past the retention.
const ageClaimSQL = `UPDATE processed_events SET processed_at = processed_at - make_interval(secs => $2) WHERE event_id = $1`

// ageOutboxSQL moves an outbox row back past the retention, with the
// payload whose occurred_at the caller moved back by as much.
const ageOutboxSQL = `
UPDATE outbox SET
    created_at = created_at - make_interval(secs => $2),
    published_at = published_at - make_interval(secs => $2),
    payload = $3
WHERE event_id = $1::uuid`

// outboxPayloadSQL reads an event's outbox payload.
const outboxPayloadSQL = `SELECT payload FROM outbox WHERE event_id = $1::uuid`

func (d *db) outboxPayload(ctx context.Context, eventID string) ([]byte, error) {
	var p []byte
	if err := d.pool.QueryRow(ctx, outboxPayloadSQL, eventID).Scan(&p); err != nil {
		return nil, fmt.Errorf("read outbox payload of %s: %w", eventID, err)
	}
	return p, nil
}

// age moves an event's claim and outbox row (with the payload's
// occurred_at, which the caller passes as agedPayload) back by by.
func (d *db) age(ctx context.Context, eventID string, by time.Duration, agedPayload []byte) error {
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		for _, step := range []struct {
			what string
			sql  string
			args []any
		}{
			{"claim", ageClaimSQL, []any{eventID, by.Seconds()}},
			{"outbox row", ageOutboxSQL, []any{eventID, by.Seconds(), agedPayload}},
		} {
			tag, err := tx.Exec(ctx, step.sql, step.args...)
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return fmt.Errorf("no %s", step.what)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("age event %s: %w", eventID, err)
	}
	return nil
}

// claimsLeftSQL counts the claims of the given events still present.
const claimsLeftSQL = `SELECT count(*) FROM processed_events WHERE event_id = ANY ($1::text[])`

func (d *db) claimsLeft(ctx context.Context, ids []string) (int, error) {
	var n int
	if err := d.pool.QueryRow(ctx, claimsLeftSQL, ids).Scan(&n); err != nil {
		return 0, fmt.Errorf("count claims: %w", err)
	}
	return n, nil
}

// insertStaleSQL writes an outbox row that was never published and is
// older than the retention, as if the relay and every sweep had missed it.
const insertStaleSQL = `
INSERT INTO outbox (event_id, event_type, payload, created_at)
VALUES ($1::uuid, $2, $3, now() - make_interval(secs => $4))`

func (d *db) insertStale(ctx context.Context, eventID, eventType string, payload []byte, age time.Duration) error {
	if _, err := d.pool.Exec(ctx, insertStaleSQL, eventID, eventType, payload, age.Seconds()); err != nil {
		return fmt.Errorf("insert stale outbox row %s: %w", eventID, err)
	}
	return nil
}

// publishedOfSQL lists which of the given outbox rows are marked published.
const publishedOfSQL = `SELECT event_id::text FROM outbox WHERE event_id = ANY ($1::uuid[]) AND published_at IS NOT NULL`

func (d *db) publishedOf(ctx context.Context, ids []string) ([]string, error) {
	rows, _ := d.pool.Query(ctx, publishedOfSQL, ids)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read published rows: %w", err)
	}
	return out, nil
}

// anyApplicationSQL returns applications to attach the stale rows to.
const anyApplicationsSQL = `SELECT id FROM applications ORDER BY id LIMIT $1`

func (d *db) applications(ctx context.Context, n int) ([]int64, error) {
	rows, _ := d.pool.Query(ctx, anyApplicationsSQL, n)
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read applications: %w", err)
	}
	return out, nil
}
