package webhook_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/secret"
	"github.com/jobboard/jobboard/internal/webhook"
)

// receiverLatency is how long the benchmark's receiver takes to answer.
const receiverLatency = 100 * time.Millisecond

// BenchmarkDeliveriesPerInstance: deliveries per second that one delivery
// function instance makes against a receiver that answers in 100 ms, one
// batch at a time as Lambda invokes it (lease, sign, POST, record, for
// every record of the batch at once), beside its floor measured in the
// same run, batch for batch, alternately: the same number of POSTs to the
// same receiver, at the same concurrency, with nothing else (no database,
// no signature). ratio is the handler's rate over the floor's.
func BenchmarkDeliveriesPerInstance(b *testing.B) {
	for _, batch := range []int{10, 50} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) { benchDeliveries(b, batch) })
	}
}

func benchDeliveries(b *testing.B, batch int) {
	ctx := context.Background()
	db := pgtest.NewDB(b)
	sealer, err := secret.NewSealer([]byte(strings.Repeat("b", 40)), nil)
	if err != nil {
		b.Fatal(err)
	}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(receiverLatency)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rc.Close()

	u, err := db.CreateUser(ctx, jobboard.Registration{Email: "bench@example.com", Name: "Bench", Role: jobboard.RoleEmployer}, "h")
	if err != nil {
		b.Fatal(err)
	}
	boss := jobboard.Actor{UserID: u.ID, Role: u.Role}
	co, err := db.CreateCompany(ctx, boss, jobboard.NewCompany{Name: "Bench"})
	if err != nil {
		b.Fatal(err)
	}
	sealed, _ := sealer.Seal([]byte(jobboard.NewWebhookSecret()), jobboard.WebhookSecretContext(co.ID))
	_, err = db.CreateWebhookEndpoint(ctx, boss, co.ID, jobboard.NewWebhookEndpoint{URL: rc.URL + "/in", EventTypes: []string{"job.closed"}}, sealed)
	if err != nil {
		b.Fatal(err)
	}
	// The deliveries to make: job.closed events, dispatched before the
	// clock starts (pings would not do: a ping while one is pending is
	// that one).
	rounds := max(1, (b.N+batch-1)/batch)
	batches := make([]events.SQSEvent, rounds+1) // the last for the warm-up
	closed := jobboard.JobClosed
	for i := range batches {
		for j := range batch {
			var delivery jobboard.Event
			for _, ev := range pgtest.MustWrite(b, db.DB, func(st jobboard.Writes) error {
				job, err := st.CreateJob(ctx, boss, co.ID, jobboard.NewJob{Title: "Bench", Description: "d", EmploymentType: jobboard.FullTime})
				if err != nil {
					return err
				}
				_, err = st.UpdateJob(ctx, boss, job.ID, jobboard.JobPatch{Status: &closed})
				return err
			}) {
				if ev.Type == jobboard.EventTypeWebhookDelivery {
					delivery = ev
				}
			}
			body, _ := jobboard.EncodeEvent(delivery)
			batches[i].Records = append(batches[i].Records, events.SQSMessage{MessageId: fmt.Sprintf("m-%d-%d", i, j), Body: string(body)})
		}
	}
	// The function's pool: two connections (functions/webhook).
	role := pgtest.Open(b, pgtest.RoleURL(b, db.URL, pgtest.WebhookRole), func(c *pgxpool.Config) { c.MaxConns = 2 })
	h, err := webhook.New(webhook.Config{
		Store: role, Sealer: sealer, Concurrency: batch,
		Client: webhook.NewClient(webhook.ClientConfig{AllowInsecure: true}),
	})
	if err != nil {
		b.Fatal(err)
	}
	bare := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: batch}}
	post := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, rc.URL+"/in", bytes.NewReader([]byte(`{"type":"webhook.ping"}`)))
		if err != nil {
			return err
		}
		resp, err := bare.Do(req)
		if err != nil {
			return err
		}
		return resp.Body.Close()
	}

	// The endpoint as it is once known: a new endpoint is slow until its
	// first attempt answers quickly, and its company's slow slot would put
	// the rest of the first batch off (issue 29.4).
	warm := batches[rounds]
	warm.Records = warm.Records[:1]
	if resp, err := h.Handle(ctx, warm); err != nil || len(resp.BatchItemFailures) != 0 {
		b.Fatalf("warm-up: %d failures, %v", len(resp.BatchItemFailures), err)
	}

	var handlerTime, bareTime time.Duration
	b.ResetTimer()
	for i := range rounds {
		start := time.Now()
		resp, err := h.Handle(ctx, batches[i])
		handlerTime += time.Since(start)
		if err != nil || len(resp.BatchItemFailures) != 0 {
			b.Fatalf("batch %d: %d failures, %v", i, len(resp.BatchItemFailures), err)
		}
		b.StopTimer()
		start = time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, batch)
		for range batch {
			wg.Go(func() { errs <- post() })
		}
		wg.Wait()
		bareTime += time.Since(start)
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(rounds * batch)
	b.ReportMetric(n/handlerTime.Seconds(), "deliveries/s")
	b.ReportMetric(n/bareTime.Seconds(), "floor/s")
	b.ReportMetric(bareTime.Seconds()/handlerTime.Seconds(), "ratio")
	var delivered int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'`).Scan(&delivered); err != nil || delivered != rounds*batch+1 {
		b.Fatalf("%d of %d delivered (%v)", delivered, rounds*batch+1, err)
	}
}
