package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// mustApplication makes the candidate apply to the world's job.
func mustApplication(t testing.TB, w world) jobboard.Application {
	t.Helper()
	a, err := w.db.Apply(context.Background(), w.candidate, w.job.ID, jobboard.NewApplication{})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return a
}

func statusEvent(applicationID int64) jobboard.Event {
	return jobboard.Event{
		Type:          jobboard.EventTypeStatusChanged,
		EventID:       uuid.NewString(),
		OccurredAt:    time.Now().UTC(),
		ApplicationID: applicationID,
		OldStatus:     jobboard.StatusSubmitted,
		NewStatus:     jobboard.StatusReviewing,
	}
}

// claim is a processed_events row.
type claim struct {
	hash    []byte
	outcome string
}

// claims returns the claim rows of an event id.
func claims(t testing.TB, db *postgres.DB, eventID string) []claim {
	t.Helper()
	rows, err := db.Pool().Query(context.Background(),
		`SELECT payload_hash, outcome FROM processed_events WHERE event_id = $1`, eventID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cs []claim
	for rows.Next() {
		var c claim
		if err := rows.Scan(&c.hash, &c.outcome); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cs
}

// recorder is a send callback that records what it was given and returns
// err.
type recorder struct {
	mu    sync.Mutex
	calls []jobboard.ApplicationDetails
	err   error
}

func (r *recorder) send(_ context.Context, d jobboard.ApplicationDetails) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, d)
	return r.err
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

var hashA, hashB = []byte("hash-a"), []byte("hash-b")

func TestProcessStatusEventFirstDeliveryThenDuplicates(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ctx := context.Background()
	ev := statusEvent(app.ID)

	var r recorder
	got, err := w.db.ProcessStatusEvent(ctx, ev, hashA, r.send)
	if err != nil || got != jobboard.OutcomeSent {
		t.Fatalf("first delivery = %q, %v; want sent", got, err)
	}
	candidate, err := w.db.UserByID(ctx, w.candidate.UserID)
	if err != nil {
		t.Fatal(err)
	}
	want := jobboard.ApplicationDetails{
		ApplicationID:  app.ID,
		Status:         jobboard.StatusSubmitted,
		CandidateEmail: candidate.Email,
		CandidateName:  candidate.Name,
		JobTitle:       w.job.Title,
		CompanyName:    w.company.Name,
	}
	if r.count() != 1 || r.calls[0] != want {
		t.Fatalf("send calls = %+v, want one with %+v", r.calls, want)
	}
	if cs := claims(t, w.db, ev.EventID); len(cs) != 1 || !bytes.Equal(cs[0].hash, hashA) || cs[0].outcome != "sent" {
		t.Fatalf("claims = %+v, want one 'sent' with hash A", cs)
	}

	// The same event again, any number of times: skipped, send not called.
	for range 3 {
		got, err = w.db.ProcessStatusEvent(ctx, ev, hashA, r.send)
		if err != nil || got != jobboard.OutcomeDuplicate {
			t.Fatalf("redelivery = %q, %v; want duplicate", got, err)
		}
	}
	// The same id with another payload: not sent either, but told apart.
	got, err = w.db.ProcessStatusEvent(ctx, ev, hashB, r.send)
	if err != nil || got != jobboard.OutcomePayloadMismatch {
		t.Fatalf("other payload = %q, %v; want payload_mismatch", got, err)
	}
	if r.count() != 1 {
		t.Errorf("send called %d times, want 1", r.count())
	}
	if cs := claims(t, w.db, ev.EventID); len(cs) != 1 || !bytes.Equal(cs[0].hash, hashA) {
		t.Errorf("claims = %+v, want the first delivery's only", cs)
	}
}

func TestProcessStatusEventFailedSendReleasesClaim(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ctx := context.Background()
	ev := statusEvent(app.ID)

	down := errors.New("mail server down")
	failing := recorder{err: down}
	got, err := w.db.ProcessStatusEvent(ctx, ev, hashA, failing.send)
	if !errors.Is(err, down) || got != "" {
		t.Fatalf("failed send = %q, %v; want the send error", got, err)
	}
	if cs := claims(t, w.db, ev.EventID); len(cs) != 0 {
		t.Fatalf("claims after failed send = %+v, want none", cs)
	}

	var ok recorder
	got, err = w.db.ProcessStatusEvent(ctx, ev, hashA, ok.send)
	if err != nil || got != jobboard.OutcomeSent || ok.count() != 1 {
		t.Fatalf("retry = %q, %v, %d sends; want sent once", got, err, ok.count())
	}
	if cs := claims(t, w.db, ev.EventID); len(cs) != 1 {
		t.Fatalf("claims after retry = %+v, want one", cs)
	}
}

func TestProcessStatusEventPermanentRejectionKeepsClaim(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ctx := context.Background()
	ev := statusEvent(app.ID)

	rejecting := recorder{err: errors.Join(errors.New("MessageRejected"), jobboard.ErrMailRejected)}
	got, err := w.db.ProcessStatusEvent(ctx, ev, hashA, rejecting.send)
	if err != nil || got != jobboard.OutcomeRejected {
		t.Fatalf("rejected send = %q, %v; want rejected, nil", got, err)
	}
	if cs := claims(t, w.db, ev.EventID); len(cs) != 1 || cs[0].outcome != "rejected" {
		t.Fatalf("claims = %+v, want one 'rejected'", cs)
	}
	var r recorder
	if got, err := w.db.ProcessStatusEvent(ctx, ev, hashA, r.send); err != nil || got != jobboard.OutcomeDuplicate || r.count() != 0 {
		t.Fatalf("redelivery = %q, %v, %d sends; want a duplicate, not sent", got, err, r.count())
	}
}

func TestProcessStatusEventApplicationMissing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	ev := statusEvent(1 << 40)

	var r recorder
	got, err := w.db.ProcessStatusEvent(ctx, ev, hashA, r.send)
	if err != nil || got != jobboard.OutcomeApplicationMissing || r.count() != 0 {
		t.Fatalf("missing application = %q, %v, %d sends; want application_missing, not sent", got, err, r.count())
	}
	if cs := claims(t, w.db, ev.EventID); len(cs) != 1 || cs[0].outcome != "application_missing" {
		t.Fatalf("claims = %+v, want one 'application_missing'", cs)
	}
	if got, _ := w.db.ProcessStatusEvent(ctx, ev, hashA, r.send); got != jobboard.OutcomeDuplicate {
		t.Fatalf("redelivery = %q, want duplicate", got)
	}
}

