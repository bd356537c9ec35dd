package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// mustApply applies as the candidate.
func mustApply(t testing.TB, db *pgtest.DB, candidate jobboard.Actor, jobID int64) jobboard.Application {
	t.Helper()
	a, err := db.Apply(context.Background(), candidate, jobID, jobboard.NewApplication{CoverLetter: "Hello"})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return a
}

// changes counts the rows a status change writes.
func changes(t testing.TB, db *pgtest.DB) (history, outbox int) {
	t.Helper()
	return count(t, db, "SELECT count(*) FROM application_status_history"), count(t, db, "SELECT count(*) FROM outbox")
}

func TestApply(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()

	a, err := w.db.Apply(ctx, w.candidate, w.job.ID, jobboard.NewApplication{CoverLetter: "Dear Acme"})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	want := jobboard.Application{ID: a.ID, JobID: w.job.ID, CandidateID: w.candidate.UserID, CoverLetter: "Dear Acme",
		Status: jobboard.StatusSubmitted, Version: 1, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("Apply (-want +got):\n%s", diff)
	}
	if a.CreatedAt.IsZero() {
		t.Error("created_at not set")
	}

	closedJob := mustJob(t, w.db, w.employer, w.company.ID, newJob("Closed"))
	mustClose(t, w.db, w.employer, closedJob.ID)
	otherCandidate := mustUser(t, w.db, jobboard.RoleCandidate)

	cases := []struct {
		name  string
		actor jobboard.Actor
		jobID int64
		want  error
	}{
		{"again", w.candidate, w.job.ID, jobboard.ErrDuplicateApplication},
		{"employer", w.employer, w.job.ID, jobboard.ErrForbidden},
		{"employer claiming to be a candidate", jobboard.Actor{UserID: w.employer.UserID, Role: jobboard.RoleCandidate}, w.job.ID, jobboard.ErrForbidden},
		{"no such job", otherCandidate, w.job.ID + 1000, jobboard.ErrNotFound},
		// A closed job is hidden from non-members, as Job hides it; a member
		// (here one whose token claims the candidate role) learns it is closed.
		{"closed job", otherCandidate, closedJob.ID, jobboard.ErrNotFound},
		{"closed job, member", jobboard.Actor{UserID: w.employer.UserID, Role: jobboard.RoleCandidate}, closedJob.ID, jobboard.ErrJobClosed},
	}
	for _, c := range cases {
		_, err := w.db.Apply(ctx, c.actor, c.jobID, jobboard.NewApplication{})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if n := count(t, w.db, "SELECT count(*) FROM applications"); n != 1 {
		t.Errorf("applications = %d, want 1", n)
	}
	// Another candidate may apply to the same job.
	mustApply(t, w.db, otherCandidate, w.job.ID)
}

// Twenty simultaneous applications of one candidate to one job: the unique
// constraint lets one through and reports the others as duplicates.
func TestApplyConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	const n = 20
	start := make(chan struct{})
	errs := make(chan error, n)
	for range n {
		go func() {
			<-start
			_, err := w.db.Apply(context.Background(), w.candidate, w.job.ID, jobboard.NewApplication{})
			errs <- err
		}()
	}
	close(start)
	ok, dup := 0, 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			ok++
		case errors.Is(err, jobboard.ErrDuplicateApplication):
			dup++
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 1 || dup != n-1 {
		t.Errorf("%d succeeded, %d duplicates; want 1 and %d", ok, dup, n-1)
	}
	if c := count(t, w.db, "SELECT count(*) FROM applications"); c != 1 {
		t.Errorf("rows = %d, want 1", c)
	}
}

