package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// resetToken requests a reset for email at now and claims its event, as
// the worker does, and returns the token of the link.
func resetToken(t *testing.T, db *pgtest.DB, email string, now time.Time) string {
	t.Helper()
	ctx := context.Background()
	ev, err := requestPasswordReset(ctx, db, email, jobboard.DefaultPasswordResetPolicy, now)
	if err != nil || ev == nil {
		t.Fatalf("RequestPasswordReset(%s) = %+v, %v", email, ev, err)
	}
	c, err := db.ClaimEvent(ctx, *ev, time.Minute)
	if err != nil || c.Recipient.Token == "" {
		t.Fatalf("claim %+v = %+v, %v", ev, c, err)
	}
	return c.Recipient.Token
}

// Requests for one address at the same moment are counted one after the
// other: within the cooldown, exactly one queues an email, for an address
// with an account as for one without.
func TestPasswordResetRequestsRace(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	u, _ := register(t, db, "reset-burst@example.com", jobboard.DefaultVerificationPolicy, t0)
	for _, email := range []string{u.Email, "nobody-burst@example.com"} {
		evs := make([]*jobboard.Event, 8)
		errs := make([]error, len(evs))
		var wg sync.WaitGroup
		for i := range evs {
			wg.Go(func() {
				evs[i], errs[i] = requestPasswordReset(context.Background(), db, email, jobboard.DefaultPasswordResetPolicy, t0)
			})
		}
		wg.Wait()
		queued := 0
		for i := range evs {
			if errs[i] != nil {
				t.Fatalf("%s: %v", email, errs[i])
			}
			if evs[i] != nil {
				queued++
			}
		}
		if queued != 1 {
			t.Errorf("%s: %d of %d simultaneous requests queued, want 1", email, queued, len(evs))
		}
	}
	if n := count(t, db, `SELECT count(*) FROM outbox WHERE event_type = $1`, jobboard.EventTypePasswordResetRequested); n != 2 {
		t.Errorf("%d reset events, want 2", n)
	}
}

