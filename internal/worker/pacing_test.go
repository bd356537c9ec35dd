package worker_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/worker"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// paced sets the pacing up: the Env's database as the schedule, the
// rate fixed, and the Env's queue to requeue on.
func paced(e *workertest.Env, rate float64) func(*worker.Config) {
	return func(c *worker.Config) {
		c.Schedule, c.Rate, c.Requeuer = e.DB, mail.NewSendRate(nil, rate), queue.NewRedeliverer(e.SQS, e.QueueURL)
	}
}

// At one email an hour, the first record of a batch takes the slot of now
// and sends; the others' slots are hours away, beyond the horizon, so each
// is put back on the queue as a new message, delayed: none fails (no
// receive burnt toward the dead-letter queue), none is sent.
func TestFarSlotsAreRequeuedNotFailed(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	mailer := &workertest.FlakyMailer{Next: e.Sender}
	h := e.Handler(t, mailer, paced(e, 1.0/3600))
	var batch events.SQSEvent
	for range 4 {
		e.SendBody(t, workertest.Body(t, e.NewApp(t).Event()))
	}
	batch = e.Receive(t, 10)
	if len(batch.Records) != 4 {
		t.Fatalf("received %d records, want 4", len(batch.Records))
	}
	resp, err := h.Handle(context.Background(), batch)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want no failure", resp, err)
	}
	if attempted, sent := mailer.Calls(); attempted != 1 || sent != 1 {
		t.Errorf("sends attempted %d, sent %d; want 1, 1", attempted, sent)
	}
	deferred := 0
	for _, r := range e.Logs.Records(t) {
		if r["outcome"] == "deferred" {
			deferred++
		}
	}
	if deferred != 3 {
		t.Errorf("%d records deferred, want 3", deferred)
	}
	// The batch's four (the event source mapping deletes them) and the
	// three new ones, delayed.
	if got := e.Depth(t, e.QueueURL); got != 7 {
		t.Errorf("queue holds %d messages, want 7 (4 received, 3 requeued)", got)
	}
}

// A send the mail service throttles anyway takes a new slot and is sent
// again within the invocation: the record does not fail.
func TestThrottledSendRetriesOnANewSlot(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	mailer := &workertest.FlakyMailer{Next: e.Sender, Fail: func(call int, _ jobboard.StatusEmail) error {
		if call <= 2 {
			return fmt.Errorf("%w: injected", jobboard.ErrMailThrottled)
		}
		return nil
	}}
	h := e.Handler(t, mailer, paced(e, 1000))
	app := e.NewApp(t)
	e.SendBody(t, workertest.Body(t, app.Event()))
	resp, err := h.Handle(context.Background(), e.Receive(t, 10))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want no failure", resp, err)
	}
	if attempted, sent := mailer.Calls(); attempted != 3 || sent != 1 {
		t.Errorf("sends attempted %d, sent %d; want 3 (two throttled), 1", attempted, sent)
	}
	if n := len(e.EmailsTo(t, app.CandidateEmail)); n != 1 {
		t.Errorf("%d emails, want 1", n)
	}
}

// Throttled on every slot it took, a record goes back on the queue as a
// new message: throttling alone never brings it nearer the dead-letter
// queue. The throttle still counts in the Throttled metric.
func TestThrottledEveryTimeIsRequeued(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	mailer := &workertest.FlakyMailer{Next: e.Sender, Fail: func(int, jobboard.StatusEmail) error {
		return fmt.Errorf("%w: injected", jobboard.ErrMailThrottled)
	}}
	h := e.Handler(t, mailer, paced(e, 1000))
	e.SendBody(t, workertest.Body(t, e.NewApp(t).Event()))
	resp, err := h.Handle(context.Background(), e.Receive(t, 10))
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want no failure (requeued)", resp, err)
	}
	if attempted, _ := mailer.Calls(); attempted != 3 {
		t.Errorf("sends attempted %d, want 3 (the first and two retries)", attempted)
	}
	if got := e.Depth(t, e.QueueURL); got != 2 {
		t.Errorf("queue holds %d messages, want 2 (the received one and its new copy)", got)
	}
	throttled := 0.0
	for _, m := range e.Logs.Metrics(t) {
		if v, ok := m["Throttled"].(float64); ok {
			throttled += v
		}
	}
	if throttled != 1 {
		t.Errorf("Throttled metric = %v, want 1", throttled)
	}
}
