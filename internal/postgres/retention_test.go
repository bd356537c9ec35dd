package postgres_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// keptRow is one kept table's rule as the docs state it: its name in the
// retention's report, the table, its age given the claim retention, and
// how to insert a row whose age counts from $1.
type keptRow struct {
	name, table string
	age         time.Duration
	insert      string
}

func keptRows(retention time.Duration) []keptRow {
	return []keptRow{
		{"processed_events", "processed_events", retention, `INSERT INTO processed_events (event_id, event_type, payload_hash, outcome, processed_at)
			VALUES (gen_random_uuid()::text, 'application.status_changed', '\x00', 'sent', $1)`},
		{"outbox", "outbox", retention, `INSERT INTO outbox (event_id, event_type, payload, created_at, published_at)
			VALUES (gen_random_uuid(), 'application.status_changed', '{}', $1, $1)`},
		{"idempotency_keys", "idempotency_keys", 24 * time.Hour, `INSERT INTO idempotency_keys (scope, key, fingerprint, status, header, body, created_at)
			VALUES ('user:1', gen_random_uuid()::text, '\x00', 201, '{}', '\x00', $1)`},
		{"login_failures", "login_failures", 24 * time.Hour, `INSERT INTO login_failures (email_digest, failures, last_failure)
			VALUES (uuid_send(gen_random_uuid()), 1, $1)`},
		{"verification_requests", "email_verification_requests", time.Hour, `INSERT INTO email_verification_requests (user_id, email_digest, requested_at)
			VALUES (1, '\x00', $1)`},
		{"password_reset_requests", "password_reset_requests", time.Hour, `INSERT INTO password_reset_requests (email_digest, requested_at)
			VALUES ('\x00', $1)`},
		{"webhook_dispatches", "webhook_dispatches", time.Hour, `INSERT INTO webhook_dispatches (company_id, endpoint_id, dispatched_at)
			VALUES ((SELECT min(id) FROM companies), 1, $1)`},
		{"webhook_events", "webhook_events", retention, `INSERT INTO webhook_events (id, company_id, type, occurred_at)
			VALUES (gen_random_uuid(), (SELECT min(id) FROM companies), 'application.status_changed', $1)`},
		{"feedback_events", "email_feedback_events", retention, `INSERT INTO email_feedback_events (feedback_id, kind, ses_message_id, received_at)
			VALUES (gen_random_uuid()::text, 'delivered', 'm-1', $1)`},
		{"email_deliveries", "email_deliveries", retention, `INSERT INTO email_deliveries (ses_message_id, email, state, updated_at)
			VALUES (gen_random_uuid()::text, 'ada@example.com', 'delivered', $1)`},
	}
}

// Each kept table loses, through the one loop, its rows older than its age
// (the claim retention, or a rule of its own) in batches, and keeps the
// younger ones; the report names every table. A table that fails (here
// dropped) is named in the error and stops none of the others.
func TestDeleteExpiredKeepsEachTableForItsAge(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	retention := jobboard.MinRetention
	rows := keptRows(retention)
	insert := func(r keptRow, ages ...time.Duration) {
		t.Helper()
		for _, age := range ages {
			if _, err := w.db.Pool.Exec(ctx, r.insert, time.Now().Add(-age)); err != nil {
				t.Fatalf("%s: %v", r.name, err)
			}
		}
	}
	var names []string
	for _, r := range rows {
		names = append(names, r.name)
		insert(r, r.age+time.Hour, 2*r.age+time.Hour, r.age-time.Hour)
	}

	n, err := w.db.DeleteExpired(ctx, retention, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(n)); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
		t.Fatalf("tables reported %v; want %v (a new kept table needs its line here)", got, slices.Sorted(slices.Values(names)))
	}
	for _, r := range rows {
		if n[r.name] != 2 {
			t.Errorf("%s: deleted %d, want the 2 older than %v", r.name, n[r.name], r.age)
		}
		if left := count(t, w.db, `SELECT count(*) FROM `+r.table); left != 1 {
			t.Errorf("%s: %d rows left, want the one younger than %v", r.name, left, r.age)
		}
	}

	for _, r := range rows {
		insert(r, r.age+time.Hour)
	}
	if _, err := w.db.Pool.Exec(ctx, `DROP TABLE login_failures`); err != nil {
		t.Fatal(err)
	}
	n, err = w.db.DeleteExpired(ctx, retention, 1)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.Contains(err.Error(), "login_failures") {
		t.Fatalf("with login_failures gone: %v; want its database error, naming it", err)
	}
	for _, r := range rows {
		if r.name != "login_failures" && n[r.name] != 1 {
			t.Errorf("%s after a failing table: deleted %d, want 1", r.name, n[r.name])
		}
	}
}
