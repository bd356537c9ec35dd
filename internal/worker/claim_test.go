package worker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/dev/faultproxy"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/worker"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// The rows of the outcome table that the three-step claim added, acted out
// against PostgreSQL and the SQS and SES stand-ins.

// recordingRedeliverer passes the backoffs on to the real queue and keeps
// them, by message id, for the test to read.
type recordingRedeliverer struct {
	next jobboard.Redeliverer
	mu   sync.Mutex
	got  map[string]time.Duration
}

func (r *recordingRedeliverer) Redeliver(ctx context.Context, rs []jobboard.Redelivery) error {
	r.mu.Lock()
	if r.got == nil {
		r.got = map[string]time.Duration{}
	}
	for _, d := range rs {
		r.got[d.MessageID] = d.After
	}
	r.mu.Unlock()
	return r.next.Redeliver(ctx, rs)
}

func (r *recordingRedeliverer) after(id string) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, ok := r.got[id]
	return d, ok
}

func recording(e *workertest.Env) *recordingRedeliverer {
	return &recordingRedeliverer{next: queue.NewRedeliverer(e.SQS, e.QueueURL)}
}

// wantBackoff fails t unless the record's backoff lies in [lo, hi].
func wantBackoff(t *testing.T, r *recordingRedeliverer, rec events.SQSMessage, lo, hi time.Duration) {
	t.Helper()
	d, ok := r.after(rec.MessageId)
	if !ok || d < lo || d > hi {
		t.Errorf("backoff of %s = %v (%v), want between %v and %v", rec.MessageId, d, ok, lo, hi)
	}
}

func execSQL(t *testing.T, e *workertest.Env, sql string, args ...any) {
	t.Helper()
	if _, err := e.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// A worker died holding a claim; once its lease runs out, a redelivery
// takes the event over and sends the one email.
func TestExpiredLeaseIsTakenOver(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ev := app.Event()
	dead, err := e.DB.ClaimEvent(context.Background(), ev, time.Minute)
	if err != nil || dead.Outcome != "" {
		t.Fatalf("claim of the worker that dies: %+v, %v", dead, err)
	}
	h := e.Handler(t, e.Sender)
	rec := record(workertest.Body(t, ev))

	// While the lease lives, the redelivery is busy and sends nothing.
	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
	if err != nil || !slices.Equal(failedIDs(resp), []string{rec.MessageId}) {
		t.Fatalf("Handle during the lease = %+v, %v; want the record failed", resp, err)
	}
	wantEmails(t, e, app, ev, 0)

	execSQL(t, e, `UPDATE processed_events SET lease_until = now() - interval '1 second' WHERE event_id = $1`, ev.EventID)
	resp, err = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle after the lease = %+v, %v; want success", resp, err)
	}
	wantEmails(t, e, app, ev, 1)
	cs := e.Claims(t, ev.EventID)
	if len(cs) != 1 || cs[0].Outcome != "sent" || cs[0].Attempts != 2 {
		t.Fatalf("claims = %+v, want sent on the second attempt", cs)
	}
	if got := outcomes(t, e.Logs)[rec.MessageId]; !slices.Equal(got, []string{"busy", "sent"}) {
		t.Errorf("outcomes = %v, want busy, then sent", got)
	}
	lines := e.Logs.Records(t)
	if last := lines[len(lines)-1]; last["attempts"] != 2.0 {
		t.Errorf("sent line = %v, want attempts 2", last)
	}
}

