package postgres_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// BenchmarkIdempotencyKeyFloor: what a keyed write costs at the database,
// below HTTP, against the same write without a key (one autocommit INSERT of
// a job, the cheapest write the API has), with durable commits as in
// production. Each iteration runs the three ways alternately, so that all
// meet the same disk; "×plain" is each keyed way's time over the plain
// INSERT's.
//
//   - "store": the store's keyed write as the API runs it: the look-up of a
//     stored answer, BEGIN, the claim (advisory lock), the INSERT, the
//     answer, COMMIT: six round trips.
//   - "two-round-trips": the fewest round trips a keyed write can take while
//     its answer commits in the write's transaction: BEGIN, the claim and the
//     INSERT sent as one pipeline, then the answer and COMMIT as another.
//     It gives up what the store's order buys (a concurrent retry answered
//     409 before the handler runs any statement; a replay found before the
//     handler decides anything), so it is a floor, not a design.
//
// The floor tells what the aim of 1.3× for a keyed POST can reach on this
// machine: the key's row is a second row in the commit, whatever the
// round trips.
func BenchmarkIdempotencyKeyFloor(b *testing.B) {
	ctx := context.Background()
	db := pgtest.NewDB(b)
	employer := mustUser(b, db, jobboard.RoleEmployer)
	company := mustCompany(b, db, employer)
	nj := newJob("Floor")
	jobArgs := []any{company.ID, employer.UserID, nj.Title, nj.Description, nj.Location, nj.Remote,
		nj.EmploymentType, nil, nil, nil, employer.PasswordChangedAt}
	ttl := jobboard.IdempotencyKeyTTL.Seconds()
	answer := jobboard.StoredResponse{
		Fingerprint: make([]byte, 32), Status: 201,
		Header: map[string]string{"Content-Type": "application/json", "Location": "/v1/jobs/1"},
		Body:   []byte(`{"id":1,"title":"Floor","description":"A job described in a few words."}`),
	}
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()

	plain := func() {
		if _, err := conn.Exec(ctx, postgres.CreateJobSQL, jobArgs...); err != nil {
			b.Fatal(err)
		}
	}
	store := func() {
		req := &jobboard.IdempotentRequest{Scope: "user:1", Key: rand.Text(), Fingerprint: answer.Fingerprint}
		if _, err := db.StoredResponse(ctx, req.Scope, req.Key); err == nil {
			b.Fatal("a fresh key has an answer")
		}
		_, err := db.Write(ctx, req, func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
			if _, err := st.CreateJob(ctx, employer, company.ID, nj); err != nil {
				return nil, err
			}
			return &answer, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	pipelined := func() {
		key := rand.Text()
		first := &pgx.Batch{}
		first.Queue("BEGIN")
		first.Queue(postgres.ClaimIdempotencyKeySQL, postgres.IdempotencyLockClass, "user:1", key, ttl)
		first.Queue(postgres.CreateJobSQL, jobArgs...)
		results := conn.SendBatch(ctx, first)
		var locked, answered bool
		_, err := results.Exec()
		if err == nil {
			err = results.QueryRow().Scan(&locked, &answered)
		}
		if err == nil {
			_, err = results.Exec()
		}
		if cerr := results.Close(); err == nil {
			err = cerr
		}
		if err != nil || !locked || answered {
			b.Fatalf("claim and insert: locked %t, answered %t, %v", locked, answered, err)
		}
		second := &pgx.Batch{}
		second.Queue(postgres.StoreAnswerSQL, "user:1", key, answer.Fingerprint, answer.Status,
			answer.Header, answer.Body, ttl)
		second.Queue("COMMIT")
		if err := conn.SendBatch(ctx, second).Close(); err != nil {
			b.Fatal(err)
		}
	}

	var plainT, storeT, pipelinedT time.Duration
	timed := func(total *time.Duration, fn func()) {
		start := time.Now()
		fn()
		*total += time.Since(start)
	}
	for b.Loop() {
		timed(&plainT, plain)
		timed(&storeT, store)
		timed(&pipelinedT, pipelined)
	}
	perOp := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / 1e6 }
	b.ReportMetric(perOp(plainT), "plain-ms/op")
	b.ReportMetric(perOp(storeT), "store-ms/op")
	b.ReportMetric(perOp(pipelinedT), "two-round-trips-ms/op")
	b.ReportMetric(float64(storeT)/float64(plainT), "store-×plain")
	b.ReportMetric(float64(pipelinedT)/float64(plainT), "two-round-trips-×plain")
}
