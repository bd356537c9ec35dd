package worker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/worker"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// record builds the SQS record Lambda would hand over for body.
func record(body string) events.SQSMessage {
	return events.SQSMessage{MessageId: uuid.NewString(), ReceiptHandle: "rh-" + uuid.NewString(), Body: body, EventSource: "aws:sqs"}
}

func failedIDs(resp events.SQSEventResponse) []string {
	ids := make([]string, 0, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	sort.Strings(ids)
	return ids
}

func messageIDs(recs ...events.SQSMessage) []string {
	ids := make([]string, 0, len(recs))
	for _, r := range recs {
		ids = append(ids, r.MessageId)
	}
	sort.Strings(ids)
	return ids
}

// outcomes returns the outcome of every record line of the logs, by
// message id.
func outcomes(t *testing.T, logs *workertest.LogBuffer) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, l := range logs.Records(t) {
		id, _ := l["message_id"].(string)
		o, _ := l["outcome"].(string)
		out[id] = append(out[id], o)
	}
	return out
}

func wantEmails(t *testing.T, e *workertest.Env, app workertest.App, ev jobboard.Event, n int) {
	t.Helper()
	got := e.EmailsTo(t, app.CandidateEmail)
	if len(got) != n {
		t.Fatalf("emails to %s = %d, want %d", app.CandidateEmail, len(got), n)
	}
	if n > 0 && got[0].Subject != app.Subject(t, ev) {
		t.Errorf("subject = %q, want %q", got[0].Subject, app.Subject(t, ev))
	}
}

func wantClaim(t *testing.T, e *workertest.Env, eventID, outcome string) {
	t.Helper()
	cs := e.Claims(t, eventID)
	if outcome == "" {
		if len(cs) != 0 {
			t.Fatalf("claims of %s = %+v, want none", eventID, cs)
		}
		return
	}
	if len(cs) != 1 || cs[0].Outcome != outcome {
		t.Fatalf("claims of %s = %+v, want one %q", eventID, cs, outcome)
	}
}

// 2. The same event as two SQS messages (different message ids, one
// event_id): one email, both messages deleted.
func TestSameEventTwoMessagesSendsOneEmail(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ev := app.Event()
	body := workertest.Body(t, ev)
	first, second := e.SendBody(t, body), e.SendBody(t, body)
	if first == second {
		t.Fatalf("both sends got message id %s", first)
	}

	e.Drain(t, e.Poller(e.Handler(t, e.Sender)), 30*time.Second)

	wantEmails(t, e, app, ev, 1)
	wantClaim(t, e, ev.EventID, "sent")
	got := outcomes(t, e.Logs)
	all := append(slices.Clone(got[first]), got[second]...)
	sort.Strings(all)
	if !slices.Equal(all, []string{"duplicate", "sent"}) {
		t.Errorf("outcomes = %v, want one sent and one duplicate", got)
	}
}

// The same event twice in one batch: the first record's claim commits
// before the second starts, so the second is a duplicate.
func TestSameEventTwiceInOneBatch(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ev := app.Event()
	a, b := record(workertest.Body(t, ev)), record(workertest.Body(t, ev))

	resp, err := e.Handler(t, e.Sender).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{a, b}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want no failures", resp, err)
	}
	wantEmails(t, e, app, ev, 1)
	if got := outcomes(t, e.Logs); !slices.Equal(got[a.MessageId], []string{"sent"}) || !slices.Equal(got[b.MessageId], []string{"duplicate"}) {
		t.Errorf("outcomes = %v, want sent then duplicate", got)
	}
}

