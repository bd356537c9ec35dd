package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

var userSeq atomic.Int64

// mustUser registers a user with a fresh email and returns it as an actor.
func mustUser(t testing.TB, db *pgtest.DB, role jobboard.Role) jobboard.Actor {
	t.Helper()
	n := userSeq.Add(1)
	u, err := db.CreateUser(context.Background(), jobboard.Registration{
		Email: fmt.Sprintf("user%d@example.com", n),
		Name:  fmt.Sprintf("User %d", n),
		Role:  role,
	}, "hash")
	if err != nil {
		t.Fatalf("create %s: %v", role, err)
	}
	pgtest.MarkVerified(t, db.Pool, u.ID)
	return jobboard.Actor{UserID: u.ID, Role: u.Role}
}

// changeStatus changes an application's status as its own unit of work,
// and returns the status event that the unit committed (nil when none:
// the application had the status already).
func changeStatus(ctx context.Context, db *pgtest.DB, actor jobboard.Actor, id int64, c jobboard.StatusChange) (jobboard.Application, *jobboard.Event, error) {
	app, evs, err := pgtest.Write(ctx, db.DB, func(st jobboard.Writes) (jobboard.Application, error) {
		return st.ChangeStatus(ctx, actor, id, c)
	})
	for _, ev := range evs {
		if ev.Type == jobboard.EventTypeStatusChanged {
			return app, &ev, err
		}
	}
	return app, nil, err
}

// requestVerification asks for a verification email as its own unit of
// work, and returns the event that the unit committed.
func requestVerification(ctx context.Context, db *pgtest.DB, userID int64, p jobboard.VerificationPolicy, now time.Time) (jobboard.Event, error) {
	_, evs, err := pgtest.Write(ctx, db.DB, func(st jobboard.Writes) (struct{}, error) {
		return struct{}{}, st.RequestVerification(ctx, userID, p, now)
	})
	if len(evs) == 0 {
		return jobboard.Event{}, err
	}
	return evs[0], err
}

// requestPasswordReset asks for a reset email as its own unit of work,
// and returns the event that the unit committed (nil when none).
func requestPasswordReset(ctx context.Context, db *pgtest.DB, email string, p jobboard.VerificationPolicy, now time.Time) (*jobboard.Event, error) {
	_, evs, err := pgtest.Write(ctx, db.DB, func(st jobboard.Writes) (bool, error) {
		return st.RequestPasswordReset(ctx, email, p, now)
	})
	if len(evs) == 0 {
		return nil, err
	}
	return &evs[0], err
}

// mustCompany creates a company whose first member is the employer.
func mustCompany(t testing.TB, db *pgtest.DB, employer jobboard.Actor) jobboard.Company {
	t.Helper()
	c, err := db.CreateCompany(context.Background(), employer, jobboard.NewCompany{Name: "Acme"})
	if err != nil {
		t.Fatalf("create company: %v", err)
	}
	return c
}

// newJob is a valid job input with the given title.
func newJob(title string) jobboard.NewJob {
	return jobboard.NewJob{
		Title:          title,
		Description:    "A job described in a few words.",
		Location:       "Berlin",
		EmploymentType: jobboard.FullTime,
	}
}

// mustJob creates a job as the employer.
func mustJob(t testing.TB, db *pgtest.DB, employer jobboard.Actor, companyID int64, nj jobboard.NewJob) jobboard.Job {
	t.Helper()
	j, err := db.CreateJob(context.Background(), employer, companyID, nj)
	if err != nil {
		t.Fatalf("create job: %v", err)
	}
	return j
}

// mustClose closes a job as the employer.
func mustClose(t testing.TB, db *pgtest.DB, employer jobboard.Actor, jobID int64) jobboard.Job {
	t.Helper()
	closed := jobboard.JobClosed
	j, err := db.UpdateJob(context.Background(), employer, jobID, jobboard.JobPatch{Status: &closed})
	if err != nil {
		t.Fatalf("close job: %v", err)
	}
	return j
}

// world is a small board: one employer with a company and an open job, and
// one candidate.
type world struct {
	db        *pgtest.DB
	employer  jobboard.Actor
	company   jobboard.Company
	job       jobboard.Job
	candidate jobboard.Actor
}

func newWorld(t testing.TB) world {
	t.Helper()
	db := pgtest.NewDB(t)
	w := world{db: db, employer: mustUser(t, db, jobboard.RoleEmployer), candidate: mustUser(t, db, jobboard.RoleCandidate)}
	w.company = mustCompany(t, db, w.employer)
	w.job = mustJob(t, db, w.employer, w.company.ID, newJob("Backend Engineer"))
	return w
}

// count runs a count query in a test.
func count(t testing.TB, db *pgtest.DB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// wantErr fails t unless err matches target.
func wantErr(t testing.TB, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

func ptr[T any](v T) *T { return &v }

// timedWay is one way of doing a piece of work, timed by alternately.
type timedWay struct {
	name string
	run  func()
}

// alternately runs each of ways in turn until b's loop ends, each leading in
// turn so that none always follows the same one, and returns the time each
// took in all.
func alternately(b *testing.B, ways []timedWay) []time.Duration {
	times := make([]time.Duration, len(ways))
	for n := 0; b.Loop(); n++ {
		for k := range ways {
			i := (n + k) % len(ways)
			start := time.Now()
			ways[i].run()
			times[i] += time.Since(start)
		}
	}
	return times
}