// A token works only while its account has the address it was sent to:
// the link proves that address, not whatever the account has later.
func TestResetPasswordNeedsTheSameAddress(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	u, _ := register(t, db, "moving@example.com", jobboard.DefaultVerificationPolicy, t0)
	token := resetToken(t, db, u.Email, time.Now())
	if _, err := db.Pool.Exec(ctx, `UPDATE users SET email = 'moved@example.com' WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	hash := jobboard.HashVerificationToken(token)
	wantErr(t, db.CheckPasswordResetToken(ctx, hash, time.Now()), jobboard.ErrPasswordResetTokenInvalid)
	_, err := db.ResetPassword(ctx, hash, "new hash", time.Now())
	wantErr(t, err, jobboard.ErrPasswordResetTokenInvalid)
	if n := count(t, db, `SELECT count(*) FROM users WHERE password_hash = 'new hash' OR password_changed_at IS NOT NULL`); n != 0 {
		t.Fatalf("a refused token changed %d accounts", n)
	}
}

// A reset records its time strictly after the account's last one, even
// when the clock says otherwise, so that the sessions issued under the
// last one end.
func TestResetPasswordMovesTheChangeForward(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	u, _ := register(t, db, "forward@example.com", jobboard.DefaultVerificationPolicy, t0)
	now := time.Now().UTC().Truncate(time.Microsecond)
	first, err := db.ResetPassword(ctx, jobboard.HashVerificationToken(resetToken(t, db, u.Email, now)), "first", now)
	if err != nil || !first.PasswordChangedAt.Equal(now) || !first.EmailVerified {
		t.Fatalf("first reset = %+v, %v; want changed at %v, verified", first, err, now)
	}
	// A second reset that reads an earlier clock.
	second, err := db.ResetPassword(ctx, jobboard.HashVerificationToken(resetToken(t, db, u.Email, now.Add(time.Minute))), "second", now.Add(-time.Second))
	if err != nil || !second.PasswordChangedAt.After(first.PasswordChangedAt) {
		t.Fatalf("second reset = %+v, %v; want changed after %v", second, err, first.PasswordChangedAt)
	}
}

// Every store method that acts for a signed-in actor refuses a session
// issued before the account's last password reset, in its own statement,
// and writes nothing; the same actor with the session of the new password
// is served. Public reads answer an ended session as they answer anyone.
func TestStoresRefuseEndedSessions(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	db := w.db
	app, err := db.Apply(ctx, w.candidate, w.job.ID, jobboard.NewApplication{CoverLetter: "Hi"})
	if err != nil {
		t.Fatal(err)
	}
	closed := mustJob(t, db, w.employer, w.company.ID, newJob("Closed"))
	mustClose(t, db, w.employer, closed.ID)
	other := mustJob(t, db, w.employer, w.company.ID, newJob("Other"))
	if _, err := db.Pool.Exec(ctx, `UPDATE users SET password_changed_at = now() WHERE id IN ($1, $2)`,
		w.candidate.UserID, w.employer.UserID); err != nil {
		t.Fatal(err)
	}
	fresh := func(a jobboard.Actor) jobboard.Actor {
		u, err := db.UserByID(ctx, a.UserID)
		if err != nil {
			t.Fatal(err)
		}
		a.PasswordChangedAt = u.PasswordChangedAt
		return a
	}
	withdrawn := jobboard.StatusWithdrawn
	title := "Renamed"
	calls := map[string]func(candidate, employer jobboard.Actor) error{
		"Apply": func(c, _ jobboard.Actor) error {
			_, err := db.Apply(ctx, c, other.ID, jobboard.NewApplication{CoverLetter: "Hi"})
			return err
		},
		"Application": func(c, _ jobboard.Actor) error { _, err := db.Application(ctx, c, app.ID); return err },
		"History":     func(c, _ jobboard.Actor) error { _, err := db.History(ctx, c, app.ID); return err },
		"CandidateApplications": func(c, _ jobboard.Actor) error {
			_, err := db.CandidateApplications(ctx, c, 10, 0)
			return err
		},
		"JobApplications": func(_, e jobboard.Actor) error { _, err := db.JobApplications(ctx, e, w.job.ID, 10, 0); return err },
		"ChangeStatus": func(c, _ jobboard.Actor) error {
			_, err := db.ChangeStatus(ctx, c, app.ID, jobboard.StatusChange{Status: withdrawn})
			return err
		},
		"CreateCompany": func(_, e jobboard.Actor) error {
			_, err := db.CreateCompany(ctx, e, jobboard.NewCompany{Name: "Again"})
			return err
		},
		"CreateJob": func(_, e jobboard.Actor) error {
			_, err := db.CreateJob(ctx, e, w.company.ID, newJob("More"))
			return err
		},
		"UpdateJob": func(_, e jobboard.Actor) error {
			_, err := db.UpdateJob(ctx, e, w.job.ID, jobboard.JobPatch{Title: &title})
			return err
		},
	}
	rows := func() int {
		return count(t, db, `SELECT (SELECT count(*) FROM applications) + (SELECT count(*) FROM companies)
			+ (SELECT count(*) FROM jobs) + (SELECT count(*) FROM application_status_history)
			+ (SELECT count(*) FROM jobs WHERE title = 'Renamed')`)
	}
	before := rows()
	for name, call := range calls {
		if err := call(w.candidate, w.employer); !errors.Is(err, jobboard.ErrSessionRevoked) {
			t.Errorf("%s with an ended session: %v, want ErrSessionRevoked", name, err)
		}
	}
	if after := rows(); after != before {
		t.Fatalf("ended sessions changed rows: %d → %d", before, after)
	}
	// Public reads: the closed job is hidden from the ended session.
	if _, err := db.Job(ctx, &w.employer, closed.ID); !errors.Is(err, jobboard.ErrNotFound) {
		t.Errorf("Job(closed) with an ended session: %v, want ErrNotFound", err)
	}
	listing, err := db.SearchJobs(ctx, &w.employer, jobboard.JobFilter{CompanyID: &w.company.ID})
	if err != nil || len(listing.Items) != 2 {
		t.Errorf("SearchJobs(company) with an ended session: %d jobs, %v; want the 2 open ones", len(listing.Items), err)
	}

	candidate, employer := fresh(w.candidate), fresh(w.employer)
	for name, call := range calls {
		if err := call(candidate, employer); err != nil {
			t.Errorf("%s with the new session: %v", name, err)
		}
	}
	if _, err := db.Job(ctx, &employer, closed.ID); err != nil {
		t.Errorf("Job(closed) with the new session: %v", err)
	}
	if listing, err := db.SearchJobs(ctx, &employer, jobboard.JobFilter{CompanyID: &w.company.ID}); err != nil || len(listing.Items) != 4 {
		t.Errorf("SearchJobs(company) with the new session: %d jobs, %v; want 4 (3 open, 1 closed)", len(listing.Items), err)
	}
}

// Reset requests older than the window (an hour) are deleted in batches;
// the newer ones stay.
func TestDeleteOldPasswordResetRequests(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	now := time.Now()
	for i, at := range []time.Time{now.Add(-3 * time.Hour), now.Add(-2 * time.Hour), now.Add(-61 * time.Minute), now.Add(-time.Minute)} {
		if _, err := requestPasswordReset(ctx, db, "old"+string(rune('a'+i))+"@example.com", jobboard.DefaultPasswordResetPolicy, at); err != nil {
			t.Fatal(err)
		}
	}
	n, err := db.DeleteExpired(ctx, jobboard.DefaultRetention, 2)
	if err != nil || n["password_reset_requests"] != 3 {
		t.Fatalf("DeleteExpired = %v, %v; want 3 password reset requests", n, err)
	}
	if left := count(t, db, `SELECT count(*) FROM password_reset_requests`); left != 1 {
		t.Fatalf("%d requests left, want 1", left)
	}
}
