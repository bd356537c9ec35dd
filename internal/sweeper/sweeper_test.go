package sweeper_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/outbox"
	"github.com/jobboard/jobboard/internal/sweeper"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

func newSweeper(t *testing.T, c sweeper.Config) *sweeper.Sweeper {
	t.Helper()
	s, err := sweeper.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// 9. The publish after the commit fails: the row stays unpublished, the
// sweeper publishes it once the grace period is over, and the worker
// emails once.
func TestSweeperPublishesWhatTheRelayMissed(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ev := e.StatusChange(t, app)
	failing := &workertest.FaultyPublisher{Next: e.Publisher(), Before: errors.New("injected: SQS unreachable")}
	if err := outbox.NewRelay(failing, e.DB).Relay(context.Background(), ev); err == nil {
		t.Fatal("Relay succeeded through a failing publisher")
	}
	if n := e.Depth(t, e.QueueURL); n != 0 {
		t.Fatalf("queue depth = %d, want 0", n)
	}

	// Within the grace period the sweeper leaves the row to the relay.
	r, err := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher(), Grace: time.Hour}).Sweep(context.Background())
	if err != nil || r.Published != 0 || e.Depth(t, e.QueueURL) != 0 {
		t.Fatalf("sweep within grace = %+v, %v; want nothing published", r, err)
	}

	s := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher(), Grace: time.Microsecond})
	r, err = s.Sweep(context.Background())
	if err != nil || r.Published != 1 || r.Failed != 0 {
		t.Fatalf("sweep = %+v, %v; want 1 published", r, err)
	}
	if !e.Published(t, ev.EventID) {
		t.Error("row not marked published")
	}
	// Nothing left: a second sweep publishes nothing.
	if r, err := s.Sweep(context.Background()); err != nil || r.Published != 0 {
		t.Fatalf("second sweep = %+v, %v", r, err)
	}

	e.Drain(t, e.Poller(e.Handler(t, e.Sender)), 30*time.Second)
	if got := e.EmailsTo(t, app.CandidateEmail); len(got) != 1 || got[0].Subject != app.Subject(t, ev) {
		t.Fatalf("emails = %+v, want one about %s", got, ev.EventID)
	}
}

// 9. Published twice: the relay's SendMessage went through but the process
// died before marking the row, so the sweeper publishes it again. Two
// messages, one email.
func TestEventPublishedTwiceEmailsOnce(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ev := e.StatusChange(t, app)
	crash := &workertest.FaultyPublisher{Next: e.Publisher(), After: errors.New("injected: died after SendMessage")}
	if err := outbox.NewRelay(crash, e.DB).Relay(context.Background(), ev); err == nil {
		t.Fatal("Relay succeeded")
	}
	r, err := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher(), Grace: time.Microsecond}).Sweep(context.Background())
	if err != nil || r.Published != 1 {
		t.Fatalf("sweep = %+v, %v", r, err)
	}
	if n := e.Depth(t, e.QueueURL); n != 2 {
		t.Fatalf("queue depth = %d, want the event twice", n)
	}

	e.Drain(t, e.Poller(e.Handler(t, e.Sender)), 30*time.Second)
	if got := e.EmailsTo(t, app.CandidateEmail); len(got) != 1 {
		t.Fatalf("emails = %d, want 1", len(got))
	}
	if cs := e.Claims(t, ev.EventID); len(cs) != 1 || cs[0].Outcome != "sent" {
		t.Fatalf("claims = %+v", cs)
	}
}

