package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/worker"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// moveApp moves a's application through reviewing, interview and offer
// as the API does, and returns the events the changes wrote (versions 2,
// 3, 4).
func moveApp(t *testing.T, e *workertest.Env, a workertest.App) []jobboard.Event {
	t.Helper()
	var evs []jobboard.Event
	for _, s := range []jobboard.ApplicationStatus{jobboard.StatusReviewing, jobboard.StatusInterview, jobboard.StatusOffer} {
		evs = append(evs, pgtest.MustWrite(t, e.DB, func(st jobboard.Writes) error {
			_, err := st.ChangeStatus(context.Background(), a.Employer, a.ID, jobboard.StatusChange{Status: s})
			return err
		})...)
	}
	return evs
}

// deliver publishes ev and receives it back as a batch of its own.
func deliver(t *testing.T, e *workertest.Env, ev jobboard.Event) events.SQSEvent {
	t.Helper()
	if _, err := e.Publisher().Publish(context.Background(), []jobboard.Event{ev}); err != nil {
		t.Fatal(err)
	}
	batch := e.Receive(t, 10)
	if len(batch.Records) != 1 {
		t.Fatalf("received %d records, want the one just published", len(batch.Records))
	}
	return batch
}

// subjects are the subjects of the emails a's candidate got, in the order
// the mail service accepted them.
func subjects(t *testing.T, e *workertest.Env, a workertest.App) []string {
	t.Helper()
	var out []string
	for _, m := range e.EmailsTo(t, a.CandidateEmail) {
		out = append(out, m.Subject)
	}
	return out
}

func wantSubjects(t *testing.T, e *workertest.Env, a workertest.App, evs ...jobboard.Event) {
	t.Helper()
	got := subjects(t, e, a)
	var want []string
	for _, ev := range evs {
		want = append(want, a.Subject(t, ev))
	}
	if len(got) != len(want) {
		t.Fatalf("emails %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("emails %q, want %q", got, want)
		}
	}
}

func wantOutcome(t *testing.T, e *workertest.Env, ev jobboard.Event, want jobboard.EventOutcome) {
	t.Helper()
	if cs := e.Claims(t, ev.EventID); len(cs) != 1 || cs[0].Outcome != string(want) {
		t.Errorf("claim of version %d = %+v, want %s", ev.Version, cs, want)
	}
}

func handleOK(t *testing.T, h *worker.Handler, batch events.SQSEvent) {
	t.Helper()
	resp, err := h.Handle(context.Background(), batch)
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v; want every record done", resp, err)
	}
}

// The case: reviewing → interview → offer, the events delivered
// newest first, each in a batch of its own. Only the offer is emailed;
// the older two are superseded (INFO, metric).
func TestNewestFirstAcrossBatchesEmailsOnlyTheNewest(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	a := e.NewApp(t)
	evs := moveApp(t, e, a)
	h := e.Handler(t, e.Sender)
	for i := len(evs) - 1; i >= 0; i-- {
		handleOK(t, h, deliver(t, e, evs[i]))
	}
	wantSubjects(t, e, a, evs[2])
	wantOutcome(t, e, evs[0], jobboard.OutcomeSuperseded)
	wantOutcome(t, e, evs[1], jobboard.OutcomeSuperseded)

	var superseded float64
	for _, m := range e.Logs.Metrics(t) {
		superseded += m["Superseded"].(float64)
	}
	if superseded != 2 {
		t.Errorf("Superseded metric = %v, want 2", superseded)
	}
	n := 0
	for _, l := range e.Logs.Records(t) {
		if l["outcome"] == string(jobboard.OutcomeSuperseded) {
			n++
			if l["level"] != "INFO" {
				t.Errorf("superseded line at %v, want INFO: %v", l["level"], l)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d superseded lines, want 2", n)
	}
}

// Delivered 1, 3, 2: the interview never arrives after the offer.
func TestOutOfOrderNeverEmailsAnOlderStatusLast(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	a := e.NewApp(t)
	evs := moveApp(t, e, a)
	h := e.Handler(t, e.Sender)
	for _, i := range []int{0, 2, 1} {
		handleOK(t, h, deliver(t, e, evs[i]))
	}
	wantSubjects(t, e, a, evs[0], evs[2])
	wantOutcome(t, e, evs[1], jobboard.OutcomeSuperseded)
}

// Newest first in one batch: the records of one application run in
// order, so the same holds.
func TestNewestFirstInOneBatch(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	a := e.NewApp(t)
	evs := moveApp(t, e, a)
	if _, err := e.Publisher().Publish(context.Background(), []jobboard.Event{evs[2], evs[1], evs[0]}); err != nil {
		t.Fatal(err)
	}
	batch := e.Receive(t, 10)
	if len(batch.Records) != 3 {
		t.Fatalf("received %d records, want 3", len(batch.Records))
	}
	handleOK(t, e.Handler(t, e.Sender), batch)
	wantSubjects(t, e, a, evs[2])
}

// In order, each in its own batch: every status is emailed, in order.
func TestInOrderEmailsEveryStatus(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	a := e.NewApp(t)
	evs := moveApp(t, e, a)
	h := e.Handler(t, e.Sender)
	for _, ev := range evs {
		handleOK(t, h, deliver(t, e, ev))
	}
	wantSubjects(t, e, a, evs...)
}

// gate holds the first status email a worker sends until released: the
// moment two workers overlap.
type gate struct {
	entered, release chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 1), release: make(chan struct{})} }