// A worker whose lease ran out while it was sending (frozen, say) finds
// another worker owning the event: it can neither record its send over
// the new owner's claim nor release it. Both emails left: this is the
// documented window (the lease expired before the mark), and the first
// worker says so at ERROR as lease_lost.
func TestTakenOverWorkerCannotMarkOrRelease(t *testing.T) {
	t.Parallel()
	for _, firstSendFails := range []bool{false, true} {
		t.Run(fmt.Sprintf("first send fails %v", firstSendFails), func(t *testing.T) {
			t.Parallel()
			e := workertest.New(t, workertest.Options{})
			app := e.NewApp(t)
			ev := app.Event()
			body := workertest.Body(t, ev)
			heir := e.Handler(t, e.Sender, func(c *worker.Config) { c.Store = workertest.OpenWorkerDB(t, e.URL) })

			// While the first worker is inside its send, its lease runs out
			// and the heir handles a copy of the event to the end.
			var heirResp events.SQSEventResponse
			frozen := &workertest.FlakyMailer{Next: e.Sender, Fail: func(int, jobboard.StatusEmail) error {
				execSQL(t, e, `UPDATE processed_events SET lease_until = now() - interval '1 second' WHERE event_id = $1`, ev.EventID)
				var err error
				heirResp, err = heir.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{record(body)}})
				if err != nil {
					t.Errorf("heir: %v", err)
				}
				if firstSendFails {
					return errors.New("injected: connection refused")
				}
				return nil
			}}
			first := e.Handler(t, frozen)
			rec := record(body)
			resp, err := first.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
			if err != nil {
				t.Fatal(err)
			}
			if len(heirResp.BatchItemFailures) != 0 {
				t.Fatalf("heir = %+v, want success", heirResp)
			}
			cs := e.Claims(t, ev.EventID)
			if len(cs) != 1 || cs[0].Outcome != "sent" || cs[0].Attempts != 2 {
				t.Fatalf("claims = %+v, want the heir's claim, sent on attempt 2, untouched", cs)
			}
			got := outcomes(t, e.Logs)[rec.MessageId]
			if firstSendFails {
				// The release finds the heir's claim and leaves it.
				wantEmails(t, e, app, ev, 1)
				if !slices.Equal(got, []string{"send_failed"}) || len(resp.BatchItemFailures) != 1 {
					t.Errorf("first worker: %v, %+v; want send_failed, retried", got, resp)
				}
				return
			}
			if n := len(e.EmailsTo(t, app.CandidateEmail)); n != 2 {
				t.Errorf("emails = %d, want 2 (the documented window)", n)
			}
			if !slices.Equal(got, []string{"lease_lost"}) || len(resp.BatchItemFailures) != 0 {
				t.Errorf("first worker: %v, %+v; want lease_lost and the message deleted", got, resp)
			}
			for _, l := range e.Logs.Records(t) {
				if l["outcome"] == "lease_lost" && l["level"] != "ERROR" {
					t.Errorf("lease_lost logged at %v, want ERROR", l["level"])
				}
			}
		})
	}
}