func TestApplicationVisibility(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	a := mustApply(t, w.db, w.candidate, w.job.ID)
	colleague := mustUser(t, w.db, jobboard.RoleEmployer)
	if _, err := w.db.Pool.Exec(ctx, "INSERT INTO company_members (company_id, user_id) VALUES ($1, $2)", w.company.ID, colleague.UserID); err != nil {
		t.Fatal(err)
	}
	outsider := mustUser(t, w.db, jobboard.RoleEmployer)
	mustCompany(t, w.db, outsider)
	otherCandidate := mustUser(t, w.db, jobboard.RoleCandidate)

	for name, actor := range map[string]jobboard.Actor{"candidate": w.candidate, "creator": w.employer, "colleague": colleague} {
		got, err := w.db.Application(ctx, actor, a.ID)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if diff := cmp.Diff(a, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	for name, actor := range map[string]jobboard.Actor{"other candidate": otherCandidate, "employer of another company": outsider} {
		_, err := w.db.Application(ctx, actor, a.ID)
		if !errors.Is(err, jobboard.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", name, err)
		}
	}
	_, err := w.db.Application(ctx, w.candidate, a.ID+1000)
	wantErr(t, err, jobboard.ErrNotFound)

	// Closing the job hides it from search, not the applications to it:
	// a colleague still moves it on, the candidate still sees and withdraws it.
	mustClose(t, w.db, w.employer, w.job.ID)
	if _, ev, err := changeStatus(ctx, w.db, colleague, a.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing}); err != nil || ev == nil {
		t.Fatalf("colleague reviews after close: %v, %v", ev, err)
	}
	if got, err := w.db.Application(ctx, w.candidate, a.ID); err != nil || got.Status != jobboard.StatusReviewing {
		t.Fatalf("candidate reads after close: %+v, %v", got, err)
	}
	if _, ev, err := changeStatus(ctx, w.db, w.candidate, a.ID, jobboard.StatusChange{Status: jobboard.StatusWithdrawn}); err != nil || ev == nil {
		t.Fatalf("candidate withdraws after close: %v, %v", ev, err)
	}
	h, err := w.db.History(ctx, colleague, a.ID)
	if err != nil || len(h) != 2 || h[0].ChangedBy != colleague.UserID || h[1].ChangedBy != w.candidate.UserID {
		t.Errorf("history = %+v, %v", h, err)
	}
}

// walkApplications follows cursors to the end and returns the ids seen.
func walkApplications(t *testing.T, limit int, list func(after int64) (jobboard.Page[jobboard.Application], error)) []int64 {
	t.Helper()
	var ids []int64
	var after int64
	for range 1000 {
		page, err := list(after)
		if err != nil {
			t.Fatalf("list after %d: %v", after, err)
		}
		if len(page.Items) > limit {
			t.Fatalf("page of %d, limit %d", len(page.Items), limit)
		}
		for _, a := range page.Items {
			ids = append(ids, a.ID)
		}
		if page.NextAfter == 0 {
			return ids
		}
		after = page.NextAfter
	}
	t.Fatal("cursor never ends")
	return nil
}

func TestJobAndCandidateApplications(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	otherJob := mustJob(t, w.db, w.employer, w.company.ID, newJob("Other"))
	var onJob []int64 // applications to w.job, newest first
	candidates := make([]jobboard.Actor, 7)
	for i := range candidates {
		candidates[i] = mustUser(t, w.db, jobboard.RoleCandidate)
		onJob = slices.Insert(onJob, 0, mustApply(t, w.db, candidates[i], w.job.ID).ID)
	}
	mine := []int64{mustApply(t, w.db, candidates[0], otherJob.ID).ID, onJob[len(onJob)-1]}

	for _, limit := range []int{1, 3, 7, 100} {
		got := walkApplications(t, limit, func(after int64) (jobboard.Page[jobboard.Application], error) {
			return w.db.JobApplications(ctx, w.employer, w.job.ID, limit, after)
		})
		if diff := cmp.Diff(onJob, got); diff != "" {
			t.Errorf("JobApplications limit %d (-want +got):\n%s", limit, diff)
		}
		got = walkApplications(t, limit, func(after int64) (jobboard.Page[jobboard.Application], error) {
			return w.db.CandidateApplications(ctx, candidates[0], limit, after)
		})
		if diff := cmp.Diff(mine, got); diff != "" {
			t.Errorf("CandidateApplications limit %d (-want +got):\n%s", limit, diff)
		}
	}

	// A job without applications is an empty page, not an error.
	empty := mustJob(t, w.db, w.employer, w.company.ID, newJob("Empty"))
	page, err := w.db.JobApplications(ctx, w.employer, empty.ID, 10, 0)
	if err != nil || len(page.Items) != 0 || page.Items == nil || page.NextAfter != 0 {
		t.Errorf("empty job: %+v, %v", page, err)
	}
	// Past the last page too.
	page, err = w.db.JobApplications(ctx, w.employer, w.job.ID, 10, onJob[len(onJob)-1])
	if err != nil || len(page.Items) != 0 {
		t.Errorf("after the oldest: %+v, %v", page, err)
	}
	// Nobody applied as the employer: an empty list.
	page, err = w.db.CandidateApplications(ctx, w.employer, 10, 0)
	if err != nil || len(page.Items) != 0 || page.Items == nil {
		t.Errorf("employer's own applications: %+v, %v", page, err)
	}

	outsider := mustUser(t, w.db, jobboard.RoleEmployer)
	mustCompany(t, w.db, outsider)
	for name, c := range map[string]struct {
		actor jobboard.Actor
		jobID int64
	}{
		"employer of another company": {outsider, w.job.ID},
		"candidate who applied":       {candidates[0], w.job.ID},
		"no such job":                 {w.employer, w.job.ID + 1000},
	} {
		_, err := w.db.JobApplications(ctx, c.actor, c.jobID, 10, 0)
		if !errors.Is(err, jobboard.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", name, err)
		}
	}
}

// outboxEvent reads the event stored in the outbox.
func outboxEvent(t testing.TB, db *pgtest.DB, eventID string) (string, jobboard.Event) {
	t.Helper()
	var (
		eventType string
		payload   []byte
		ev        jobboard.Event
	)
	err := db.Pool.QueryRow(context.Background(),
		"SELECT event_type, payload FROM outbox WHERE event_id = $1 AND published_at IS NULL", eventID).Scan(&eventType, &payload)
	if err != nil {
		t.Fatalf("outbox row %s: %v", eventID, err)
	}
	if err := json.Unmarshal(payload, &ev); err != nil {
		t.Fatalf("outbox payload %s: %v", payload, err)
	}
	return eventType, ev
}

func TestChangeStatusWorkflow(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	a := mustApply(t, w.db, w.candidate, w.job.ID)

	var events []*jobboard.Event
	prev := a
	for _, to := range []jobboard.ApplicationStatus{jobboard.StatusReviewing, jobboard.StatusInterview, jobboard.StatusOffer, jobboard.StatusHired} {
		got, ev, err := changeStatus(ctx, w.db, w.employer, a.ID, jobboard.StatusChange{Status: to, IfVersion: &prev.Version})
		if err != nil {
			t.Fatalf("to %s: %v", to, err)
		}
		if got.Status != to || got.Version != prev.Version+1 || !got.UpdatedAt.After(prev.UpdatedAt) || !got.CreatedAt.Equal(a.CreatedAt) {
			t.Errorf("to %s: got %+v after %+v", to, got, prev)
		}
		if ev == nil {
			t.Fatalf("to %s: no event", to)
		}
		if _, err := uuid.Parse(ev.EventID); err != nil {
			t.Errorf("event id %q: %v", ev.EventID, err)
		}
		want := jobboard.Event{Type: jobboard.EventTypeStatusChanged, EventID: ev.EventID,
			OccurredAt: got.UpdatedAt.UTC(), ApplicationID: a.ID, OldStatus: prev.Status, NewStatus: to, Version: got.Version}
		if diff := cmp.Diff(want, *ev); diff != "" {
			t.Errorf("event (-want +got):\n%s", diff)
		}
		eventType, stored := outboxEvent(t, w.db, ev.EventID)
		if eventType != jobboard.EventTypeStatusChanged {
			t.Errorf("outbox event_type = %q", eventType)
		}
		if diff := cmp.Diff(*ev, stored); diff != "" {
			t.Errorf("outbox payload (-returned +stored):\n%s", diff)
		}
		read, err := w.db.Application(ctx, w.candidate, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(got, read); diff != "" {
			t.Errorf("read back (-returned +read):\n%s", diff)
		}
		events = append(events, ev)
		prev = got
	}

	history, err := w.db.History(ctx, w.candidate, a.ID)
	if err != nil {
		t.Fatalf("History: %v", err)
	}
	if len(history) != len(events) {
		t.Fatalf("history has %d entries, want %d", len(history), len(events))
	}
	for i, h := range history {
		ev := events[i]
		// The candidate sees each change's email, not handled yet here.
		want := jobboard.HistoryEntry{OldStatus: ev.OldStatus, NewStatus: ev.NewStatus, ChangedBy: w.employer.UserID,
			ChangedAt: h.ChangedAt, EventID: ev.EventID, Email: &jobboard.EmailDelivery{State: "pending"}}
		if diff := cmp.Diff(want, h); diff != "" {
			t.Errorf("history[%d] (-want +got):\n%s", i, diff)
		}
		if !h.ChangedAt.Equal(ev.OccurredAt) {
			t.Errorf("history[%d] changed at %v, event occurred at %v", i, h.ChangedAt, ev.OccurredAt)
		}
	}
	// From a terminal status nothing moves, not even for the candidate.
	for _, c := range []struct {
		actor jobboard.Actor
		to    jobboard.ApplicationStatus
	}{{w.employer, jobboard.StatusRejected}, {w.candidate, jobboard.StatusWithdrawn}} {
		_, err := w.db.ChangeStatus(ctx, c.actor, a.ID, jobboard.StatusChange{Status: c.to})
		wantErr(t, err, jobboard.ErrInvalidTransition)
	}
	if h, o := changes(t, w.db); h != 4 || o != 4 {
		t.Errorf("history %d, outbox %d; want 4 and 4", h, o)
	}
}

func TestChangeStatusRules(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	a := mustApply(t, w.db, w.candidate, w.job.ID)
	outsider := mustUser(t, w.db, jobboard.RoleEmployer)
	mustCompany(t, w.db, outsider)
	otherCandidate := mustUser(t, w.db, jobboard.RoleCandidate)
	stale := int64(7)

	cases := []struct {
		name   string
		actor  jobboard.Actor
		id     int64
		change jobboard.StatusChange
		want   error
	}{
		{"other candidate", otherCandidate, a.ID, jobboard.StatusChange{Status: jobboard.StatusWithdrawn}, jobboard.ErrNotFound},
		{"employer of another company", outsider, a.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing}, jobboard.ErrNotFound},
		{"no such application", w.employer, a.ID + 1000, jobboard.StatusChange{Status: jobboard.StatusReviewing}, jobboard.ErrNotFound},
		{"stale version", w.employer, a.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing, IfVersion: &stale}, jobboard.ErrPreconditionFailed},
		{"stale version, same status", w.employer, a.ID, jobboard.StatusChange{Status: jobboard.StatusSubmitted, IfVersion: &stale}, jobboard.ErrPreconditionFailed},
		{"employer skips a step", w.employer, a.ID, jobboard.StatusChange{Status: jobboard.StatusInterview}, jobboard.ErrInvalidTransition},
		{"employer withdraws", w.employer, a.ID, jobboard.StatusChange{Status: jobboard.StatusWithdrawn}, jobboard.ErrInvalidTransition},
		{"candidate reviews", w.candidate, a.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing}, jobboard.ErrInvalidTransition},
		{"candidate rejects", w.candidate, a.ID, jobboard.StatusChange{Status: jobboard.StatusRejected}, jobboard.ErrInvalidTransition},
		{"unknown status", w.employer, a.ID, jobboard.StatusChange{Status: "archived"}, jobboard.ErrInvalidTransition},
	}
	for _, c := range cases {
		got, ev, err := changeStatus(ctx, w.db, c.actor, c.id, c.change)
		if !errors.Is(err, c.want) || ev != nil || got != (jobboard.Application{}) {
			t.Errorf("%s: %+v, %+v, %v; want %v and nothing else", c.name, got, ev, err, c.want)
		}
	}
	var te *jobboard.TransitionError
	_, err := w.db.ChangeStatus(ctx, w.candidate, a.ID, jobboard.StatusChange{Status: jobboard.StatusHired})
	if !errors.As(err, &te) || te.From != jobboard.StatusSubmitted || te.To != jobboard.StatusHired {
		t.Errorf("err = %v, want a TransitionError submitted -> hired", err)
	}

	// Same status: the application comes back unchanged, with no event.
	for name, actor := range map[string]jobboard.Actor{"employer": w.employer, "candidate": w.candidate} {
		got, ev, err := changeStatus(ctx, w.db, actor, a.ID, jobboard.StatusChange{Status: jobboard.StatusSubmitted, IfVersion: ptr(int64(1))})
		if err != nil || ev != nil {
			t.Errorf("no-op by %s: %+v, %v", name, ev, err)
		}
		if diff := cmp.Diff(a, got); diff != "" {
			t.Errorf("no-op by %s (-want +got):\n%s", name, diff)
		}
	}
	after, err := w.db.Application(ctx, w.candidate, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, after); diff != "" {
		t.Errorf("application changed (-before +after):\n%s", diff)
	}
	if h, o := changes(t, w.db); h != 0 || o != 0 {
		t.Errorf("history %d, outbox %d; want none", h, o)
	}

	// The candidate may withdraw from any non-terminal status.
	if _, err := w.db.ChangeStatus(ctx, w.employer, a.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing}); err != nil {
		t.Fatal(err)
	}
	got, ev, err := changeStatus(ctx, w.db, w.candidate, a.ID, jobboard.StatusChange{Status: jobboard.StatusWithdrawn, IfVersion: ptr(int64(2))})
	if err != nil || ev == nil || got.Status != jobboard.StatusWithdrawn || got.Version != 3 {
		t.Fatalf("withdraw: %+v, %+v, %v", got, ev, err)
	}
	history, err := w.db.History(ctx, w.employer, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(history) != 2 || history[1].ChangedBy != w.candidate.UserID || history[1].NewStatus != jobboard.StatusWithdrawn {
		t.Errorf("history = %+v", history)
	}
}

