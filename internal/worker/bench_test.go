package worker_test

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/worker"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// instantMailer returns at once, so the benchmark measures the worker and
// the database, not a mail service.
type instantMailer struct{ sent atomic.Int64 }

func (m *instantMailer) SendStatusEmail(context.Context, jobboard.StatusEmail) (string, error) {
	m.sent.Add(1)
	return "bench", nil
}

func (m *instantMailer) SendVerificationEmail(context.Context, jobboard.VerificationEmail) (string, error) {
	m.sent.Add(1)
	return "bench", nil
}

func (m *instantMailer) SendPasswordResetEmail(context.Context, jobboard.PasswordResetEmail) (string, error) {
	m.sent.Add(1)
	return "bench", nil
}

// benchVerifyURL and benchResetURL are the links' bases in the benchmarks.
const (
	benchVerifyURL = "https://app.example/verify-email"
	benchResetURL  = "https://app.example/reset-password"
)

// The baselines, in SQL of the same shapes as the store's, run on a
// connection of their own.
const (
	// bareInsertSQL is the cheapest durable write there is: one row, one
	// index, inside BEGIN ... COMMIT.
	bareInsertSQL = `INSERT INTO processed_events (event_id, event_type, payload_hash, outcome) VALUES ($1, 'bench', '\x00', 'sent')`
	// oneTxClaimSQL and oneTxLoadSQL are the first worker's claim, which
	// held one transaction open across the email: BEGIN; claim; load the
	// application; (send); COMMIT.
	oneTxClaimSQL = `INSERT INTO processed_events (event_id, event_type, payload_hash, outcome) VALUES ($1, 'bench', '\x00', 'sent')
		ON CONFLICT (event_id) DO NOTHING RETURNING event_id`
	oneTxLoadSQL = `SELECT a.id, a.status, u.email, u.name, j.title, c.name FROM applications a
		JOIN jobs j ON j.id = a.job_id JOIN companies c ON c.id = j.company_id JOIN users u ON u.id = a.candidate_id
		WHERE a.id = $1`
)

// BenchmarkWorker measures the database work per email against baselines
// measured in the same run, interleaved batch by batch so that drift
// (checkpoints, a busy neighbour) hits all of them alike. The sender
// returns at once, so the time is the worker's and the database's:
//
//   - worker: a batch of ten records, each of a different application, as
//     deployed: concurrently, on a pool of two connections (claim statement
//     per record, the marks of the records that finish together in one
//     statement);
//   - one_tx_claim: what the first worker did per record, on one
//     connection: BEGIN; INSERT ... ON CONFLICT DO NOTHING RETURNING;
//     SELECT the application; (send); COMMIT;
//   - claim: the store's claim statement alone;
//   - bare_insert: BEGIN; INSERT; COMMIT, the floor of a durable write.
//
// It reports worker/one_tx_claim (time per email; aim ≤ 1.5),
// claim/bare_insert, and duplicate_speedup: how much faster a redelivered
// batch is skipped than a first one is handled.
func BenchmarkWorker(b *testing.B) {
	ctx := context.Background()
	url := pgtest.NewURL(b)
	db, err := postgres.Open(ctx, url, postgres.WorkerSession(5*time.Second, time.Minute),
		func(c *pgxpool.Config) { c.MaxConns = 2; c.MinConns = 2 })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(ctx) })
	pool := pgtest.Pool(b, url)
	apps := make([]int64, 10)
	for i := range apps {
		apps[i] = benchApplication(b, db, pool, i)
	}
	mailer := &instantMailer{}
	h, err := worker.New(worker.Config{Store: db, Mailer: mailer, VerifyEmailURL: benchVerifyURL, PasswordResetURL: benchResetURL, Metrics: io.Discard})
	if err != nil {
		b.Fatal(err)
	}

	var first, duplicate, claim, oneTx, insert time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(10, b.N-done)
		batch := events.SQSEvent{}
		for _, id := range apps[:n] {
			batch.Records = append(batch.Records, benchBatch(b, id, 1).Records...)
		}

		t0 := time.Now()
		resp, err := h.Handle(ctx, batch)
		first += time.Since(t0)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			b.Fatalf("first delivery: %+v, %v", resp, err)
		}

		t0 = time.Now()
		resp, err = h.Handle(ctx, batch)
		duplicate += time.Since(t0)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			b.Fatalf("redelivery: %+v, %v", resp, err)
		}

		for _, ev := range benchEvents(apps[0], n) {
			t0 = time.Now()
			c, err := db.ClaimEvent(ctx, ev, time.Minute)
			claim += time.Since(t0)
			if err != nil || c.Outcome != "" {
				b.Fatalf("claim: %+v, %v", c, err)
			}
		}

		t0 = time.Now()
		for range n {
			oneTxClaim(b, conn, apps[0])
		}
		oneTx += time.Since(t0)

		t0 = time.Now()
		for range n {
			if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, bareInsertSQL, uuid.NewString())
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		insert += time.Since(t0)
		done += n
	}
	b.StopTimer()
	if got := mailer.sent.Load(); got != int64(b.N) {
		b.Fatalf("emails sent = %d, want %d (one per first delivery, none per redelivery)", got, b.N)
	}

	perEmail := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
	b.ReportMetric(perEmail(first), "worker_µs/email")
	b.ReportMetric(perEmail(oneTx), "one_tx_claim_µs")
	b.ReportMetric(perEmail(claim), "claim_µs")
	b.ReportMetric(perEmail(insert), "bare_insert_µs")
	b.ReportMetric(float64(first)/float64(oneTx), "worker/one_tx_claim")
	b.ReportMetric(float64(claim)/float64(insert), "claim/bare_insert")
	b.ReportMetric(float64(first)/float64(duplicate), "duplicate_speedup")
}

