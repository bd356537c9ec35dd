package postgres_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// moveThrough changes the status of a new application of the world's
// candidate through the given statuses and returns the events the API
// wrote, oldest first (versions 2, 3, …).
func moveThrough(t testing.TB, w world, to ...jobboard.ApplicationStatus) []jobboard.Event {
	t.Helper()
	app := mustApplication(t, w)
	return moveApplication(t, w, app.ID, to...)
}

func moveApplication(t testing.TB, w world, appID int64, to ...jobboard.ApplicationStatus) []jobboard.Event {
	t.Helper()
	app := jobboard.Application{ID: appID}
	var evs []jobboard.Event
	for _, s := range to {
		_, ev, err := changeStatus(context.Background(), w.db, w.employer, app.ID, jobboard.StatusChange{Status: s})
		if err != nil || ev == nil {
			t.Fatalf("change to %s: %v, %v", s, ev, err)
		}
		evs = append(evs, *ev)
	}
	return evs
}

// orderRow is the application_email_order row of an application.
type orderRow struct {
	version int64
	eventID string
	leased  bool
}

func emailOrder(t testing.TB, db *pgtest.DB, applicationID int64) orderRow {
	t.Helper()
	var r orderRow
	if err := db.Pool.QueryRow(context.Background(),
		`SELECT version, event_id, lease_token IS NOT NULL FROM application_email_order WHERE application_id = $1`,
		applicationID).Scan(&r.version, &r.eventID, &r.leased); err != nil {
		t.Fatalf("email order of application %d: %v", applicationID, err)
	}
	return r
}

// expireOrder makes an event's claim and its lease on the order run out,
// as if its worker had died a while ago.
func expireOrder(t testing.TB, db *pgtest.DB, eventID string) {
	t.Helper()
	expireLease(t, db, eventID)
	if _, err := db.Pool.Exec(context.Background(),
		`UPDATE application_email_order SET lease_until = now() - interval '1 second' WHERE event_id = $1 AND lease_until IS NOT NULL`,
		eventID); err != nil {
		t.Fatal(err)
	}
}

var workflow = []jobboard.ApplicationStatus{jobboard.StatusReviewing, jobboard.StatusInterview, jobboard.StatusOffer}

// The API's events carry the version the change made.
func TestStatusEventsCarryTheVersion(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for i, ev := range moveThrough(t, w, workflow...) {
		if want := int64(i + 2); ev.Version != want {
			t.Errorf("event %d: version %d, want %d", i, ev.Version, want)
		}
	}
}

// Delivered newest first: the newest is emailed, every older one is
// superseded (finished, nothing to send), and stays so on redelivery.
func TestClaimNewestFirstSupersedesTheOlder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	evs := moveThrough(t, w, workflow...)
	newest := mustClaim(t, w.db, evs[2], "")
	if err := finish(w.db, evs[2].EventID, newest.Token, jobboard.OutcomeSent, "ses-3"); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []jobboard.Event{evs[0], evs[1]} {
		mustClaim(t, w.db, ev, jobboard.OutcomeSuperseded)
		if got := oneClaim(t, w.db, ev.EventID).outcome; got != string(jobboard.OutcomeSuperseded) {
			t.Errorf("claim of version %d finished as %q, want superseded", ev.Version, got)
		}
		mustClaim(t, w.db, ev, jobboard.OutcomeDuplicate)
	}
	if got, want := emailOrder(t, w.db, evs[0].ApplicationID), (orderRow{version: 4, eventID: evs[2].EventID}); got != want {
		t.Errorf("order = %+v, want %+v", got, want)
	}
}

// In order, every status is emailed; while an older one is in flight, a
// newer one waits (busy, nothing claimed) and goes once it is recorded.
func TestClaimInOrderEmailsEveryStatus(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	evs := moveThrough(t, w, workflow...)
	first := mustClaim(t, w.db, evs[0], "")
	busy := mustClaim(t, w.db, evs[1], jobboard.OutcomeBusy)
	if !busy.BusyOrder || busy.BusyFor <= 0 || busy.BusyFor > time.Minute {
		t.Errorf("busy claim = %+v, want BusyOrder and the other lease's time left", busy)
	}
	if cs := claims(t, w.db, evs[1].EventID); len(cs) != 0 {
		t.Fatalf("a busy claim wrote %+v", cs)
	}
	if err := finish(w.db, evs[0].EventID, first.Token, jobboard.OutcomeSent, "ses-2"); err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs[1:] {
		c := mustClaim(t, w.db, ev, "")
		if c.Application.ApplicationID != ev.ApplicationID {
			t.Errorf("claim of version %d: %+v", ev.Version, c)
		}
		if err := finish(w.db, ev.EventID, c.Token, jobboard.OutcomeSent, "ses"); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := emailOrder(t, w.db, evs[0].ApplicationID), (orderRow{version: 4, eventID: evs[2].EventID}); got != want {
		t.Errorf("order = %+v, want %+v", got, want)
	}
}

// A released claim (the send failed) frees the order for its own retry
// and keeps the older events superseded; a rejected one finishes it.
func TestReleasedStatusClaimKeepsItsPlace(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	evs := moveThrough(t, w, workflow...)
	c := mustClaim(t, w.db, evs[1], "")
	if err := w.db.ReleaseClaim(context.Background(), evs[1].EventID, c.Token); err != nil {
		t.Fatal(err)
	}
	if got := emailOrder(t, w.db, evs[1].ApplicationID); got.leased || got.version != 3 {
		t.Errorf("after the release, order = %+v, want version 3 without a lease", got)
	}
	mustClaim(t, w.db, evs[0], jobboard.OutcomeSuperseded)
	retry := mustClaim(t, w.db, evs[1], "")
	if err := finish(w.db, evs[1].EventID, retry.Token, jobboard.OutcomeRejected, ""); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, w.db, evs[2], "")
}