// A worker whose claim waits behind another transaction longer than
// lock_timeout gives up with ErrEventBusy and leaves nothing behind.
func TestProcessStatusEventLockTimeout(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	ctx := context.Background()
	holder, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	worker, err := postgres.Open(ctx, url, postgres.WorkerSession(100*time.Millisecond, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()

	ev := statusEvent(1)
	tx, err := holder.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // rolled back below; this is the safety net
	if _, err := tx.Exec(ctx, `INSERT INTO processed_events (event_id, event_type, payload_hash) VALUES ($1, $2, $3)`,
		ev.EventID, ev.Type, hashA); err != nil {
		t.Fatal(err)
	}

	var r recorder
	got, err := worker.ProcessStatusEvent(ctx, ev, hashA, r.send)
	if !errors.Is(err, jobboard.ErrEventBusy) || got != "" || r.count() != 0 {
		t.Fatalf("claim behind a held lock = %q, %v, %d sends; want ErrEventBusy, not sent", got, err, r.count())
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if cs := claims(t, worker, ev.EventID); len(cs) != 0 {
		t.Fatalf("claims = %+v, want none", cs)
	}
}

// Two workers on separate pools claim the same event at the same moment:
// the primary key lets exactly one of them send. The first holds its claim
// open while sending, so the second really waits on the row lock.
func TestProcessStatusEventConcurrentClaims(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ctx := context.Background()
	url := w.db.Pool().Config().ConnString()
	other, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	for range 20 {
		ev := statusEvent(app.ID)
		var sends recorder
		outcomes := make(chan jobboard.EventOutcome, 2)
		var wg sync.WaitGroup
		for _, db := range []*postgres.DB{w.db, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got, err := db.ProcessStatusEvent(ctx, ev, hashA, sends.send)
				if err != nil {
					t.Errorf("process: %v", err)
				}
				outcomes <- got
			}()
		}
		wg.Wait()
		close(outcomes)
		counts := map[jobboard.EventOutcome]int{}
		for o := range outcomes {
			counts[o]++
		}
		if sends.count() != 1 || counts[jobboard.OutcomeSent] != 1 || counts[jobboard.OutcomeDuplicate] != 1 {
			t.Fatalf("sends = %d, outcomes = %v; want one sent, one duplicate", sends.count(), counts)
		}
	}
}

// The second claimer of an event waits on the first one's row lock, then
// finds its row (the first committed: a duplicate) or takes the id (the
// first rolled back: it sends). The test holds the first worker inside its
// send until the server shows the second one waiting on a lock.
func TestProcessStatusEventSecondClaimerWaitsForFirst(t *testing.T) {
	t.Parallel()
	for _, firstFails := range []bool{false, true} {
		w := newWorld(t)
		app := mustApplication(t, w)
		ctx := context.Background()
		other, err := postgres.Open(ctx, w.db.Pool().Config().ConnString())
		if err != nil {
			t.Fatal(err)
		}
		ev := statusEvent(app.ID)

		inSend, release := make(chan struct{}), make(chan struct{})
		type result struct {
			outcome jobboard.EventOutcome
			err     error
		}
		firstDone := make(chan result, 1)
		down := errors.New("mail server down")
		go func() {
			o, err := w.db.ProcessStatusEvent(ctx, ev, hashA, func(context.Context, jobboard.ApplicationDetails) error {
				close(inSend)
				<-release
				if firstFails {
					return down
				}
				return nil
			})
			firstDone <- result{o, err}
		}()
		<-inSend

		var second recorder
		secondDone := make(chan result, 1)
		go func() {
			o, err := other.ProcessStatusEvent(ctx, ev, hashA, second.send)
			secondDone <- result{o, err}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for count(t, w.db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the second claimer never waited on a lock")
			}
		}
		close(release)
		first, got := <-firstDone, <-secondDone
		other.Close()

		switch {
		case !firstFails && (first.err != nil || first.outcome != jobboard.OutcomeSent || got.err != nil ||
			got.outcome != jobboard.OutcomeDuplicate || second.count() != 0):
			t.Errorf("first commits: first %+v, second %+v with %d sends; want sent, duplicate", first, got, second.count())
		case firstFails && (!errors.Is(first.err, down) || got.err != nil || got.outcome != jobboard.OutcomeSent || second.count() != 1):
			t.Errorf("first rolls back: first %+v, second %+v with %d sends; want the second to send", first, got, second.count())
		}
		if cs := claims(t, w.db, ev.EventID); len(cs) != 1 {
			t.Errorf("claims = %+v, want one", cs)
		}
	}
}