// Two changes with the same If-Match version at the same moment: the row
// lock makes the second see the first's new version.
func TestChangeStatusConcurrentSameVersion(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := mustApply(t, w.db, w.candidate, w.job.ID)
	for _, n := range []int{2, 10} {
		from, _ := w.db.Application(context.Background(), w.candidate, a.ID)
		to := map[jobboard.ApplicationStatus]jobboard.ApplicationStatus{
			jobboard.StatusSubmitted: jobboard.StatusReviewing, jobboard.StatusReviewing: jobboard.StatusInterview}[from.Status]
		h0, o0 := changes(t, w.db)
		start := make(chan struct{})
		errs := make(chan error, n)
		for range n {
			go func() {
				<-start
				_, err := w.db.ChangeStatus(context.Background(), w.employer, a.ID,
					jobboard.StatusChange{Status: to, IfVersion: &from.Version})
				errs <- err
			}()
		}
		close(start)
		ok, stale := 0, 0
		for range n {
			err := <-errs
			switch {
			case err == nil:
				ok++
			case errors.Is(err, jobboard.ErrPreconditionFailed):
				stale++
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}
		if ok != 1 || stale != n-1 {
			t.Errorf("%d racers: %d ok, %d precondition failed; want 1 and %d", n, ok, stale, n-1)
		}
		if h, o := changes(t, w.db); h != h0+1 || o != o0+1 {
			t.Errorf("%d racers: %d history and %d outbox rows written, want 1 and 1", n, h-h0, o-o0)
		}
		got, _ := w.db.Application(context.Background(), w.candidate, a.ID)
		if got.Version != from.Version+1 || got.Status != to {
			t.Errorf("%d racers: application at version %d, status %s", n, got.Version, got.Status)
		}
	}
}

// Without If-Match, simultaneous requests for the same change make one
// change; the others find the status already set and change nothing.
func TestChangeStatusConcurrentNoVersion(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	a := mustApply(t, w.db, w.candidate, w.job.ID)
	const n = 10
	start := make(chan struct{})
	evs := make(chan *jobboard.Event, n)
	for range n {
		go func() {
			<-start
			_, ev, err := changeStatus(context.Background(), w.db, w.employer, a.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing})
			if err != nil {
				t.Errorf("ChangeStatus: %v", err)
			}
			evs <- ev
		}()
	}
	close(start)
	withEvent := 0
	for range n {
		if <-evs != nil {
			withEvent++
		}
	}
	if withEvent != 1 {
		t.Errorf("%d changes emitted an event, want 1", withEvent)
	}
	if h, o := changes(t, w.db); h != 1 || o != 1 {
		t.Errorf("history %d, outbox %d; want 1 and 1", h, o)
	}
}