// 3. A crash after the send, before the delete: the batch is handled but
// never deleted. After the visibility timeout SQS delivers it again, and
// the worker skips it: still one email.
func TestCrashBeforeDeleteIsSkippedOnRedelivery(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{VisibilityTimeout: 1})
	app := e.NewApp(t)
	ev := app.Event()
	msgID := e.SendBody(t, workertest.Body(t, ev))
	h := e.Handler(t, e.Sender)

	batch := e.Receive(t, 10)
	if len(batch.Records) != 1 || batch.Records[0].MessageId != msgID {
		t.Fatalf("received %+v, want the one message %s", batch.Records, msgID)
	}
	resp, err := h.Handle(context.Background(), batch)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	wantEmails(t, e, app, ev, 1)
	// ... and the process dies here: no DeleteMessage.

	e.Drain(t, e.Poller(h), 30*time.Second)
	wantEmails(t, e, app, ev, 1)
	wantClaim(t, e, ev.EventID, "sent")
	if got := outcomes(t, e.Logs)[msgID]; !slices.Equal(got, []string{"sent", "duplicate"}) {
		t.Errorf("outcomes of %s = %v, want sent, then duplicate on redelivery", msgID, got)
	}
}

// 4. A failed send releases the claim and reports the record; the retry
// after the visibility timeout sends the one email.
func TestFailedSendIsRetried(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{VisibilityTimeout: 1})
	app := e.NewApp(t)
	ev := app.Event()
	msgID := e.SendBody(t, workertest.Body(t, ev))
	down := errors.New("injected: SES answered 503")
	m := &workertest.FlakyMailer{Next: e.Sender, Fail: func(call int, _ jobboard.StatusEmail) error {
		if call == 1 {
			return down
		}
		return nil
	}}
	h := e.Handler(t, m)

	batch := e.Receive(t, 10)
	resp, err := h.Handle(context.Background(), batch)
	if err != nil || !slices.Equal(failedIDs(resp), []string{msgID}) {
		t.Fatalf("Handle = %+v, %v; want %s failed", resp, err, msgID)
	}
	wantClaim(t, e, ev.EventID, "")
	wantEmails(t, e, app, ev, 0)

	e.Drain(t, e.Poller(h), 30*time.Second)
	wantClaim(t, e, ev.EventID, "sent")
	wantEmails(t, e, app, ev, 1)
	if attempted, sent := m.Calls(); attempted != 2 || sent != 1 {
		t.Errorf("sends attempted %d, succeeded %d; want 2, 1", attempted, sent)
	}
}

// 5. Two workers, each on its own pool, get the same event at the same
// moment, a hundred times over: exactly one email per event, every time.
// The loser of a race finds the winner's live lease (busy: retried later)
// or its finished claim (duplicate); retried until it succeeds, it is a
// duplicate.
func TestConcurrentWorkersSendOnce(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	var mu sync.Mutex
	perEvent := map[string]int{}
	counting := &workertest.FlakyMailer{Next: e.Sender, Fail: func(_ int, m jobboard.StatusEmail) error {
		mu.Lock()
		perEvent[m.EventID]++
		mu.Unlock()
		return nil
	}}
	handlers := []*worker.Handler{
		e.Handler(t, counting),
		e.Handler(t, counting, func(c *worker.Config) { c.Store = workertest.OpenWorkerDB(t, e.URL) }),
	}

	const rounds = 100
	ctx := context.Background()
	var evs []jobboard.Event
	for range rounds {
		ev := app.Event()
		evs = append(evs, ev)
		body := workertest.Body(t, ev)
		start := make(chan struct{})
		done := []chan struct{}{make(chan struct{}), make(chan struct{})}
		var wg sync.WaitGroup
		for i, h := range handlers {
			wg.Go(func() {
				defer close(done[i])
				<-start
				rec := record(body)
				for attempt := 0; ; attempt++ {
					resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{rec}})
					if err != nil {
						t.Errorf("Handle: %v", err)
						return
					}
					if len(resp.BatchItemFailures) == 0 {
						return
					}
					if attempt == 1 {
						t.Errorf("record still failing after the other worker finished")
						return
					}
					// Busy: the other worker holds the lease until its send
					// is recorded, so the retry waits for it to finish (as
					// SQS's redelivery would, later), not for a number of
					// attempts, which a slow send outlasted.
					select {
					case <-done[1-i]:
					case <-time.After(time.Minute): // a guard, should both ever wait
						t.Errorf("both workers failed the record")
						return
					}
				}
			})
		}
		close(start)
		wg.Wait()
	}

	for _, ev := range evs {
		if perEvent[ev.EventID] != 1 {
			t.Fatalf("event %s sent %d times, want 1", ev.EventID, perEvent[ev.EventID])
		}
		wantClaim(t, e, ev.EventID, "sent")
	}
	if n := len(e.EmailsTo(t, app.CandidateEmail)); n != rounds {
		t.Fatalf("emails in SES = %d, want %d", n, rounds)
	}
	counts := map[string]int{}
	for _, os := range outcomes(t, e.Logs) {
		for _, o := range os {
			counts[o]++
		}
	}
	if counts["sent"] != rounds || counts["duplicate"] != rounds || len(counts) > 3 || (len(counts) == 3 && counts["busy"] == 0) {
		t.Errorf("outcomes = %v, want %d sent, %d duplicate and maybe busy", counts, rounds, rounds)
	}
}