// The sweeper works a backlog off in batches of ten, bounded by MaxEvents,
// and stops at a batch the queue did not wholly accept; what was refused
// stays for the next run.
func TestSweeperBatchesAndBounds(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	var evs []jobboard.Event
	for range 25 {
		evs = append(evs, e.StatusChange(t, e.NewApp(t)))
	}
	ctx := context.Background()
	counting := &workertest.FaultyPublisher{Next: e.Publisher()}

	r, err := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: counting, Grace: time.Microsecond, MaxEvents: 12}).Sweep(ctx)
	if err != nil || r.Published != 12 || r.Failed != 0 || counting.Calls != 2 {
		t.Fatalf("bounded sweep = %+v, %v, %d publishes; want 12 published in 2 calls", r, err, counting.Calls)
	}

	refusing := &workertest.FaultyPublisher{Next: e.Publisher(), Refuse: map[string]bool{evs[14].EventID: true}}
	r, err = newSweeper(t, sweeper.Config{Store: e.DB, Publisher: refusing, Grace: time.Microsecond}).Sweep(ctx)
	if err != nil || r.Published != 9 || r.Failed != 1 || refusing.Calls != 1 {
		t.Fatalf("sweep with a refusal = %+v, %v, %d publishes; want 9 published, 1 failed, then stop", r, err, refusing.Calls)
	}
	if e.Published(t, evs[14].EventID) {
		t.Error("refused event marked published")
	}

	r, err = newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher(), Grace: time.Microsecond}).Sweep(ctx)
	if err != nil || r.Published != 4 {
		t.Fatalf("last sweep = %+v, %v; want the 4 left", r, err)
	}
	for _, ev := range evs {
		if !e.Published(t, ev.EventID) {
			t.Errorf("event %s not published", ev.EventID)
		}
	}
	if n := e.Depth(t, e.QueueURL); n != 25 {
		t.Errorf("queue depth = %d, want 25", n)
	}

	// SQS down: the sweep reports the failure and still applies retention.
	more := e.StatusChange(t, e.NewApp(t))
	down := &workertest.FaultyPublisher{Next: e.Publisher(), Before: errors.New("injected: SQS unreachable")}
	r, err = newSweeper(t, sweeper.Config{Store: e.DB, Publisher: down, Grace: time.Microsecond}).Sweep(ctx)
	if err == nil || r.Failed != 1 || r.Published != 0 {
		t.Fatalf("sweep with SQS down = %+v, %v; want 1 failed and an error", r, err)
	}
	if e.Published(t, more.EventID) {
		t.Error("event marked published though SQS was down")
	}
}

// 11. Retention: claims and published outbox rows older than the retention
// are deleted; newer ones are kept. An unpublished row is published while
// young enough, and past that age expired (logged at ERROR, counted), never
// published; the metrics line reports it with the backlog.
func TestSweeperRetention(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	old, recent := e.StatusChange(t, e.NewApp(t)), e.StatusChange(t, e.NewApp(t))
	for _, ev := range []jobboard.Event{old, recent} {
		if err := e.DB.MarkPublished(ctx, []string{ev.EventID}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Pool.Exec(ctx, `INSERT INTO processed_events (event_id, event_type, payload_hash, outcome) VALUES ($1, $2, '\x00', 'sent')`,
			ev.EventID, ev.Type); err != nil {
			t.Fatal(err)
		}
	}
	stuck := e.StatusChange(t, e.NewApp(t)) // never published, too old now
	late := e.StatusChange(t, e.NewApp(t))  // never published, still young enough
	for _, q := range []struct {
		sql string
		id  string
	}{
		{`UPDATE processed_events SET processed_at = now() - interval '31 days' WHERE event_id = $1`, old.EventID},
		{`UPDATE outbox SET created_at = now() - interval '31 days', published_at = now() - interval '31 days' WHERE event_id = $1`, old.EventID},
		{`UPDATE outbox SET created_at = now() - interval '29 days 1 hour' WHERE event_id = $1`, stuck.EventID},
		{`UPDATE outbox SET created_at = now() - interval '28 days' WHERE event_id = $1`, late.EventID},
	} {
		if _, err := e.Pool.Exec(ctx, q.sql, q.id); err != nil {
			t.Fatal(err)
		}
	}

	var metrics workertest.LogBuffer
	s := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher(), Logger: slog.New(slog.NewJSONHandler(e.Logs, nil)), Metrics: &metrics})
	r, err := s.Handle(ctx, events.EventBridgeEvent{})
	if err != nil {
		t.Fatal(err)
	}
	want := sweeper.Report{Published: 1, Expired: []string{stuck.EventID}, Deleted: map[string]int64{"processed_events": 1, "outbox": 1}}
	if diff := cmp.Diff(want, r, cmpopts.IgnoreMapEntries(func(_ string, n int64) bool { return n == 0 })); diff != "" {
		t.Fatalf("report (-want +got):\n%s", diff)
	}
	if !e.Published(t, late.EventID) || e.Published(t, stuck.EventID) {
		t.Fatal("want the late row published and the stuck one not")
	}
	if cs := e.Claims(t, old.EventID); len(cs) != 0 {
		t.Error("old claim kept")
	}
	if cs := e.Claims(t, recent.EventID); len(cs) != 1 {
		t.Error("recent claim deleted")
	}
	left := outboxIDs(t, e)
	if !slices.Equal(left, []string{stuck.EventID, late.EventID, recent.EventID}) {
		t.Fatalf("outbox rows left = %v, want [stuck late recent]", left)
	}
	var expiredLines, doneLines int
	for _, l := range e.Logs.Lines(t) {
		if l["level"] == "ERROR" && l["event_id"] == stuck.EventID {
			expiredLines++
		}
		// The report's line counts each kept table, under table_deleted.
		if l["msg"] == "sweep done" {
			doneLines++
			for table, n := range r.Deleted {
				if l[table+"_deleted"] != float64(n) {
					t.Errorf("sweep done: %s_deleted = %v, want %d", table, l[table+"_deleted"], n)
				}
			}
		}
	}
	if expiredLines != 1 || doneLines != 1 {
		t.Errorf("ERROR lines about the expired event = %d, sweep done lines = %d; want 1 each", expiredLines, doneLines)
	}
	m := metrics.Metrics(t)
	if len(m) != 1 || m[0]["EventsPublished"] != 1.0 || m[0]["OutboxExpired"] != 1.0 || m[0]["OutboxBacklog"] != 0.0 ||
		m[0]["OutboxOldestAgeSeconds"] != 0.0 || m[0]["Service"] != "sweeper" {
		t.Fatalf("metrics = %v", m)
	}

	// The next sweep neither publishes nor expires the row again; the
	// expired row is deleted once it is as old as the retention.
	if _, err := e.Pool.Exec(ctx, `UPDATE outbox SET expired_at = now() - interval '31 days' WHERE event_id = $1`, stuck.EventID); err != nil {
		t.Fatal(err)
	}
	r, err = s.Sweep(ctx)
	if err != nil || r.Published != 0 || len(r.Expired) != 0 || r.Deleted["outbox"] != 1 {
		t.Fatalf("second sweep = %+v, %v; want only the expired row deleted", r, err)
	}
}

