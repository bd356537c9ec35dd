package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/dev/syncio"
	"github.com/jobboard/jobboard/internal/function/eventsource"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/outbox"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/secret"
	"github.com/jobboard/jobboard/internal/webhook"
	"github.com/jobboard/jobboard/internal/webhook/webhooktest"
)

// attemptTimeout is the client's timeout in these tests: a receiver that
// waits longer is timed out.
const attemptTimeout = time.Second

// pipeline is the whole webhook path on this machine: the API's store, the
// relay to a queue on the SQS stand-in, the event source mapping's stand-in
// (a poller) and the delivery handler, whose store runs as the database
// role jobboard_webhooks.
type pipeline struct {
	t         testing.TB
	db        *pgtest.DB
	sealer    *secret.Sealer
	queue     localaws.TestQueue
	relay     *outbox.Relay
	handler   *webhook.Handler
	poller    *eventsource.Poller
	employer  jobboard.Actor
	company   jobboard.Company
	job       jobboard.Job
	logs      *bytes.Buffer
	candidate atomic.Int64
	// relays is how often apply relays each event: 2 by default, as a
	// relay and a sweeper racing would.
	relays int
}

func newPipeline(t testing.TB, adjust ...func(*webhook.Config)) *pipeline {
	t.Helper()
	ctx := context.Background()
	p := &pipeline{t: t, db: pgtest.NewDB(t), logs: &bytes.Buffer{}, relays: 2}
	var err error
	if p.sealer, err = secret.NewSealer([]byte(strings.Repeat("s", 40)), nil); err != nil {
		t.Fatal(err)
	}
	p.queue = localaws.NewTestQueue(t, 30, 3)
	p.relay = outbox.NewRelay(queue.NewPublisher(p.queue.Client, p.queue.URL), p.db)
	role := pgtest.Open(t, pgtest.RoleURL(t, p.db.URL, pgtest.WebhookRole))
	cfg := webhook.Config{
		Store:          role,
		Sealer:         p.sealer,
		Client:         webhook.NewClient(webhook.ClientConfig{AllowInsecure: true, Timeout: attemptTimeout}),
		AttemptTimeout: attemptTimeout,
		Redelivery:     queue.NewRedeliverer(p.queue.Client, p.queue.URL),
		Requeuer:       queue.NewRedeliverer(p.queue.Client, p.queue.URL),
		BackoffBase:    time.Second,
		BackoffMax:     time.Second,
		Logger:         slog.New(slog.NewJSONHandler(syncio.NewWriter(p.logs), nil)),
	}
	for _, f := range adjust {
		f(&cfg)
	}
	if p.handler, err = webhook.New(cfg); err != nil {
		t.Fatal(err)
	}
	p.poller = &eventsource.Poller{Client: p.queue.Client, QueueURL: p.queue.URL, Handler: p.handler.Handle,
		WaitTimeSeconds: 1, HandlerTimeout: 30 * time.Second, FunctionName: "webhooks"}
	u, err := p.db.CreateUser(ctx, jobboard.Registration{Email: fmt.Sprintf("boss-%s@example.com", t.Name()), Name: "Boss", Role: jobboard.RoleEmployer}, "h")
	if err != nil {
		t.Fatal(err)
	}
	p.employer = jobboard.Actor{UserID: u.ID, Role: u.Role}
	if p.company, err = p.db.CreateCompany(ctx, p.employer, jobboard.NewCompany{Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	if p.job, err = p.db.CreateJob(ctx, p.employer, p.company.ID, jobboard.NewJob{Title: "Engineer", Description: "Builds.", Location: "Berlin", EmploymentType: jobboard.FullTime}); err != nil {
		t.Fatal(err)
	}
	return p
}

// endpoint creates an endpoint for url with a fresh secret, sealed as the
// API seals it, and returns it with the secret.
func (p *pipeline) endpoint(url string, types ...string) (jobboard.WebhookEndpoint, string) {
	p.t.Helper()
	if len(types) == 0 {
		types = jobboard.WebhookEventTypes
	}
	s := jobboard.NewWebhookSecret()
	sealed, _ := p.sealer.Seal([]byte(s), jobboard.WebhookSecretContext(p.company.ID))
	e, err := p.db.CreateWebhookEndpoint(context.Background(), p.employer, p.company.ID, jobboard.NewWebhookEndpoint{URL: url, EventTypes: types}, sealed)
	if err != nil {
		p.t.Fatal(err)
	}
	return e, s
}

// rotate gives the endpoint a fresh secret, the old one signing on for
// overlap, and returns the new one.
func (p *pipeline) rotate(e jobboard.WebhookEndpoint, overlap time.Duration) string {
	p.t.Helper()
	s := jobboard.NewWebhookSecret()
	sealed, _ := p.sealer.Seal([]byte(s), jobboard.WebhookSecretContext(p.company.ID))
	if _, err := p.db.RotateWebhookSecret(context.Background(), p.employer, p.company.ID, e.ID, sealed, overlap); err != nil {
		p.t.Fatal(err)
	}
	return s
}

// apply makes a new candidate apply, relays what the application wrote
// (p.relays times), and returns the application.
func (p *pipeline) apply() jobboard.Application {
	p.t.Helper()
	ctx := context.Background()
	n := p.candidate.Add(1)
	u, err := p.db.CreateUser(ctx, jobboard.Registration{Email: fmt.Sprintf("c%d-%s@example.com", n, p.t.Name()), Name: "Cand", Role: jobboard.RoleCandidate}, "h")
	if err != nil {
		p.t.Fatal(err)
	}
	var app jobboard.Application
	p.relayAll(pgtest.MustWrite(p.t, p.db.DB, func(st jobboard.Writes) (err error) {
		app, err = st.Apply(ctx, jobboard.Actor{UserID: u.ID, Role: u.Role}, p.job.ID, jobboard.NewApplication{})
		return err
	}), p.relays)
	return app
}

// relayAll relays the webhook deliveries of evs, each times times, to the
// webhook queue; the other events are the email worker's.
func (p *pipeline) relayAll(evs []jobboard.Event, times int) {
	p.t.Helper()
	for _, ev := range evs {
		if !jobboard.ForWebhookQueue(ev.Type) {
			continue
		}
		for range times {
			if err := p.relay.Relay(context.Background(), ev); err != nil {
				p.t.Fatal(err)
			}
		}
	}
}

// drain runs the poller until done says so, failing the test after a
// minute.
func (p *pipeline) drain(what string, done func() bool) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for !done() {
		if ctx.Err() != nil {
			p.t.Fatalf("waiting for %s: %v\nlogs:\n%s", what, ctx.Err(), p.logs)
		}
		if _, _, err := p.poller.PollOnce(ctx); err != nil && ctx.Err() == nil {
			p.t.Logf("poll: %v", err)
		}
	}
}

func (p *pipeline) deliveries(e jobboard.WebhookEndpoint) []jobboard.WebhookDelivery {
	p.t.Helper()
	page, err := p.db.WebhookDeliveries(context.Background(), p.employer, p.company.ID, e.ID, jobboard.WebhookDeliveryFilter{Limit: 100})
	if err != nil {
		p.t.Fatal(err)
	}
	return page.Items
}

// Each event reaches the receiver under one webhook-id, on every attempt
// the same, signed as the specification's own library checks, with the
// same body; failures (500, a timeout, a redirect) are retried, and a
// receiver that drops duplicates processes each event once, though the
// relay published every event twice.
func TestEveryEventArrivesOnceFromTheReceiversView(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	verifier := webhooktest.NpmVerifier(t)
	target := webhooktest.NewReceiver(t, nil)
	rc := webhooktest.NewReceiver(t, func(_ string, seen int) webhooktest.Answer {
		switch seen {
		case 0:
			return webhooktest.Answer{Status: 500, Body: []byte(strings.Repeat("overloaded ", 200))}
		case 1:
			return webhooktest.Answer{Delay: 3 * attemptTimeout}
		case 2:
			return webhooktest.Answer{Status: 302, Location: target.URL()}
		}
		return webhooktest.Answer{Status: 200}
	})
	e, secretKey := p.endpoint(rc.URL())

	app := p.apply()
	p.apply()
	ctx := context.Background()
	p.relayAll(pgtest.MustWrite(t, p.db.DB, func(st jobboard.Writes) error {
		if _, err := st.ChangeStatus(ctx, p.employer, app.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing}); err != nil {
			return err
		}
		closed := jobboard.JobClosed
		_, err := st.UpdateJob(ctx, p.employer, p.job.ID, jobboard.JobPatch{Status: &closed})
		return err
	}), 2)

	p.drain("four events processed", func() bool { return len(rc.Processed()) == 4 })

	byID := map[string][]webhooktest.Receipt{}
	for _, r := range rc.Receipts() {
		byID[r.ID] = append(byID[r.ID], r)
		if err := verifier.Verify(secretKey, r.Header, r.Body); err != nil {
			t.Errorf("standardwebhooks refuses %s: %v", r.ID, err)
		}
	}
	types := map[string]int{}
	for id, rs := range byID {
		if len(rs) != 4 {
			t.Errorf("%s arrived %d times, want 4 (500, timeout, redirect, 200)", id, len(rs))
		}
		for _, r := range rs[1:] {
			if !bytes.Equal(r.Body, rs[0].Body) {
				t.Errorf("%s: bodies differ between attempts", id)
			}
		}
		var typ struct{ Type string }
		_ = json.Unmarshal(rs[0].Body, &typ)
		types[typ.Type]++
	}
	want := map[string]int{"application.submitted": 2, "application.status_changed": 1, "job.closed": 1}
	if fmt.Sprint(types) != fmt.Sprint(want) {
		t.Errorf("event types %v, want %v", types, want)
	}
	for id, n := range rc.Processed() {
		if n != 1 {
			t.Errorf("%s answered 2xx %d times", id, n)
		}
	}
	if n := len(target.Receipts()); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}

	// The log: four attempts each, newest first, with what each got.
	for _, d := range p.deliveries(e) {
		if d.State != jobboard.DeliveryDelivered || d.Attempts != 4 || len(d.AttemptLog) != 4 {
			t.Errorf("delivery %d: %s after %d attempts (%d logged)", d.ID, d.State, d.Attempts, len(d.AttemptLog))
			continue
		}
		a := d.AttemptLog
		if *a[0].StatusCode != 200 || *a[1].StatusCode != 302 || a[2].StatusCode != nil || !strings.Contains(a[2].Error, "no answer within") ||
			*a[3].StatusCode != 500 || !a[3].ResponseTruncated || len(a[3].ResponseBody) != jobboard.MaxLoggedResponse {
			t.Errorf("delivery %d attempts %+v", d.ID, a)
		}
	}
	// Nothing of the secret in the logs.
	if strings.Contains(p.logs.String(), strings.TrimPrefix(secretKey, "whsec_")) {
		t.Error("the signing secret is in the logs")
	}
}