// oneTxClaim runs the first worker's claim transaction once.
func oneTxClaim(b *testing.B, conn *pgx.Conn, appID int64) {
	b.Helper()
	ctx := context.Background()
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, oneTxClaimSQL, uuid.NewString()).Scan(&id); err != nil {
			return err
		}
		var (
			appIDGot                                int64
			status, email, name, title, companyName string
		)
		return tx.QueryRow(ctx, oneTxLoadSQL, appID).Scan(&appIDGot, &status, &email, &name, &title, &companyName)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// slowMailer adds a fixed latency to every send of the real sender: the
// time SES takes to answer, injected.
type slowMailer struct {
	next    jobboard.Mailer
	latency time.Duration
}

func (m slowMailer) SendStatusEmail(ctx context.Context, e jobboard.StatusEmail) (string, error) {
	t := time.NewTimer(m.latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return "", ctx.Err()
	case <-t.C:
	}
	return m.next.SendStatusEmail(ctx, e)
}

// SendVerificationEmail is not measured: the benchmark sends status emails.
func (m slowMailer) SendVerificationEmail(ctx context.Context, e jobboard.VerificationEmail) (string, error) {
	return m.next.SendVerificationEmail(ctx, e)
}

// SendPasswordResetEmail is not measured either.
func (m slowMailer) SendPasswordResetEmail(ctx context.Context, e jobboard.PasswordResetEmail) (string, error) {
	return m.next.SendPasswordResetEmail(ctx, e)
}

// statementTimer is a pgx tracer that adds up how long the connections
// spend on statements: the time the database is held (each of the worker's
// statements is a transaction of its own), without the time spent waiting
// for a connection of the pool.
type statementTimer struct {
	mu   sync.Mutex
	held time.Duration
}

type statementStart struct{}

func (s *statementTimer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, statementStart{}, time.Now())
}

func (s *statementTimer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if t0, ok := ctx.Value(statementStart{}).(time.Time); ok {
		s.mu.Lock()
		s.held += time.Since(t0)
		s.mu.Unlock()
	}
}