// 6. The application is deleted before the event is handled: no email, the
// claim is committed (redeliveries skip fast), the message is deleted.
func TestDeletedApplicationIsSkipped(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ev := app.Event()
	e.SendBody(t, workertest.Body(t, ev))
	if _, err := e.Pool.Exec(context.Background(), `DELETE FROM applications WHERE id = $1`, app.ID); err != nil {
		t.Fatal(err)
	}

	e.Drain(t, e.Poller(e.Handler(t, e.Sender)), 30*time.Second)
	wantEmails(t, e, app, ev, 0)
	wantClaim(t, e, ev.EventID, "application_missing")
}

// 7. Poison messages are reported failed on every delivery, never written
// anywhere, and reach the DLQ after maxReceiveCount with their bodies
// unchanged.
func TestPoisonMessagesReachTheDLQ(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{VisibilityTimeout: 1, MaxReceiveCount: 2})
	poison := []string{
		"this is not JSON",
		`{"type":"application.status_changed","application_id":1,"new_status":"reviewing"}`,
		`{"type":"application.deleted","event_id":"` + uuid.NewString() + `","application_id":1,"new_status":"reviewing"}`,
	}
	for _, body := range poison {
		e.SendBody(t, body)
	}
	p := e.Poller(e.Handler(t, e.Sender))
	workertest.Eventually(t, 60*time.Second, "poison in the DLQ", func() bool {
		if _, _, err := p.PollOnce(context.Background()); err != nil {
			t.Logf("poll: %v", err)
		}
		return e.Depth(t, e.QueueURL) == 0 && e.Depth(t, e.DLQURL) == len(poison)
	})

	var inDLQ []string
	for len(inDLQ) < len(poison) {
		out, err := e.SQS.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(e.DLQURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Messages) == 0 {
			t.Fatalf("DLQ gave back %d of %d messages", len(inDLQ), len(poison))
		}
		for _, m := range out.Messages {
			inDLQ = append(inDLQ, aws.ToString(m.Body))
		}
	}
	sort.Strings(inDLQ)
	want := slices.Sorted(slices.Values(poison))
	if !slices.Equal(inDLQ, want) {
		t.Errorf("DLQ bodies = %q, want %q", inDLQ, want)
	}
	var claims int
	if err := e.Pool.QueryRow(context.Background(), `SELECT count(*) FROM processed_events`).Scan(&claims); err != nil || claims != 0 {
		t.Errorf("processed_events rows = %d, %v; want 0", claims, err)
	}
	for id, os := range outcomes(t, e.Logs) {
		if len(os) < 2 || slices.ContainsFunc(os, func(o string) bool { return o != "malformed" }) {
			t.Errorf("message %s: outcomes %v, want malformed on each of ≥ 2 deliveries", id, os)
		}
	}
	for _, l := range e.Logs.Records(t) {
		if l["level"] != "ERROR" {
			t.Errorf("malformed message logged at %v, want ERROR: %v", l["level"], l)
		}
	}
}