func TestHistoryVisibility(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	a := mustApply(t, w.db, w.candidate, w.job.ID)

	// Never changed: an empty list, not an error.
	h, err := w.db.History(ctx, w.employer, a.ID)
	if err != nil || h == nil || len(h) != 0 {
		t.Errorf("History of an unchanged application = %v, %v", h, err)
	}
	before := time.Now()
	if _, err := w.db.ChangeStatus(ctx, w.employer, a.ID, jobboard.StatusChange{Status: jobboard.StatusRejected}); err != nil {
		t.Fatal(err)
	}
	outsider := mustUser(t, w.db, jobboard.RoleEmployer)
	mustCompany(t, w.db, outsider)
	otherCandidate := mustUser(t, w.db, jobboard.RoleCandidate)
	for name, actor := range map[string]jobboard.Actor{"other candidate": otherCandidate, "employer of another company": outsider} {
		_, err := w.db.History(ctx, actor, a.ID)
		if !errors.Is(err, jobboard.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", name, err)
		}
	}
	_, err = w.db.History(ctx, w.candidate, a.ID+1000)
	wantErr(t, err, jobboard.ErrNotFound)
	h, err = w.db.History(ctx, w.candidate, a.ID)
	if err != nil || len(h) != 1 || h[0].OldStatus != jobboard.StatusSubmitted || h[0].NewStatus != jobboard.StatusRejected {
		t.Fatalf("History = %+v, %v", h, err)
	}
	if d := h[0].ChangedAt.Sub(before); d < -time.Minute || d > time.Minute {
		t.Errorf("changed_at %v is far from now %v", h[0].ChangedAt, before)
	}
}