// A worker that died holding the order holds it only until its lease runs
// out: then a newer event takes it, and the dead worker's event, taken
// over, is superseded.
func TestExpiredOrderLeaseIsTakenByTheNewer(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	evs := moveThrough(t, w, workflow...)
	mustClaim(t, w.db, evs[0], "")
	mustClaim(t, w.db, evs[1], jobboard.OutcomeBusy)
	expireOrder(t, w.db, evs[0].EventID)
	mustClaim(t, w.db, evs[1], "")
	mustClaim(t, w.db, evs[0], jobboard.OutcomeSuperseded)
	if got := oneClaim(t, w.db, evs[0].EventID); got.outcome != string(jobboard.OutcomeSuperseded) || got.attempts != 2 {
		t.Errorf("taken-over claim = %+v, want superseded after 2 attempts", got)
	}
}

// The same event taken over after its worker died gets the order back.
func TestTakenOverStatusClaimTakesItsOrderAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	evs := moveThrough(t, w, workflow...)
	mustClaim(t, w.db, evs[1], "")
	expireOrder(t, w.db, evs[1].EventID)
	c := mustClaim(t, w.db, evs[1], "")
	if c.Attempts != 2 {
		t.Errorf("attempts = %d, want 2", c.Attempts)
	}
	mustClaim(t, w.db, evs[2], jobboard.OutcomeBusy)
	mustClaim(t, w.db, evs[0], jobboard.OutcomeSuperseded)
}

// An event written before versions existed takes its place from the
// history row of its change; one without such a row is not ordered.
func TestUnversionedEventTakesItsPlaceFromTheHistory(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	evs := moveThrough(t, w, workflow...)
	c := mustClaim(t, w.db, evs[1], "")
	if err := finish(w.db, evs[1].EventID, c.Token, jobboard.OutcomeSent, "ses"); err != nil {
		t.Fatal(err)
	}
	old := evs[0]
	old.Version = 0
	mustClaim(t, w.db, old, jobboard.OutcomeSuperseded)
	newer := evs[2]
	newer.Version = 0
	mustClaim(t, w.db, newer, "")
	if got := emailOrder(t, w.db, newer.ApplicationID); got.version != 4 || got.eventID != newer.EventID {
		t.Errorf("order = %+v, want version 4 of %s", got, newer.EventID)
	}
	// No history row (and no version): claimed without the order.
	mustClaim(t, w.db, statusEvent(newer.ApplicationID), "")
}

// An unverified candidate's status is not emailed, and takes no place in
// the order.
func TestUnverifiedRecipientTakesNoOrder(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	evs := moveThrough(t, w, workflow...)
	if _, err := w.db.Pool.Exec(context.Background(), `UPDATE users SET email_verified_at = NULL WHERE id = $1`, w.candidate.UserID); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, w.db, evs[2], jobboard.OutcomeRecipientUnverified)
	if n := count(t, w.db, `SELECT count(*) FROM application_email_order`); n != 0 {
		t.Errorf("%d order rows, want none", n)
	}
}

// Two workers claiming two versions of one application at once never both
// own one: either the newer goes first and the older is superseded, or
// the older goes first and the newer is busy.
func TestConcurrentClaimsOfOneApplicationNeverBothSend(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for round := range 20 {
		job := mustJob(t, w.db, w.employer, w.company.ID, newJob("Backend Engineer"))
		app, err := w.db.Apply(context.Background(), w.candidate, job.ID, jobboard.NewApplication{})
		if err != nil {
			t.Fatal(err)
		}
		evs := moveApplication(t, w, app.ID, workflow[:2]...)
		var wg sync.WaitGroup
		got := make([]jobboard.Claim, 2)
		start := make(chan struct{})
		for i := range evs {
			wg.Go(func() {
				<-start
				c, err := w.db.ClaimEvent(context.Background(), evs[i], time.Minute)
				if err != nil {
					t.Error(err)
				}
				got[i] = c
			})
		}
		close(start)
		wg.Wait()
		older, newer := got[0].Outcome, got[1].Outcome
		switch {
		case older == "" && newer == jobboard.OutcomeBusy:
		case newer == "" && older == jobboard.OutcomeSuperseded:
		case newer == "" && older == jobboard.OutcomeBusy:
			// The older saw the row taken after its snapshot: its retry
			// finds it superseded.
			mustClaim(t, w.db, evs[0], jobboard.OutcomeSuperseded)
		default:
			t.Fatalf("round %d: older %q, newer %q", round, older, newer)
		}
	}
}