// 8. A batch of ten in which three fail: exactly those three message ids
// come back, and the seven others are done.
func TestBatchReportsOnlyFailedRecords(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	var apps []workertest.App
	var evs []jobboard.Event
	var recs []events.SQSMessage
	for i := range 10 {
		app := e.NewApp(t)
		apps = append(apps, app)
		ev := app.Event()
		evs = append(evs, ev)
		body := workertest.Body(t, ev)
		if i == 6 {
			body = `{"type":"application.status_changed"` // truncated
		}
		recs = append(recs, record(body))
	}
	failing := map[string]bool{evs[2].EventID: true, evs[8].EventID: true}
	m := &workertest.FlakyMailer{Next: e.Sender, Fail: func(_ int, em jobboard.StatusEmail) error {
		if failing[em.EventID] {
			return errors.New("injected: connection reset")
		}
		return nil
	}}

	resp, err := e.Handler(t, m).Handle(context.Background(), events.SQSEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := failedIDs(resp), messageIDs(recs[2], recs[6], recs[8]); !slices.Equal(got, want) {
		t.Fatalf("batchItemFailures = %v, want %v", got, want)
	}
	for i, ev := range evs {
		switch i {
		case 2, 6, 8:
			wantClaim(t, e, ev.EventID, "")
		default:
			wantClaim(t, e, ev.EventID, "sent")
		}
	}
	emails := 0
	for _, app := range apps {
		emails += len(e.EmailsTo(t, app.CandidateEmail))
	}
	if emails != 7 {
		t.Errorf("emails = %d, want 7", emails)
	}
}

// 10. Little time left: the records not yet started are reported failed
// without being started, so nothing of them is half done.
func TestDeadlineStopsStartingRecords(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)

	t.Run("time runs out during the batch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		deadline, _ := ctx.Deadline()
		// A clock that the first send moves to 4s before the deadline, as
		// if the send had taken its time; the start margin is 5s.
		var mu sync.Mutex
		now := deadline.Add(-30 * time.Second)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		slow := &workertest.FlakyMailer{Next: e.Sender, Fail: func(int, jobboard.StatusEmail) error {
			mu.Lock()
			now = deadline.Add(-4 * time.Second)
			mu.Unlock()
			return nil
		}}
		h := e.Handler(t, slow, func(c *worker.Config) { c.Now = clock; c.StartMargin = 5 * time.Second })
		var evs []jobboard.Event
		var recs []events.SQSMessage
		for range 4 {
			ev := app.Event()
			evs = append(evs, ev)
			recs = append(recs, record(workertest.Body(t, ev)))
		}

		resp, err := h.Handle(ctx, events.SQSEvent{Records: recs})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := failedIDs(resp), messageIDs(recs[1:]...); !slices.Equal(got, want) {
			t.Fatalf("batchItemFailures = %v, want the three unstarted %v", got, want)
		}
		wantClaim(t, e, evs[0].EventID, "sent")
		for _, ev := range evs[1:] {
			wantClaim(t, e, ev.EventID, "")
		}
		if attempted, _ := slow.Calls(); attempted != 1 {
			t.Errorf("sends attempted = %d, want 1", attempted)
		}
		for _, r := range recs[1:] {
			if got := outcomes(t, e.Logs)[r.MessageId]; !slices.Equal(got, []string{"not_started"}) {
				t.Errorf("outcomes of %s = %v, want not_started", r.MessageId, got)
			}
		}
		for _, l := range e.Logs.Records(t) {
			if l["outcome"] == "not_started" && (l["event_id"] == "" || l["application_id"] != float64(app.ID)) {
				t.Errorf("not_started line without the event's ids: %v", l)
			}
		}
	})

	t.Run("too little time from the start", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		m := &workertest.FlakyMailer{Next: e.Sender}
		ev := app.Event()
		rec := record(workertest.Body(t, ev))
		resp, err := e.Handler(t, m).Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{rec}})
		if err != nil || !slices.Equal(failedIDs(resp), []string{rec.MessageId}) {
			t.Fatalf("Handle = %+v, %v; want the record failed", resp, err)
		}
		wantClaim(t, e, ev.EventID, "")
		if attempted, _ := m.Calls(); attempted != 0 {
			t.Errorf("sends attempted = %d, want 0", attempted)
		}
	})
}

