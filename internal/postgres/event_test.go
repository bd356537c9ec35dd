package postgres_test

import (
	"bytes"
	"context"
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

// claimRow is a processed_events row.
type claimRow struct {
	hash         []byte
	outcome      string // "" while unfinished
	token        string
	attempts     int
	sesMessageID string
}

// claims returns the claim rows of an event id.
func claims(t testing.TB, db *pgtest.DB, eventID string) []claimRow {
	t.Helper()
	rows, err := db.Pool.Query(context.Background(),
		`SELECT payload_hash, coalesce(outcome, ''), coalesce(lease_token::text, ''), attempts, coalesce(ses_message_id, '')
		 FROM processed_events WHERE event_id = $1`, eventID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cs []claimRow
	for rows.Next() {
		var c claimRow
		if err := rows.Scan(&c.hash, &c.outcome, &c.token, &c.attempts, &c.sesMessageID); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cs
}

// oneClaim returns the one claim row of an event id.
func oneClaim(t testing.TB, db *pgtest.DB, eventID string) claimRow {
	t.Helper()
	cs := claims(t, db, eventID)
	if len(cs) != 1 {
		t.Fatalf("claims of %s = %+v, want one", eventID, cs)
	}
	return cs[0]
}

// expireLease makes the lease of an event's claim run out, as if its worker
// had died a while ago.
func expireLease(t testing.TB, db *pgtest.DB, eventID string) {
	t.Helper()
	if _, err := db.Pool.Exec(context.Background(),
		`UPDATE processed_events SET lease_until = now() - interval '1 second' WHERE event_id = $1`, eventID); err != nil {
		t.Fatal(err)
	}
}

// finish records one outcome through FinishClaims, with a lost lease as
// jobboard.ErrLeaseLost.
func finish(db *pgtest.DB, eventID, token string, outcome jobboard.EventOutcome, sesID string) error {
	lost, err := db.FinishClaims(context.Background(), []jobboard.Finish{{EventID: eventID, Token: token, Outcome: outcome, ProviderMessageID: sesID}})
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return jobboard.ErrLeaseLost
	}
	return nil
}

func mustClaim(t testing.TB, db *pgtest.DB, ev jobboard.Event, want jobboard.EventOutcome) jobboard.Claim {
	t.Helper()
	c, err := db.ClaimEvent(context.Background(), ev, time.Minute)
	if err != nil || c.Outcome != want {
		t.Fatalf("ClaimEvent = %+v, %v; want outcome %q", c, err, want)
	}
	return c
}

// The first delivery owns the event and gets what the email needs; once the
// claim is finished, every later delivery is a duplicate.
func TestClaimEventFirstDeliveryThenDuplicates(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ctx := context.Background()
	ev := statusEvent(app.ID)

	c := mustClaim(t, w.db, ev, "")
	candidate, err := w.db.UserByID(ctx, w.candidate.UserID)
	if err != nil {
		t.Fatal(err)
	}
	want := jobboard.ApplicationDetails{
		ApplicationID: app.ID, Status: jobboard.StatusSubmitted, CandidateEmail: candidate.Email,
		CandidateName: candidate.Name, JobTitle: w.job.Title, CompanyName: w.company.Name,
	}
	if c.Application != want || c.Token == "" || c.Attempts != 1 {
		t.Fatalf("claim = %+v, want token, attempt 1 and %+v", c, want)
	}
	if got := oneClaim(t, w.db, ev.EventID); got.outcome != "" || got.token != c.Token || !bytes.Equal(got.hash, ev.PayloadHash()) {
		t.Fatalf("row after the claim = %+v, want unfinished, leased by %s, with the payload hash", got, c.Token)
	}

	if err := finish(w.db, ev.EventID, c.Token, jobboard.OutcomeSent, "ses-1"); err != nil {
		t.Fatal(err)
	}
	// The same mark again (a retry after a lost answer) is harmless.
	if err := finish(w.db, ev.EventID, c.Token, jobboard.OutcomeSent, "ses-1"); err != nil {
		t.Fatalf("finishing twice: %v", err)
	}
	if got := oneClaim(t, w.db, ev.EventID); got.outcome != "sent" || got.sesMessageID != "ses-1" {
		t.Fatalf("row after the mark = %+v, want sent with ses-1", got)
	}
	for range 3 {
		mustClaim(t, w.db, ev, jobboard.OutcomeDuplicate)
	}
	// Even once its lease has run out, a finished claim stays finished.
	expireLease(t, w.db, ev.EventID)
	mustClaim(t, w.db, ev, jobboard.OutcomeDuplicate)
	wantErr(t, w.db.ReleaseClaim(ctx, ev.EventID, c.Token), jobboard.ErrLeaseLost)
	wantErr(t, finish(w.db, ev.EventID, uuid.NewString(), jobboard.OutcomeSent, "x"), jobboard.ErrLeaseLost)
	if got := oneClaim(t, w.db, ev.EventID); got.outcome != "sent" || got.attempts != 1 {
		t.Fatalf("row = %+v, want still sent after one attempt", got)
	}
}

// A live lease keeps everyone else out, and says for how long.
func TestClaimEventLiveLeaseIsBusy(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ev := statusEvent(app.ID)
	owner := mustClaim(t, w.db, ev, "")

	busy := mustClaim(t, w.db, ev, jobboard.OutcomeBusy)
	if busy.Token != "" || busy.BusyFor <= 50*time.Second || busy.BusyFor > time.Minute {
		t.Fatalf("busy claim = %+v, want no token and about a minute left", busy)
	}
	if got := oneClaim(t, w.db, ev.EventID); got.token != owner.Token || got.attempts != 1 {
		t.Fatalf("row = %+v, want the owner's lease untouched", got)
	}
}

// A lease that ran out (its worker died) is taken over under a new token;
// the old token can then neither finish nor release the new owner's claim.
func TestClaimEventTakesOverAnExpiredLease(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ctx := context.Background()
	ev := statusEvent(app.ID)
	dead := mustClaim(t, w.db, ev, "")
	expireLease(t, w.db, ev.EventID)

	heir := mustClaim(t, w.db, ev, "")
	if heir.Token == dead.Token || heir.Attempts != 2 || heir.Application.ApplicationID != app.ID {
		t.Fatalf("take-over = %+v, want a new token, attempt 2 and the application", heir)
	}
	wantErr(t, finish(w.db, ev.EventID, dead.Token, jobboard.OutcomeSent, "late"), jobboard.ErrLeaseLost)
	wantErr(t, w.db.ReleaseClaim(ctx, ev.EventID, dead.Token), jobboard.ErrLeaseLost)
	if got := oneClaim(t, w.db, ev.EventID); got.outcome != "" || got.token != heir.Token {
		t.Fatalf("row = %+v, want the heir's unfinished claim", got)
	}
	if err := finish(w.db, ev.EventID, heir.Token, jobboard.OutcomeSent, "ses-2"); err != nil {
		t.Fatal(err)
	}
	if got := oneClaim(t, w.db, ev.EventID); got.outcome != "sent" || got.sesMessageID != "ses-2" || got.attempts != 2 {
		t.Fatalf("row = %+v, want sent by the heir", got)
	}
}

// A released claim is gone, so the retry claims the event afresh.
func TestReleaseClaimLetsTheRetryClaim(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ctx := context.Background()
	ev := statusEvent(app.ID)
	c := mustClaim(t, w.db, ev, "")
	if err := w.db.ReleaseClaim(ctx, ev.EventID, c.Token); err != nil {
		t.Fatal(err)
	}
	if cs := claims(t, w.db, ev.EventID); len(cs) != 0 {
		t.Fatalf("claims after release = %+v, want none", cs)
	}
	wantErr(t, w.db.ReleaseClaim(ctx, ev.EventID, c.Token), jobboard.ErrLeaseLost)
	again := mustClaim(t, w.db, ev, "")
	if again.Token == c.Token || again.Attempts != 1 {
		t.Fatalf("claim after release = %+v, want a new token and attempt 1", again)
	}
}

// A permanent rejection finishes the claim: redeliveries are duplicates.
func TestFinishClaimRejected(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ev := statusEvent(app.ID)
	c := mustClaim(t, w.db, ev, "")
	if err := finish(w.db, ev.EventID, c.Token, jobboard.OutcomeRejected, ""); err != nil {
		t.Fatal(err)
	}
	if got := oneClaim(t, w.db, ev.EventID); got.outcome != "rejected" || got.sesMessageID != "" {
		t.Fatalf("row = %+v, want rejected without a message id", got)
	}
	mustClaim(t, w.db, ev, jobboard.OutcomeDuplicate)
}

// One event id with two payloads: the second is told apart from a
// redelivery, whether the first is finished, leased, or its lease expired.
func TestClaimEventPayloadMismatch(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ev := statusEvent(app.ID)
	other := ev
	other.NewStatus = jobboard.StatusRejected
	c := mustClaim(t, w.db, ev, "")

	mustClaim(t, w.db, other, jobboard.OutcomePayloadMismatch)
	expireLease(t, w.db, ev.EventID)
	mustClaim(t, w.db, other, jobboard.OutcomePayloadMismatch)
	if got := oneClaim(t, w.db, ev.EventID); got.token != c.Token || !bytes.Equal(got.hash, ev.PayloadHash()) {
		t.Fatalf("row = %+v, want the first payload's claim untouched", got)
	}
}

// The application is gone: the claim is finished at once, and nothing is
// loaded.
func TestClaimEventApplicationMissing(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	if _, err := w.db.Pool.Exec(context.Background(), `DELETE FROM applications WHERE id = $1`, app.ID); err != nil {
		t.Fatal(err)
	}
	ev := statusEvent(app.ID)
	c := mustClaim(t, w.db, ev, jobboard.OutcomeApplicationMissing)
	if c.Application != (jobboard.ApplicationDetails{}) {
		t.Fatalf("claim = %+v, want no application", c)
	}
	if got := oneClaim(t, w.db, ev.EventID); got.outcome != "application_missing" {
		t.Fatalf("row = %+v, want application_missing", got)
	}
	mustClaim(t, w.db, ev, jobboard.OutcomeDuplicate)
}

// A claim statement stuck behind another claimer longer than lock_timeout
// gives up as busy and leaves nothing behind.
func TestClaimEventLockTimeoutIsBusy(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	ctx := context.Background()
	holder := pgtest.Pool(t, url)
	worker := pgtest.Open(t, url, postgres.WorkerSession(100*time.Millisecond, time.Minute))

	ev := statusEvent(1)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // rolled back below; this is the safety net
	if _, err := tx.Exec(ctx, `INSERT INTO processed_events (event_id, event_type, payload_hash, lease_token, lease_until)
		VALUES ($1, $2, $3, gen_random_uuid(), now() + interval '1 minute')`, ev.EventID, ev.Type, ev.PayloadHash()); err != nil {
		t.Fatal(err)
	}

	c, err := worker.ClaimEvent(ctx, ev, time.Minute)
	if err != nil || c.Outcome != jobboard.OutcomeBusy {
		t.Fatalf("claim behind a held lock = %+v, %v; want busy", c, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if cs := claims(t, worker, ev.EventID); len(cs) != 0 {
		t.Fatalf("claims = %+v, want none", cs)
	}
}

// Workers on separate pools claim the same event at the same moment, many
// times over: exactly one owns it each time; the others are told it is busy.
func TestClaimEventConcurrentClaims(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	ctx := context.Background()
	dbs := []*postgres.DB{w.db.DB}
	for range 3 {
		other, err := postgres.Open(ctx, w.db.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		dbs = append(dbs, other)
	}

	for range 30 {
		ev := statusEvent(app.ID)
		outcomes := make(chan jobboard.EventOutcome, len(dbs))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, db := range dbs {
			wg.Go(func() {
				<-start
				c, err := db.ClaimEvent(ctx, ev, time.Minute)
				if err != nil {
					t.Errorf("claim: %v", err)
				}
				outcomes <- c.Outcome
			})
		}
		close(start)
		wg.Wait()
		close(outcomes)
		counts := map[jobboard.EventOutcome]int{}
		for o := range outcomes {
			counts[o]++
		}
		if counts[""] != 1 || counts[jobboard.OutcomeBusy] != len(dbs)-1 {
			t.Fatalf("outcomes = %v, want one owner and %d busy", counts, len(dbs)-1)
		}
	}
}

// A second claimer meeting an uncommitted claim waits on the row lock, then
// finds the claim (the first committed: busy) or takes the id (the first
// rolled back). The test holds the first transaction open until the server
// shows the second one waiting on a lock.
func TestClaimEventSecondClaimerWaitsForFirst(t *testing.T) {
	t.Parallel()
	for _, firstCommits := range []bool{true, false} {
		w := newWorld(t)
		app := mustApplication(t, w)
		ctx := context.Background()
		ev := statusEvent(app.ID)
		tx, err := w.db.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO processed_events (event_id, event_type, payload_hash, lease_token, lease_until)
			VALUES ($1, $2, $3, gen_random_uuid(), now() + interval '1 minute')`, ev.EventID, ev.Type, ev.PayloadHash()); err != nil {
			t.Fatal(err)
		}

		type result struct {
			claim jobboard.Claim
			err   error
		}
		second := make(chan result, 1)
		go func() {
			c, err := w.db.ClaimEvent(ctx, ev, time.Minute)
			second <- result{c, err}
		}()
		deadline := time.Now().Add(10 * time.Second)
		for count(t, w.db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) == 0 {
			if time.Now().After(deadline) {
				t.Fatal("the second claimer never waited on a lock")
			}
		}
		if firstCommits {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		got := <-second
		switch {
		case got.err != nil:
			t.Errorf("first commits %v: second claim: %v", firstCommits, got.err)
		case firstCommits && got.claim.Outcome != jobboard.OutcomeBusy:
			t.Errorf("first commits: second = %+v, want busy", got.claim)
		case !firstCommits && (got.claim.Outcome != "" || got.claim.Application.ApplicationID != app.ID):
			t.Errorf("first rolls back: second = %+v, want it to own the event", got.claim)
		}
		if cs := claims(t, w.db, ev.EventID); len(cs) != 1 {
			t.Errorf("claims = %+v, want one", cs)
		}
	}
}

// One statement records the outcomes of several claims, and names those
// whose lease is lost without touching them.
func TestFinishClaimsInOneStatement(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	app := mustApplication(t, w)
	var fs []jobboard.Finish
	var evs []jobboard.Event
	for range 4 {
		ev := statusEvent(app.ID)
		c := mustClaim(t, w.db, ev, "")
		evs = append(evs, ev)
		fs = append(fs, jobboard.Finish{EventID: ev.EventID, Token: c.Token, Outcome: jobboard.OutcomeSent, ProviderMessageID: "ses-" + ev.EventID})
	}
	fs[3].Outcome, fs[3].ProviderMessageID = jobboard.OutcomeRejected, ""
	fs[2].Token = uuid.NewString() // somebody else's lease now
	lost, err := w.db.FinishClaims(context.Background(), fs)
	if err != nil || len(lost) != 1 || lost[0] != evs[2].EventID {
		t.Fatalf("FinishClaims = %v, %v; want only %s lost", lost, err, evs[2].EventID)
	}
	for i, want := range []string{"sent", "sent", "", "rejected"} {
		if got := oneClaim(t, w.db, evs[i].EventID); got.outcome != want {
			t.Errorf("event %d: outcome %q, want %q", i, got.outcome, want)
		}
	}
	if got := oneClaim(t, w.db, evs[0].EventID); got.sesMessageID != "ses-"+evs[0].EventID {
		t.Errorf("message id = %q", got.sesMessageID)
	}
}