func (g *gate) hold(call int, _ jobboard.StatusEmail) error {
	if call == 1 {
		g.entered <- struct{}{}
		<-g.release
	}
	return nil
}

// overlap has a worker handle ev and holds it at the send of its email; it
// returns a second worker, with a pool of its own, to act meanwhile, and
// release, which lets the first send and waits for it to finish.
func overlap(t *testing.T, e *workertest.Env, ev jobboard.Event) (second *worker.Handler, release func()) {
	g := newGate()
	first := e.Handler(t, &workertest.FlakyMailer{Next: e.Sender, Fail: g.hold})
	second = e.Handler(t, e.Sender, func(c *worker.Config) { c.Store = workertest.OpenWorkerDB(t, e.URL) })
	done := make(chan struct{})
	batch := deliver(t, e, ev)
	go func() {
		defer close(done)
		handleOK(t, first, batch)
	}()
	<-g.entered
	return second, func() {
		close(g.release)
		<-done
	}
}

// Two workers at once, newest first: while one sends the offer, the other
// gets the interview and the review — both superseded at once, so only the
// offer reaches the candidate.
func TestNewestFirstAcrossTwoWorkersAtOnce(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	a := e.NewApp(t)
	evs := moveApp(t, e, a)
	second, release := overlap(t, e, evs[2])
	handleOK(t, second, deliver(t, e, evs[1]))
	handleOK(t, second, deliver(t, e, evs[0]))
	release()

	wantSubjects(t, e, a, evs[2])
	wantOutcome(t, e, evs[2], jobboard.OutcomeSent)
	wantOutcome(t, e, evs[1], jobboard.OutcomeSuperseded)
	wantOutcome(t, e, evs[0], jobboard.OutcomeSuperseded)
}

// Two workers at once, in order: while one sends the review, the other's
// interview waits (busy, a short backoff, nothing claimed) and goes after
// it; every status is emailed, in order.
func TestInOrderAcrossTwoWorkersAtOnce(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	a := e.NewApp(t)
	evs := moveApp(t, e, a)
	second, release := overlap(t, e, evs[0])
	batch := deliver(t, e, evs[1])
	resp, err := second.Handle(context.Background(), batch)
	if err != nil || len(resp.BatchItemFailures) != 1 {
		t.Fatalf("Handle while the older email is in flight = %+v, %v; want the record failed (busy)", resp, err)
	}
	if cs := e.Claims(t, evs[1].EventID); len(cs) != 0 {
		t.Errorf("the busy record claimed %+v", cs)
	}
	release()

	// Its backoff is short: it is back well before the other lease (the
	// invocation's 30 s and the 10 s margin) would have run out.
	start := time.Now()
	p := e.Poller(second)
	workertest.Eventually(t, 20*time.Second, "the interview emailed after the review", func() bool {
		if _, _, err := p.PollOnce(context.Background()); err != nil {
			t.Logf("poll: %v", err)
		}
		return len(e.Claims(t, evs[1].EventID)) == 1
	})
	t.Logf("the busy record came back after %v", time.Since(start).Round(100*time.Millisecond))
	handleOK(t, second, deliver(t, e, evs[2]))
	wantSubjects(t, e, a, evs...)
}