// Failed-login counts whose last failure is older than the login policy's
// reset period are deleted by the sweep, unless still blocking; the others
// stay. A failing retention of them fails the sweep, not its other steps
// nor the other tables' retention.
func TestSweeperDeletesOldLoginFailures(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	day := jobboard.DefaultLoginPolicy.ResetAfter
	for _, row := range []struct {
		key          string
		lastFailure  time.Duration // ago
		blockedUntil time.Duration // from now; 0 for NULL
	}{
		{"old", day + time.Hour, 0},
		{"old-block-over", day + time.Hour, -day},
		{"old-still-blocked", day + time.Hour, time.Hour},
		{"recent", day - time.Hour, 0},
	} {
		var until *time.Time
		if row.blockedUntil != 0 {
			u := time.Now().Add(row.blockedUntil)
			until = &u
		}
		if _, err := e.Pool.Exec(ctx, `INSERT INTO login_failures (email_digest, failures, last_failure, blocked_until) VALUES ($1, 7, $2, $3)`,
			[]byte(row.key), time.Now().Add(-row.lastFailure), until); err != nil {
			t.Fatal(err)
		}
	}
	s := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher(), DeleteBatch: 1})
	r, err := s.Sweep(ctx)
	if err != nil || r.Deleted["login_failures"] != 2 {
		t.Fatalf("sweep = %+v, %v; want 2 login failure counts deleted", r, err)
	}
	var left []string
	rows, _ := e.Pool.Query(ctx, `SELECT convert_from(email_digest, 'UTF8') FROM login_failures ORDER BY 1`)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !slices.Equal(left, []string{"old-still-blocked", "recent"}) {
		t.Fatalf("counts left = %v, %v; want [old-still-blocked recent]", left, err)
	}

	// A failing retention of them (the table gone) fails the sweep after
	// the other steps ran.
	stale := e.StatusChange(t, e.NewApp(t))
	if _, err := e.Pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '1 hour' WHERE event_id = $1`, stale.EventID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `INSERT INTO password_reset_requests (email_digest, requested_at) VALUES ('\x00', now() - interval '2 hours')`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `DROP TABLE login_failures`); err != nil {
		t.Fatal(err)
	}
	r, err = newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher()}).Sweep(ctx)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || !strings.Contains(err.Error(), "login_failures") || r.Published != 1 || r.Deleted["password_reset_requests"] != 1 {
		t.Fatalf("sweep with a failing login retention = %+v, %v; want the event published, the other tables swept and the error", r, err)
	}
}

// With the queue down, the backlog grows and the metrics line says how old
// its oldest event is, which is what the backlog alarm watches.
func TestSweeperReportsTheBacklog(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	first := e.StatusChange(t, e.NewApp(t))
	e.StatusChange(t, e.NewApp(t))
	if _, err := e.Pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '10 minutes' WHERE event_id = $1`, first.EventID); err != nil {
		t.Fatal(err)
	}
	var metrics workertest.LogBuffer
	down := &workertest.FaultyPublisher{Next: e.Publisher(), Before: errors.New("injected: SQS unreachable")}
	s := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: down, Grace: time.Microsecond, Metrics: &metrics})
	r, err := s.Handle(ctx, events.EventBridgeEvent{})
	if err == nil || r.Backlog.Count != 2 || r.Backlog.OldestAge < 10*time.Minute || r.Backlog.OldestAge > 11*time.Minute {
		t.Fatalf("sweep with SQS down = %+v, %v; want an error and a backlog of 2, the oldest 10 minutes old", r, err)
	}
	m := metrics.Metrics(t)
	if len(m) != 1 || m[0]["OutboxBacklog"] != 2.0 {
		t.Fatalf("metrics = %v, want a backlog of 2", m)
	}
	if age, _ := m[0]["OutboxOldestAgeSeconds"].(float64); age < 600 || age > 660 {
		t.Errorf("OutboxOldestAgeSeconds = %v, want about 600", m[0]["OutboxOldestAgeSeconds"])
	}
}