// The worker's database session is terminated while SES is being called
// (a failover, an idle timeout, an operator): no transaction is open, so
// nothing rolls back; the mark runs on a fresh connection and the event is
// emailed once. Redeliveries are duplicates.
func TestSessionTerminatedDuringSendSendsOnce(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ctx := context.Background()
	name := "worker-under-test"
	store, err := postgres.Open(ctx, e.URL+"&application_name="+name, postgres.WorkerSession(5*time.Second, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	var terminated atomic.Int64
	killer := &workertest.FlakyMailer{Next: e.Sender, Fail: func(int, jobboard.StatusEmail) error {
		var n int64
		err := e.Pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE datname = current_database() AND application_name = $1`, name).Scan(&n)
		if err != nil {
			t.Errorf("terminate: %v", err)
		}
		terminated.Add(n)
		return nil
	}}
	h := e.Handler(t, killer, func(c *worker.Config) { c.Store = store })

	ev := app.Event()
	for range 2 {
		resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{record(workertest.Body(t, ev))}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle = %+v, %v; want success", resp, err)
		}
	}
	if terminated.Load() == 0 {
		t.Fatal("no worker session was terminated")
	}
	wantEmails(t, e, app, ev, 1)
	wantClaim(t, e, ev.EventID, "sent")
	var got []string
	for _, os := range outcomes(t, e.Logs) {
		got = append(got, os...)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"duplicate", "sent"}) {
		t.Errorf("outcomes = %v, want sent, then duplicate", got)
	}
}

// SES accepted the email and the answer was lost (the connection reset
// after the request): the worker cannot know, releases the claim and says
// so (ambiguous_send); the retry sends the email once more. At most one
// more: the SDK does not retry on its own.
func TestAmbiguousSendSendsAtMostOnceMore(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{VisibilityTimeout: 30})
	app := e.NewApp(t)
	proxy, err := faultproxy.Start(context.Background(), e.SESEndpoint)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	var requests atomic.Int64
	proxy.SetRule(func(*http.Request, []byte) faultproxy.Fault {
		if requests.Add(1) == 1 {
			return faultproxy.ResetAfter
		}
		return faultproxy.Pass
	})
	sender, err := mail.NewSender(localaws.NewSESClient(proxy.URL), workertest.MailFrom)
	if err != nil {
		t.Fatal(err)
	}
	ev := app.Event()
	msgID := e.SendBody(t, workertest.Body(t, ev))

	// The retry comes back after its backoff (a few seconds), not after
	// the queue's 30 s visibility timeout.
	e.Drain(t, e.Poller(e.Handler(t, sender)), 20*time.Second)
	if n := len(e.EmailsTo(t, app.CandidateEmail)); n != 2 {
		t.Fatalf("emails = %d, want 2: the lost answer's and the retry's", n)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("SendEmail requests = %d, want 2 (one per delivery)", n)
	}
	wantClaim(t, e, ev.EventID, "sent")
	if got := outcomes(t, e.Logs)[msgID]; !slices.Equal(got, []string{"ambiguous_send", "sent"}) {
		t.Errorf("outcomes = %v, want ambiguous_send, then sent", got)
	}
	if m := e.Logs.Metrics(t); len(m) < 1 || m[0]["AmbiguousSends"] != 1.0 {
		t.Errorf("metrics = %v, want AmbiguousSends 1 in the first batch", m)
	}
}

// An account-level stop (sending paused) is not the message's fault: the
// claim is released, the batch stops, every record gets the longest
// backoff, an ERROR line and the SendingPaused metric say so; once SES
// sends again, the retry sends the one email.
func TestPausedAccountIsRetriedNotDropped(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	var paused atomic.Bool
	paused.Store(true)
	m := &workertest.FlakyMailer{Next: e.Sender, Fail: func(int, jobboard.StatusEmail) error {
		if paused.Load() {
			return fmt.Errorf("injected: SendingPausedException: %w", jobboard.ErrMailPaused)
		}
		return nil
	}}
	redelivery := recording(e)
	h := e.Handler(t, m, func(c *worker.Config) { c.Redelivery = redelivery; c.Concurrency = 1 })
	var apps []workertest.App
	var evs []jobboard.Event
	for range 3 {
		app := e.NewApp(t)
		apps, evs = append(apps, app), append(evs, app.Event())
		e.SendBody(t, workertest.Body(t, evs[len(evs)-1]))
	}
	batch := e.Receive(t, 10)
	if len(batch.Records) != 3 {
		t.Fatalf("received %d records, want 3", len(batch.Records))
	}

	resp, err := h.Handle(context.Background(), batch)
	if err != nil || len(resp.BatchItemFailures) != 3 {
		t.Fatalf("Handle = %+v, %v; want all three failed", resp, err)
	}
	for _, ev := range evs {
		wantClaim(t, e, ev.EventID, "")
	}
	if attempted, _ := m.Calls(); attempted != 1 {
		t.Errorf("sends attempted = %d, want 1 (the batch stops)", attempted)
	}
	for _, r := range batch.Records {
		wantBackoff(t, redelivery, r, 15*time.Minute, 30*time.Minute)
	}
	got := map[string]int{}
	for _, l := range e.Logs.Records(t) {
		got[l["outcome"].(string)]++
		if l["outcome"] == "paused" && l["level"] != "ERROR" {
			t.Errorf("paused logged at %v, want ERROR", l["level"])
		}
	}
	if got["paused"] != 1 || got["not_started"] != 2 {
		t.Errorf("outcomes = %v, want 1 paused and 2 not_started", got)
	}
	if ms := e.Logs.Metrics(t); len(ms) != 1 || ms[0]["SendingPaused"] != 1.0 || ms[0]["SendFailures"] != 1.0 {
		t.Errorf("metrics = %v, want SendingPaused 1, SendFailures 1", ms)
	}
	// The messages are out of sight for their backoff, not back after the
	// queue's visibility timeout.
	if n := len(e.Receive(t, 10).Records); n != 0 {
		t.Errorf("%d messages visible right after the backoff was set, want 0", n)
	}

	paused.Store(false)
	resp, err = h.Handle(context.Background(), batch)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("retry = %+v, %v; want success", resp, err)
	}
	for i, app := range apps {
		wantEmails(t, e, app, evs[i], 1)
	}
}

// Throttling stops the batch; the throttled record and those not started
// back off exponentially from their receive count, with jitter.
func TestThrottledRecordsBackOff(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	m := &workertest.FlakyMailer{Next: e.Sender, Fail: func(int, jobboard.StatusEmail) error {
		return fmt.Errorf("injected: TooManyRequestsException: %w", jobboard.ErrMailThrottled)
	}}
	redelivery := recording(e)
	h := e.Handler(t, m, func(c *worker.Config) { c.Redelivery = redelivery; c.Concurrency = 1 })
	first, later := record(workertest.Body(t, e.NewApp(t).Event())), record(workertest.Body(t, e.NewApp(t).Event()))
	later.Attributes = map[string]string{"ApproximateReceiveCount": "4"}

	resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{first, later}})
	if err != nil || len(resp.BatchItemFailures) != 2 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	// Receive 1: 5–10 s. Receive 4: 40–80 s.
	wantBackoff(t, redelivery, first, 5*time.Second, 10*time.Second)
	wantBackoff(t, redelivery, later, 40*time.Second, 80*time.Second)
	if ms := e.Logs.Metrics(t); len(ms) != 1 || ms[0]["Throttled"] != 1.0 {
		t.Errorf("metrics = %v, want Throttled 1", ms)
	}
}

// A failed record comes back after its backoff (a second or two on its
// first receive), well before the queue's visibility timeout.
func TestFailedRecordComesBackAfterItsBackoff(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{VisibilityTimeout: 60})
	app := e.NewApp(t)
	m := &workertest.FlakyMailer{Next: e.Sender, Fail: func(call int, _ jobboard.StatusEmail) error {
		if call == 1 {
			return errors.New("injected: SES answered 503")
		}
		return nil
	}}
	ev := app.Event()
	e.SendBody(t, workertest.Body(t, ev))
	start := time.Now()
	e.Drain(t, e.Poller(e.Handler(t, m)), 15*time.Second)
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("took %v", took)
	}
	wantEmails(t, e, app, ev, 1)
}

// Another worker holds a live lease: the record is retried once that lease
// would have run out, not sooner.
func TestBusyRecordWaitsForTheLease(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ev := app.Event()
	if _, err := e.DB.ClaimEvent(context.Background(), ev, time.Minute); err != nil {
		t.Fatal(err)
	}
	redelivery := recording(e)
	rec := record(workertest.Body(t, ev))
	resp, err := e.Handler(t, e.Sender, func(c *worker.Config) { c.Redelivery = redelivery }).
		Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	wantBackoff(t, redelivery, rec, 55*time.Second, 62*time.Second)
	wantEmails(t, e, app, ev, 0)
}

// An event older than the claim retention allows is refused: its claim
// may be gone, so an email could be a second one. Nothing is written, the
// message is deleted, ERROR and ExpiredEvents say so. An event just young
// enough is emailed.
func TestExpiredEventIsNeverEmailed(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	oldApp, youngApp := e.NewApp(t), e.NewApp(t)
	maxAge := jobboard.MaxEventAge(jobboard.DefaultRetention)
	old, young := oldApp.Event(), youngApp.Event()
	old.OccurredAt = time.Now().Add(-maxAge - time.Minute)
	young.OccurredAt = time.Now().Add(-maxAge + time.Minute)
	a, b := record(workertest.Body(t, old)), record(workertest.Body(t, young))

	resp, err := e.Handler(t, e.Sender).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{a, b}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want both done", resp, err)
	}
	wantEmails(t, e, oldApp, old, 0)
	wantClaim(t, e, old.EventID, "")
	wantEmails(t, e, youngApp, young, 1)
	got := outcomes(t, e.Logs)
	if !slices.Equal(got[a.MessageId], []string{"expired"}) || !slices.Equal(got[b.MessageId], []string{"sent"}) {
		t.Errorf("outcomes = %v", got)
	}
	for _, l := range e.Logs.Records(t) {
		if l["outcome"] == "expired" && l["level"] != "ERROR" {
			t.Errorf("expired logged at %v, want ERROR", l["level"])
		}
	}
	if ms := e.Logs.Metrics(t); len(ms) != 1 || ms[0]["ExpiredEvents"] != 1.0 {
		t.Errorf("metrics = %v, want ExpiredEvents 1", ms)
	}
}

// The records of a batch run at once: ten sends, each of a different
// application, are all in flight together (each waits until all ten are).
// Those of one application still run one after the other, in batch order.
func TestRecordsRunConcurrentlyAndInOrderPerApplication(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("ten applications at once", func(t *testing.T) {
		var arrived sync.WaitGroup
		arrived.Add(10)
		all := make(chan struct{})
		go func() { arrived.Wait(); close(all) }()
		barrier := &workertest.FlakyMailer{Next: e.Sender, Fail: func(int, jobboard.StatusEmail) error {
			arrived.Done()
			select {
			case <-all:
				return nil
			case <-ctx.Done():
				return errors.New("the ten sends were never in flight together")
			}
		}}
		var recs []events.SQSMessage
		for range 10 {
			recs = append(recs, record(workertest.Body(t, e.NewApp(t).Event())))
		}
		resp, err := e.Handler(t, barrier).Handle(ctx, events.SQSEvent{Records: recs})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle = %+v, %v; want all ten sent together", resp, err)
		}
	})

	t.Run("one application in order", func(t *testing.T) {
		a, b := e.NewApp(t), e.NewApp(t)
		var mu sync.Mutex
		var order []string
		m := &workertest.FlakyMailer{Next: e.Sender, Fail: func(_ int, em jobboard.StatusEmail) error {
			mu.Lock()
			order = append(order, em.EventID)
			mu.Unlock()
			return nil
		}}
		var recs []events.SQSMessage
		var aIDs []string
		for i := range 8 {
			app := a
			if i%2 == 1 {
				app = b
			}
			ev := app.Event()
			if app.ID == a.ID {
				aIDs = append(aIDs, ev.EventID)
			}
			recs = append(recs, record(workertest.Body(t, ev)))
		}
		resp, err := e.Handler(t, m).Handle(ctx, events.SQSEvent{Records: recs})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle = %+v, %v", resp, err)
		}
		var gotA []string
		for _, id := range order {
			if slices.Contains(aIDs, id) {
				gotA = append(gotA, id)
			}
		}
		if !slices.Equal(gotA, aIDs) {
			t.Errorf("sends of application A in order %v, want batch order %v", gotA, aIDs)
		}
	})
}

// A failed record holds back the later records of its application (so the
// candidate does not hear of "interview" before "reviewing"), and only
// those: other applications go on.
func TestFailedRecordHoldsBackItsApplication(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	a, b := e.NewApp(t), e.NewApp(t)
	a1, a2, b1 := a.Event(), a.Event(), b.Event()
	m := &workertest.FlakyMailer{Next: e.Sender, Fail: func(_ int, em jobboard.StatusEmail) error {
		if em.EventID == a1.EventID {
			return errors.New("injected: SES answered 500")
		}
		return nil
	}}
	recs := []events.SQSMessage{record(workertest.Body(t, a1)), record(workertest.Body(t, b1)), record(workertest.Body(t, a2))}
	resp, err := e.Handler(t, m).Handle(context.Background(), events.SQSEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := failedIDs(resp), messageIDs(recs[0], recs[2]); !slices.Equal(got, want) {
		t.Fatalf("failures = %v, want A's two records %v", got, want)
	}
	got := outcomes(t, e.Logs)
	if !slices.Equal(got[recs[0].MessageId], []string{"send_failed"}) || !slices.Equal(got[recs[2].MessageId], []string{"not_started"}) ||
		!slices.Equal(got[recs[1].MessageId], []string{"sent"}) {
		t.Errorf("outcomes = %v", got)
	}
	wantEmails(t, e, b, b1, 1)
	wantClaim(t, e, a2.EventID, "")
}

// A malformed message can never succeed: it is made visible again at once,
// so it burns its receives and reaches the dead-letter queue in seconds,
// not after maxReceiveCount visibility timeouts.
func TestMalformedMessageReachesTheDLQAtOnce(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{VisibilityTimeout: 60, MaxReceiveCount: 3})
	body := `{"type":"application.status_changed"` // truncated
	e.SendBody(t, body)
	p := e.Poller(e.Handler(t, e.Sender))
	workertest.Eventually(t, 20*time.Second, "the message in the DLQ", func() bool {
		if _, _, err := p.PollOnce(context.Background()); err != nil {
			t.Logf("poll: %v", err)
		}
		return e.Depth(t, e.DLQURL) == 1
	})
	if n := e.Depth(t, e.QueueURL); n != 0 {
		t.Errorf("main queue depth = %d, want 0", n)
	}
}

// failingMarks is the real store whose FinishClaims always fails, as when
// the database goes away between the send and the mark.
type failingMarks struct {
	jobboard.EventStore
	calls atomic.Int64
}

func (s *failingMarks) FinishClaims(context.Context, []jobboard.Finish) ([]string, error) {
	s.calls.Add(1)
	return nil, errors.New("injected: connection refused")
}

// The email left but the mark cannot be written before the deadline
// (retried meanwhile): the message is deleted, since the email is out, and
// the ERROR line (mark_failed) names the SES message id. Only a later copy
// of the event, after the lease, could send it again.
func TestMarkFailedDeletesTheMessage(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	store := &failingMarks{EventStore: e.DB}
	h := e.Handler(t, e.Sender, func(c *worker.Config) {
		c.Store = store
		c.StartMargin, c.SendMargin = time.Second, 500*time.Millisecond
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	ev := app.Event()
	rec := record(workertest.Body(t, ev))
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{rec}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want the message deleted", resp, err)
	}
	wantEmails(t, e, app, ev, 1)
	if n := store.calls.Load(); n < 2 {
		t.Errorf("mark attempts = %d, want it retried", n)
	}
	if cs := e.Claims(t, ev.EventID); len(cs) != 1 || cs[0].Outcome != "" {
		t.Errorf("claims = %+v, want one unfinished (its lease will run out)", cs)
	}
	lines := e.Logs.Records(t)
	if len(lines) != 1 || lines[0]["outcome"] != "mark_failed" || lines[0]["level"] != "ERROR" || lines[0]["ses_message_id"] == "" {
		t.Errorf("lines = %v, want one ERROR mark_failed with the SES message id", lines)
	}
	if ms := e.Logs.Metrics(t); len(ms) != 1 || ms[0]["StoreErrors"] != 1.0 || ms[0]["FailedRecords"] != 0.0 {
		t.Errorf("EMF lines %v; want the failed mark counted as a store error, the record not failed", ms)
	}
}

// Each email carries its event id, in a header, so any email can be traced
// to the event that sent it.
func TestEmailCarriesItsEventID(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ev := app.Event()
	if _, err := e.Handler(t, e.Sender).Handle(context.Background(),
		events.SQSEvent{Records: []events.SQSMessage{record(workertest.Body(t, ev))}}); err != nil {
		t.Fatal(err)
	}
	got := e.EmailsTo(t, app.CandidateEmail)
	if len(got) != 1 || got[0].Header(mail.EventIDHeader) != ev.EventID {
		t.Fatalf("emails = %+v, want one with %s: %s", got, mail.EventIDHeader, ev.EventID)
	}
}