// SES throttling rolls the record back and does not start the rest of the
// batch: back off instead of hammering.
func TestThrottlingStopsTheBatch(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	m := &workertest.FlakyMailer{Next: e.Sender, Fail: func(call int, _ jobboard.StatusEmail) error {
		if call == 2 {
			return fmt.Errorf("injected: TooManyRequestsException: %w", jobboard.ErrMailThrottled)
		}
		return nil
	}}
	var evs []jobboard.Event
	var recs []events.SQSMessage
	for range 4 {
		ev := app.Event()
		evs = append(evs, ev)
		recs = append(recs, record(workertest.Body(t, ev)))
	}

	resp, err := e.Handler(t, m).Handle(context.Background(), events.SQSEvent{Records: recs})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := failedIDs(resp), messageIDs(recs[1:]...); !slices.Equal(got, want) {
		t.Fatalf("batchItemFailures = %v, want %v", got, want)
	}
	wantClaim(t, e, evs[0].EventID, "sent")
	for _, ev := range evs[1:] {
		wantClaim(t, e, ev.EventID, "")
	}
	if attempted, sent := m.Calls(); attempted != 2 || sent != 1 {
		t.Errorf("sends attempted %d, sent %d; want 2, 1 (nothing started after the throttle)", attempted, sent)
	}
	got := outcomes(t, e.Logs)
	if !slices.Equal(got[recs[1].MessageId], []string{"throttled"}) ||
		!slices.Equal(got[recs[2].MessageId], []string{"not_started"}) || !slices.Equal(got[recs[3].MessageId], []string{"not_started"}) {
		t.Errorf("outcomes = %v", got)
	}
}

// A permanent rejection (here a real one: mail.Sender refuses a recipient
// that is not a bare address) keeps the claim with its outcome: the message
// is deleted and never retried.
func TestPermanentRejectionIsRecordedNotRetried(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	if _, err := e.Pool.Exec(context.Background(), `UPDATE users SET email = $2 WHERE id = $1`,
		app.Candidate.UserID, "Sam <"+app.CandidateEmail+">"); err != nil {
		t.Fatal(err)
	}
	ev := app.Event()
	m := &workertest.FlakyMailer{Next: e.Sender}
	h := e.Handler(t, m)
	for range 2 {
		rec := record(workertest.Body(t, ev))
		resp, err := h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{rec}})
		if err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("Handle = %+v, %v; want success (deleted, not retried)", resp, err)
		}
	}
	wantClaim(t, e, ev.EventID, "rejected")
	if attempted, sent := m.Calls(); attempted != 1 || sent != 0 {
		t.Errorf("sends attempted %d, sent %d; want 1, 0", attempted, sent)
	}
	lines := e.Logs.Records(t)
	if len(lines) != 2 || lines[0]["outcome"] != "rejected" || lines[0]["level"] != "WARN" || lines[1]["outcome"] != "duplicate" {
		t.Fatalf("log lines = %v, want a WARN rejected, then a duplicate", lines)
	}
	if errText, _ := lines[0]["error"].(string); !strings.Contains(errText, jobboard.ErrMailRejected.Error()) {
		t.Errorf("rejection logged without its reason: %v", lines[0])
	}
}

// One event id with two different payloads: the second is not emailed and
// is logged at ERROR.
func TestPayloadMismatchIsLoggedAtError(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ev := app.Event()
	other := ev
	other.NewStatus = jobboard.StatusRejected
	a, b := record(workertest.Body(t, ev)), record(workertest.Body(t, other))

	resp, err := e.Handler(t, e.Sender).Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{a, b}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	wantEmails(t, e, app, ev, 1)
	lines := e.Logs.Records(t)
	if len(lines) != 2 {
		t.Fatalf("log lines = %v", lines)
	}
	l := lines[1]
	if l["level"] != "ERROR" || l["outcome"] != "payload_mismatch" || l["event_id"] != ev.EventID ||
		!strings.Contains(l["msg"].(string), "same event_id, different payload") {
		t.Errorf("mismatch line = %v", l)
	}
}

