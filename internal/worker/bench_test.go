package worker_test

import (
	"context"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/worker"
)

// instantMailer returns at once, so the benchmark measures the worker and
// the database, not a mail service.
type instantMailer struct{ sent atomic.Int64 }

func (m *instantMailer) SendStatusEmail(context.Context, jobboard.StatusEmail) (string, error) {
	m.sent.Add(1)
	return "bench", nil
}

// BenchmarkWorker measures the worker's records per second on ONE database
// connection against two baselines measured in the same run, on the same
// connection, interleaved batch by batch so that drift (checkpoints, a
// busy neighbour) hits all of them alike:
//
//   - bare_claim: the claim transaction of the same SQL shape with nothing
//     around it (BEGIN; INSERT ... ON CONFLICT DO NOTHING RETURNING; SELECT
//     the application; COMMIT);
//   - bare_insert: BEGIN; INSERT; COMMIT, the floor of a durable write.
//
// It reports worker/bare_claim (aim: ≥ 0.9, the worker adds decoding,
// hashing, logging and the Lambda bookkeeping and nothing else),
// bare_claim/bare_insert (≈ 0.8 in DESIGN.md), and duplicate/first: how much
// faster a redelivery is skipped than a first delivery is handled (> 1: the
// duplicate path writes nothing, so its commit flushes no WAL).
func BenchmarkWorker(b *testing.B) {
	ctx := context.Background()
	db, err := postgres.Open(ctx, pgtest.NewURL(b), postgres.WorkerSession(5*time.Second, time.Minute),
		func(c *pgxpool.Config) { c.MaxConns = 1; c.MinConns = 1 })
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	appID := benchApplication(b, db)
	mailer := &instantMailer{}
	h, err := worker.New(worker.Config{
		Store: db, Mailer: mailer, Metrics: io.Discard})
	if err != nil {
		b.Fatal(err)
	}

	var first, duplicate, claim, insert time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; {
		n := min(10, b.N-done)
		batch := benchBatch(b, appID, n)

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

		t0 = time.Now()
		for range n {
			if claimed, err := db.BenchBareClaim(ctx, uuid.NewString(), appID); err != nil || !claimed {
				b.Fatalf("bare claim: %v, %v", claimed, err)
			}
		}
		claim += time.Since(t0)

		t0 = time.Now()
		for range n {
			if err := db.BenchBareInsert(ctx, uuid.NewString()); err != nil {
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

	rate := func(d time.Duration) float64 { return float64(b.N) / d.Seconds() }
	b.ReportMetric(rate(first), "worker_records/s")
	b.ReportMetric(rate(duplicate), "duplicate_records/s")
	b.ReportMetric(rate(claim), "bare_claim_tx/s")
	b.ReportMetric(rate(insert), "bare_insert_tx/s")
	b.ReportMetric(rate(first)/rate(claim), "worker/bare_claim")
	b.ReportMetric(rate(claim)/rate(insert), "bare_claim/bare_insert")
	b.ReportMetric(rate(duplicate)/rate(first), "duplicate/first")
}

// benchBatch returns n records, each a new status event about the
// application, as the event source mapping would deliver them.
func benchBatch(b *testing.B, appID int64, n int) events.SQSEvent {
	b.Helper()
	batch := events.SQSEvent{Records: make([]events.SQSMessage, n)}
	for i := range batch.Records {
		body, err := jobboard.EncodeEvent(jobboard.Event{
			Type: jobboard.EventTypeStatusChanged, EventID: uuid.NewString(), OccurredAt: time.Now(),
			ApplicationID: appID, OldStatus: jobboard.StatusSubmitted, NewStatus: jobboard.StatusReviewing})
		if err != nil {
			b.Fatal(err)
		}
		batch.Records[i] = events.SQSMessage{MessageId: uuid.NewString(), Body: string(body)}
	}
	return batch
}

// benchApplication creates a company, a job, a candidate and its
// application, and returns the application's id.
func benchApplication(b *testing.B, db *postgres.DB) int64 {
	b.Helper()
	ctx := context.Background()
	emp, err := db.CreateUser(ctx, jobboard.Registration{Email: "boss@example.com", Name: "Boss", Role: jobboard.RoleEmployer}, "x")
	if err != nil {
		b.Fatal(err)
	}
	cand, err := db.CreateUser(ctx, jobboard.Registration{Email: "sam@example.com", Name: "Sam", Role: jobboard.RoleCandidate}, "x")
	if err != nil {
		b.Fatal(err)
	}
	employer := jobboard.Actor{UserID: emp.ID, Role: emp.Role}
	company, err := db.CreateCompany(ctx, employer, jobboard.NewCompany{Name: "Acme"})
	if err != nil {
		b.Fatal(err)
	}
	job, err := db.CreateJob(ctx, employer, company.ID, jobboard.NewJob{Title: "Engineer", Description: "Go.", EmploymentType: jobboard.FullTime})
	if err != nil {
		b.Fatal(err)
	}
	app, err := db.Apply(ctx, jobboard.Actor{UserID: cand.ID, Role: cand.Role}, job.ID, jobboard.NewApplication{})
	if err != nil {
		b.Fatal(err)
	}
	return app.ID
}