func outboxIDs(t *testing.T, e *workertest.Env) []string {
	t.Helper()
	rows, err := e.Pool.Query(context.Background(), `SELECT event_id::text FROM outbox ORDER BY created_at`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	if _, err := sweeper.New(sweeper.Config{}); err == nil {
		t.Error("New without Store and Publisher succeeded")
	}
	e := workertest.New(t, workertest.Options{})
	if _, err := sweeper.New(sweeper.Config{Store: e.DB, Publisher: e.Publisher(), Retention: 14 * 24 * time.Hour}); err == nil {
		t.Error("New with a retention shorter than the minimum succeeded")
	}
}

// 12. The answers of idempotency keys are deleted once older than their
// lifetime (24 hours), whatever the retention; fresher ones are kept.
func TestSweeperDeletesExpiredIdempotencyKeys(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	for _, key := range []string{"expired-key-00001", "expired-key-00002", "fresh-key-0000001"} {
		if _, err := e.DB.Write(ctx, &jobboard.IdempotentRequest{Scope: "user:1", Key: key, Fingerprint: []byte{1}},
			func(jobboard.Writes) (*jobboard.StoredResponse, error) {
				return &jobboard.StoredResponse{Status: 201, Body: []byte("{}")}, nil
			}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Pool.Exec(ctx,
		`UPDATE idempotency_keys SET created_at = now() - interval '24 hours 1 minute' WHERE key LIKE 'expired-%'`); err != nil {
		t.Fatal(err)
	}
	r, err := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher(), DeleteBatch: 1}).Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Deleted["idempotency_keys"] != 2 {
		t.Fatalf("report = %+v, want 2 idempotency keys deleted", r)
	}
	if _, err := e.DB.StoredResponse(ctx, "user:1", "fresh-key-0000001"); err != nil {
		t.Fatalf("fresh key: %v", err)
	}
	var left int
	if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys`).Scan(&left); err != nil || left != 1 {
		t.Fatalf("keys left = %d, %v; want 1", left, err)
	}
}

// Verification requests older than the policy's window count against no
// bound and are deleted by the sweep; younger ones stay.
func TestSweeperDeletesOldVerificationRequests(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	window := jobboard.DefaultVerificationPolicy.Window
	for i, ago := range []time.Duration{window + time.Minute, 2 * window, window - time.Minute, time.Second} {
		if _, err := e.Pool.Exec(ctx, `INSERT INTO email_verification_requests (user_id, email_digest, requested_at) VALUES ($1, $2, $3)`,
			i+1, []byte{byte(i)}, time.Now().Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher(), DeleteBatch: 1}).Sweep(ctx)
	if err != nil || r.Deleted["verification_requests"] != 2 {
		t.Fatalf("sweep = %+v, %v; want 2 verification requests deleted", r, err)
	}
	var left int
	if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM email_verification_requests`).Scan(&left); err != nil || left != 2 {
		t.Fatalf("requests left = %d, %v; want the 2 within the window", left, err)
	}
}