// A claim statement stuck behind another transaction longer than
// lock_timeout makes the record fail as busy (to be retried), not the
// batch, and nothing is sent.
func TestLockTimeoutFailsTheRecord(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ctx := context.Background()
	impatient, err := postgres.Open(ctx, e.URL, postgres.WorkerSession(200*time.Millisecond, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	m := &workertest.FlakyMailer{Next: e.Sender}
	h := e.Handler(t, m, func(c *worker.Config) { c.Store = impatient })

	// Two applications: a failed record holds back its application's next.
	held, free := app.Event(), e.NewApp(t).Event()
	tx, err := e.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the safety net; rolled back below
	if _, err := tx.Exec(ctx, `INSERT INTO processed_events (event_id, event_type, payload_hash, lease_token, lease_until)
		VALUES ($1, $2, $3, gen_random_uuid(), now() + interval '1 minute')`, held.EventID, held.Type, held.PayloadHash()); err != nil {
		t.Fatal(err)
	}

	a, b := record(workertest.Body(t, held)), record(workertest.Body(t, free))
	resp, err := h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{a, b}})
	if err != nil || !slices.Equal(failedIDs(resp), []string{a.MessageId}) {
		t.Fatalf("Handle = %+v, %v; want only %s failed", resp, err, a.MessageId)
	}
	// Alone in its batch, it is still a record failure, not an outage.
	resp, err = h.Handle(ctx, events.SQSEvent{Records: []events.SQSMessage{a}})
	if err != nil || !slices.Equal(failedIDs(resp), []string{a.MessageId}) {
		t.Fatalf("Handle alone = %+v, %v; want the record failed", resp, err)
	}
	if got := outcomes(t, e.Logs)[a.MessageId]; !slices.Equal(got, []string{"busy", "busy"}) {
		t.Errorf("outcomes = %v, want busy twice", got)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wantClaim(t, e, held.EventID, "")
	wantClaim(t, e, free.EventID, "sent")
	if attempted, _ := m.Calls(); attempted != 1 {
		t.Errorf("sends attempted = %d, want 1 (the free event)", attempted)
	}
}

// When the database cannot be reached at all, Handle fails the whole batch
// with an error instead of reporting every record.
func TestDatabaseDownFailsTheBatch(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	gone, err := postgres.Open(context.Background(), e.URL)
	if err != nil {
		t.Fatal(err)
	}
	gone.Close()
	m := &workertest.FlakyMailer{Next: e.Sender}
	// One record at a time, in batch order: the malformed record is handled
	// before the store error stops the batch, so the metric line has both.
	h := e.Handler(t, m, func(c *worker.Config) { c.Store = gone; c.Concurrency = 1 })

	_, err = h.Handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		record("not JSON"), record(workertest.Body(t, app.Event()))}})
	if err == nil {
		t.Fatal("Handle succeeded with the database closed")
	}
	if attempted, _ := m.Calls(); attempted != 0 {
		t.Errorf("sends attempted = %d, want 0", attempted)
	}
	// The metrics of a failed batch still count: the rollback alarm of a
	// deploy reads StoreErrors.
	if ms := e.Logs.Metrics(t); len(ms) != 1 || ms[0]["Records"] != 2.0 || ms[0]["StoreErrors"] != 1.0 || ms[0]["MalformedMessages"] != 1.0 {
		t.Errorf("EMF lines %v; want one with 2 records, 1 store error, 1 malformed", ms)
	}
}