// A 410 disables the endpoint at once: the delivery fails, the company's
// members are emailed (an outbox row each), and later events write no
// deliveries for it.
func TestGoneDisablesTheEndpoint(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	rc := webhooktest.NewReceiver(t, func(string, int) webhooktest.Answer { return webhooktest.Answer{Status: http.StatusGone} })
	e, _ := p.endpoint(rc.URL())
	p.apply()
	p.drain("the delivery failed", func() bool {
		ds := p.deliveries(e)
		return len(ds) == 1 && ds[0].State == jobboard.DeliveryFailed
	})
	d := p.deliveries(e)[0]
	got, _ := p.db.WebhookEndpoint(context.Background(), p.employer, p.company.ID, e.ID)
	if d.FailureReason != jobboard.FailureGone || got.Enabled || got.DisabledReason != jobboard.DisabledGone || len(rc.Receipts()) != 1 {
		t.Errorf("delivery %s/%s, endpoint %+v, %d requests", d.State, d.FailureReason, got, len(rc.Receipts()))
	}
	var notices int
	_ = p.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE event_type = 'webhook.endpoint_disabled' AND payload->>'user_id' = $1`,
		fmt.Sprint(p.employer.UserID)).Scan(&notices)
	if notices != 1 {
		t.Errorf("%d emails queued for the member, want 1", notices)
	}
	p.apply()
	if n := len(p.deliveries(e)); n != 1 {
		t.Errorf("%d deliveries after disabling, want 1", n)
	}
}

// A receiver that fails for longer than the retry window: the delivery is
// given up, and an endpoint that failed that long is disabled, its members
// told.
func TestFailingForDaysGivesUpAndDisables(t *testing.T) {
	t.Parallel()
	p := newPipeline(t, func(c *webhook.Config) { c.RetryWindow, c.DisableAfter = 2*time.Second, 2*time.Second })
	rc := webhooktest.NewReceiver(t, func(string, int) webhooktest.Answer { return webhooktest.Answer{Status: 503} })
	e, _ := p.endpoint(rc.URL())
	p.apply()
	p.drain("the delivery given up", func() bool {
		ds := p.deliveries(e)
		return len(ds) == 1 && ds[0].State == jobboard.DeliveryFailed
	})
	d := p.deliveries(e)[0]
	got, _ := p.db.WebhookEndpoint(context.Background(), p.employer, p.company.ID, e.ID)
	if d.FailureReason != jobboard.FailureExpired || d.Attempts < 2 || got.Enabled || got.DisabledReason != jobboard.DisabledFailing {
		t.Errorf("delivery %s/%s after %d attempts, endpoint %+v", d.State, d.FailureReason, d.Attempts, got)
	}
}

// Secrets rotate without a gap: while both sign, a receiver holding either
// verifies; a retry after a rotation is signed with the secrets of the
// moment; once the old one stops, only the new one verifies.
func TestSecretsRotateWithoutAGap(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	// One message per delivery: the retry after the rotation is the same
	// message, after its backoff, not a second copy in the same batch.
	p.relays = 1
	verifier := webhooktest.NpmVerifier(t)
	var failNext atomic.Bool
	rc := webhooktest.NewReceiver(t, func(string, int) webhooktest.Answer {
		if failNext.CompareAndSwap(true, false) {
			return webhooktest.Answer{Status: 500}
		}
		return webhooktest.Answer{}
	})
	e, first := p.endpoint(rc.URL())
	last := func() webhooktest.Receipt {
		rs := rc.Receipts()
		return rs[len(rs)-1]
	}
	verifies := func(r webhooktest.Receipt, secrets ...string) []bool {
		out := make([]bool, len(secrets))
		for i, s := range secrets {
			out[i] = verifier.Verify(s, r.Header, r.Body) == nil
		}
		return out
	}
	deliver := func(n int) {
		p.apply()
		p.drain("a delivery", func() bool { return len(rc.Processed()) == n })
	}

	deliver(1)
	second := p.rotate(e, time.Hour)
	if got := verifies(last(), first, second); fmt.Sprint(got) != "[true false]" {
		t.Errorf("before the rotation: verifies with first, second = %v", got)
	}
	deliver(2)
	if got := verifies(last(), first, second); fmt.Sprint(got) != "[true true]" {
		t.Errorf("during the overlap: verifies with first, second = %v", got)
	}
	// A delivery whose first attempt fails, the secret rotated before its
	// retry: the retry is signed with the secrets of the moment.
	failNext.Store(true)
	p.apply()
	p.drain("the first attempt", func() bool { return len(rc.Receipts()) == 3 })
	third := p.rotate(e, 0)
	p.drain("the retry", func() bool { return len(rc.Processed()) == 3 })
	if got := verifies(last(), first, second, third); fmt.Sprint(got) != "[false false true]" {
		t.Errorf("after a rotation without overlap: verifies with first, second, third = %v", got)
	}
}

// A message that is not a delivery request goes to the dead-letter queue
// in seconds; the message of a deleted endpoint's delivery is dropped.
func TestMalformedAndOrphanedMessages(t *testing.T) {
	t.Parallel()
	p := newPipeline(t)
	ctx := context.Background()
	body := `{"type":"application.status_changed","event_id":"x"}`
	if _, err := p.queue.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &p.queue.URL, MessageBody: &body}); err != nil {
		t.Fatal(err)
	}
	rc := webhooktest.NewReceiver(t, nil)
	e, _ := p.endpoint(rc.URL())
	p.apply()
	if err := p.db.DeleteWebhookEndpoint(ctx, p.employer, p.company.ID, e.ID); err != nil {
		t.Fatal(err)
	}
	p.drain("the queue empty and the DLQ holding the malformed message", func() bool {
		depth, _ := localaws.QueueDepth(ctx, p.queue.Client, p.queue.URL)
		dlq, _ := localaws.QueueDepth(ctx, p.queue.Client, p.queue.DLQURL)
		return depth == 0 && dlq == 1
	})
	if n := len(rc.Receipts()); n != 0 {
		t.Errorf("the deleted endpoint got %d requests", n)
	}
}