// Password reset requests older than the policy's window are deleted by
// the sweep, as verification requests are; younger ones stay.
func TestSweeperDeletesOldPasswordResetRequests(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	window := jobboard.DefaultPasswordResetPolicy.Window
	for i, ago := range []time.Duration{window + time.Minute, 2 * window, window - time.Minute, time.Second} {
		if _, err := e.Pool.Exec(ctx, `INSERT INTO password_reset_requests (email_digest, requested_at) VALUES ($1, $2)`,
			[]byte{byte(i)}, time.Now().Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}
	r, err := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher(), DeleteBatch: 1}).Sweep(ctx)
	if err != nil || r.Deleted["password_reset_requests"] != 2 {
		t.Fatalf("sweep = %+v, %v; want 2 password reset requests deleted", r, err)
	}
	var left int
	if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM password_reset_requests`).Scan(&left); err != nil || left != 2 {
		t.Fatalf("requests left = %d, %v; want the 2 within the window", left, err)
	}
}

// The keys of applied delivery feedback events and the emails' delivery
// states are deleted once older than the retention, as the claims are;
// younger ones stay. A copy of an event whose key is still there changes
// nothing.
func TestSweeperDeletesOldDeliveryFeedback(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx := context.Background()
	retention := jobboard.MinRetention
	young := jobboard.Feedback{ID: "Bounce:m-young:fb", Kind: jobboard.FeedbackBounced, MessageID: "m-young",
		Recipients: []string{"young@example.com"}, At: time.Now().Add(-retention + time.Hour)}
	for i, f := range []jobboard.Feedback{
		{ID: "Delivery:m-old", Kind: jobboard.FeedbackDelivered, MessageID: "m-old", Recipients: []string{"old@example.com"}, At: time.Now().Add(-retention - time.Hour)},
		{ID: "Send:m-older", Kind: jobboard.FeedbackSent, MessageID: "m-older", Recipients: []string{"old@example.com"}, At: time.Now().Add(-2 * retention)},
		young,
	} {
		if _, err := e.DB.ApplyFeedback(ctx, f); err != nil {
			t.Fatal(err)
		}
		// The key's age is when it was received: as old as its event here.
		if _, err := e.Pool.Exec(ctx, `UPDATE email_feedback_events SET received_at = $2 WHERE feedback_id = $1`, f.ID, f.At); err != nil {
			t.Fatal(i, err)
		}
	}
	r, err := newSweeper(t, sweeper.Config{Store: e.DB, Publisher: e.Publisher(), Retention: retention, DeleteBatch: 1}).Sweep(ctx)
	if err != nil || r.Deleted["feedback_events"] != 2 || r.Deleted["email_deliveries"] != 2 {
		t.Fatalf("sweep = %+v, %v; want 2 feedback events and 2 deliveries deleted", r, err)
	}
	var keys, deliveries []string
	for q, into := range map[string]*[]string{
		`SELECT coalesce(array_agg(feedback_id), '{}') FROM email_feedback_events`: &keys,
		`SELECT coalesce(array_agg(ses_message_id), '{}') FROM email_deliveries`:   &deliveries,
	} {
		if err := e.Pool.QueryRow(ctx, q).Scan(into); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(keys, []string{young.ID}) || !slices.Equal(deliveries, []string{young.MessageID}) {
		t.Fatalf("left: keys %v, deliveries %v; want only the young event's", keys, deliveries)
	}
	// The young event's key still makes its copy a duplicate.
	if res, err := e.DB.ApplyFeedback(ctx, young); err != nil || !res.Duplicate {
		t.Errorf("a copy of the young event: %+v, %v; want a duplicate", res, err)
	}
}