// Every record line carries event_id, message_id, application_id and
// outcome, and every batch writes one EMF line with every counter, by
// function version too.
func TestLogsAndMetrics(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	sent, failed := app.Event(), app.Event()
	m := &workertest.FlakyMailer{Next: e.Sender, Fail: func(_ int, em jobboard.StatusEmail) error {
		if em.EventID == failed.EventID {
			return errors.New("injected: timeout")
		}
		return nil
	}}
	batch := events.SQSEvent{Records: []events.SQSMessage{
		record(workertest.Body(t, sent)),
		record(workertest.Body(t, sent)),
		record("{}"),
		record(workertest.Body(t, failed)),
	}}
	h := e.Handler(t, m, func(c *worker.Config) { c.FunctionVersion = "7" })
	if _, err := h.Handle(context.Background(), batch); err != nil {
		t.Fatal(err)
	}

	lines := e.Logs.Records(t)
	if len(lines) != 4 {
		t.Fatalf("record lines = %d, want 4: %v", len(lines), lines)
	}
	byMessage := map[string]map[string]any{}
	for i, l := range lines {
		for _, k := range []string{"event_id", "message_id", "application_id", "outcome", "lease_token", "level", "msg", "time"} {
			if _, ok := l[k]; !ok {
				t.Errorf("line %d lacks %q: %v", i, k, l)
			}
		}
		byMessage[l["message_id"].(string)] = l
	}
	for _, r := range batch.Records {
		if byMessage[r.MessageId] == nil {
			t.Errorf("no line about message %s", r.MessageId)
		}
	}
	if l := byMessage[batch.Records[0].MessageId]; l["application_id"] != float64(app.ID) || l["event_id"] != sent.EventID ||
		l["outcome"] != "sent" || l["lease_token"] == "" {
		t.Errorf("line of the first record = %v", l)
	}
	// The DEBUG claim line and the final line of an attempt share its token.
	claimed := e.Logs.Claimed(t)
	if len(claimed) != 2 {
		t.Fatalf("claimed lines = %d, want 2 (the sent and the failed record): %v", len(claimed), claimed)
	}
	if claimed[0]["lease_token"] != byMessage[batch.Records[0].MessageId]["lease_token"] || claimed[0]["level"] != "DEBUG" {
		t.Errorf("claim line %v does not match the final line's token", claimed[0])
	}

	metrics := e.Logs.Metrics(t)
	if len(metrics) != 1 {
		t.Fatalf("EMF lines = %d, want 1", len(metrics))
	}
	emf := metrics[0]
	want := map[string]float64{"EmailsSent": 1, "DuplicatesSkipped": 1, "MalformedMessages": 1, "SendFailures": 1,
		"SendingPaused": 0, "SendRefused": 0, "Throttled": 0, "ExpiredEvents": 0, "AmbiguousSends": 0, "UnverifiedRecipients": 0,
		"Superseded": 0, "Records": 4, "FailedRecords": 2, "StoreErrors": 0}
	for k, v := range want {
		if emf[k] != v {
			t.Errorf("EMF %s = %v, want %v", k, emf[k], v)
		}
	}
	aws := emf["_aws"].(map[string]any)
	if ts, ok := aws["Timestamp"].(float64); !ok || ts <= 0 {
		t.Errorf("EMF Timestamp = %v", aws["Timestamp"])
	}
	directive := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
	if directive["Namespace"] != "jobboard" {
		t.Errorf("namespace = %v", directive["Namespace"])
	}
	var names []string
	for _, mm := range directive["Metrics"].([]any) {
		md := mm.(map[string]any)
		if md["Unit"] != "Count" {
			t.Errorf("metric %v unit = %v, want Count", md["Name"], md["Unit"])
		}
		names = append(names, md["Name"].(string))
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"AmbiguousSends", "DuplicatesSkipped", "EmailsSent", "ExpiredEvents", "FailedRecords",
		"MalformedMessages", "Records", "SendFailures", "SendRefused", "SendingPaused", "StoreErrors", "Superseded", "SuppressedRecipients",
		"Throttled", "UnverifiedRecipients"}) {
		t.Errorf("metric names = %v", names)
	}
	if emf["FunctionVersion"] != "7" || fmt.Sprint(directive["Dimensions"]) != "[[Service] [Service FunctionVersion]]" {
		t.Errorf("FunctionVersion %v, dimensions %v; want 7, by Service and by Service and FunctionVersion", emf["FunctionVersion"], directive["Dimensions"])
	}
	// Every dimension named must be a member of the line, or CloudWatch
	// drops the document.
	for _, set := range directive["Dimensions"].([]any) {
		for _, d := range set.([]any) {
			if _, ok := emf[d.(string)]; !ok {
				t.Errorf("dimension %v is not a member of the line", d)
			}
		}
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	t.Parallel()
	if _, err := worker.New(worker.Config{}); err == nil {
		t.Error("New with nothing succeeded")
	}
}