func (s *statementTimer) total() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// BenchmarkWorkerConcurrency measures one worker instance's throughput
// with 80 ms of SES latency injected in front of the real SES stand-in,
// batches of ten, each record of a different application (as in a busy
// system): records of a batch at once (Concurrency 10, the default, on the
// worker's pool of two connections) against one at a time (Concurrency 1),
// interleaved batch by batch. It reports concurrent/sequential (aim ≥ 5)
// and the database time held per email against the SES latency (aim ≤
// 0.1; the first worker held a connection for the whole send: ≥ 1).
func BenchmarkWorkerConcurrency(b *testing.B) {
	const latency = 80 * time.Millisecond
	e := workertest.New(b, workertest.Options{})
	ctx := context.Background()
	timer := &statementTimer{}
	db, err := postgres.Open(ctx, e.URL, postgres.WorkerSession(5*time.Second, time.Minute),
		func(c *pgxpool.Config) { c.MaxConns = 2; c.ConnConfig.Tracer = timer })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	apps := make([]int64, 10)
	for i := range apps {
		apps[i] = e.NewApp(b).ID
	}
	mailer := slowMailer{next: e.Sender, latency: latency}
	handler := func(concurrency int) *worker.Handler {
		h, err := worker.New(worker.Config{Store: db, Mailer: mailer, VerifyEmailURL: benchVerifyURL, PasswordResetURL: benchResetURL, Concurrency: concurrency, Metrics: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		return h
	}
	concurrent, sequential := handler(10), handler(1)

	var tConcurrent, tSequential time.Duration
	var heldConcurrent time.Duration
	b.ResetTimer()
	for range b.N {
		for _, run := range []struct {
			h    *worker.Handler
			t    *time.Duration
			held *time.Duration
		}{{concurrent, &tConcurrent, &heldConcurrent}, {sequential, &tSequential, nil}} {
			batch := events.SQSEvent{}
			for _, id := range apps {
				batch.Records = append(batch.Records, benchBatch(b, id, 1).Records...)
			}
			heldBefore := timer.total()
			t0 := time.Now()
			resp, err := run.h.Handle(ctx, batch)
			*run.t += time.Since(t0)
			if err != nil || len(resp.BatchItemFailures) != 0 {
				b.Fatalf("batch: %+v, %v", resp, err)
			}
			if run.held != nil {
				*run.held += timer.total() - heldBefore
			}
		}
	}
	b.StopTimer()
	emails := float64(10 * b.N)
	b.ReportMetric(emails/tConcurrent.Seconds(), "concurrent_emails/s")
	b.ReportMetric(emails/tSequential.Seconds(), "sequential_emails/s")
	b.ReportMetric(float64(tSequential)/float64(tConcurrent), "concurrent/sequential")
	b.ReportMetric(float64(heldConcurrent)/emails/float64(latency), "db_held/ses_latency")
}

// benchEvents returns n new status events about the application.
func benchEvents(appID int64, n int) []jobboard.Event {
	evs := make([]jobboard.Event, n)
	for i := range evs {
		evs[i] = jobboard.Event{
			Type: jobboard.EventTypeStatusChanged, EventID: uuid.NewString(), OccurredAt: time.Now(),
			ApplicationID: appID, OldStatus: jobboard.StatusSubmitted, NewStatus: jobboard.StatusReviewing}
	}
	return evs
}

// benchBatch returns n records, each a new status event about the
// application, as the event source mapping would deliver them.
func benchBatch(b testing.TB, appID int64, n int) events.SQSEvent {
	b.Helper()
	batch := events.SQSEvent{Records: make([]events.SQSMessage, n)}
	for i, ev := range benchEvents(appID, n) {
		body, err := jobboard.EncodeEvent(ev)
		if err != nil {
			b.Fatal(err)
		}
		batch.Records[i] = events.SQSMessage{MessageId: uuid.NewString(), Body: string(body)}
	}
	return batch
}

// benchApplication creates a company, a job, a candidate and its
// application (the n-th of the database), and returns the application's id.
// pool is a raw pool over db's database, for the fixture's shortcut.
func benchApplication(b *testing.B, db *postgres.DB, pool *pgxpool.Pool, n int) int64 {
	b.Helper()
	ctx := context.Background()
	emp, err := pgtest.CreateUser(ctx, pool, jobboard.Registration{Email: fmt.Sprintf("boss%d@example.com", n), Name: "Boss", Role: jobboard.RoleEmployer}, "x")
	if err != nil {
		b.Fatal(err)
	}
	cand, err := pgtest.CreateUser(ctx, pool, jobboard.Registration{Email: fmt.Sprintf("sam%d@example.com", n), Name: "Sam", Role: jobboard.RoleCandidate}, "x")
	if err != nil {
		b.Fatal(err)
	}
	pgtest.MarkVerified(b, pool, cand.ID)
	employer := jobboard.Actor{UserID: emp.ID, Role: emp.Role}
	var app jobboard.Application
	pgtest.MustWrite(b, db, func(st jobboard.Writes) error {
		company, err := st.CreateCompany(ctx, employer, jobboard.NewCompany{Name: "Acme"})
		if err != nil {
			return err
		}
		job, err := st.CreateJob(ctx, employer, company.ID, jobboard.NewJob{Title: "Engineer", Description: "Go.", EmploymentType: jobboard.FullTime})
		if err != nil {
			return err
		}
		app, err = st.Apply(ctx, jobboard.Actor{UserID: cand.ID, Role: cand.Role}, job.ID, jobboard.NewApplication{})
		return err
	})
	return app.ID
}
