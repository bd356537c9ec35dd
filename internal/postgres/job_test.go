package postgres_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/jobboard/jobboard/internal/jobboard"
)

func TestCreateJob(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()

	in := jobboard.NewJob{
		Title: "Go Developer", Description: "Write Go.", Location: "Lisbon", Remote: true,
		EmploymentType: jobboard.Contract,
		Salary:         &jobboard.Salary{Min: 50000, Max: 70000, Currency: "EUR"},
	}
	j, err := w.db.CreateJob(ctx, w.employer, w.company.ID, in)
	if err != nil {
		t.Fatalf("CreateJob: %v", err)
	}
	want := jobboard.Job{
		ID: j.ID, CompanyID: w.company.ID, Title: in.Title, Description: in.Description,
		Location: in.Location, Remote: true, EmploymentType: jobboard.Contract,
		Salary: in.Salary, Status: jobboard.JobOpen, CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt,
	}
	if diff := cmp.Diff(want, j); diff != "" {
		t.Errorf("CreateJob (-want +got):\n%s", diff)
	}
	if j.CreatedAt.IsZero() || !j.UpdatedAt.Equal(j.CreatedAt) {
		t.Errorf("timestamps: created %v, updated %v", j.CreatedAt, j.UpdatedAt)
	}
	got, err := w.db.Job(ctx, nil, j.ID)
	if err != nil {
		t.Fatalf("Job: %v", err)
	}
	if diff := cmp.Diff(j, got); diff != "" {
		t.Errorf("Job (-created +read):\n%s", diff)
	}
	// No salary reads back as nil, not as a zero salary.
	if w.job.Salary != nil {
		t.Errorf("job without salary has %+v", w.job.Salary)
	}
}

func TestCreateJobNotMember(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	otherEmployer := mustUser(t, w.db, jobboard.RoleEmployer)
	mustCompany(t, w.db, otherEmployer)

	cases := map[string]struct {
		actor     jobboard.Actor
		companyID int64
	}{
		"employer of another company": {otherEmployer, w.company.ID},
		"candidate":                   {w.candidate, w.company.ID},
		"no such company":             {w.employer, w.company.ID + 1000},
	}
	for name, c := range cases {
		_, err := w.db.CreateJob(ctx, c.actor, c.companyID, newJob("Intruder"))
		if !errors.Is(err, jobboard.ErrNotFound) {
			t.Errorf("%s: err = %v, want ErrNotFound", name, err)
		}
	}
	if n := count(t, w.db, "SELECT count(*) FROM jobs"); n != 1 {
		t.Errorf("jobs = %d, want only the world's 1", n)
	}
}

func TestJobVisibility(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	outsider := mustUser(t, w.db, jobboard.RoleEmployer)
	mustCompany(t, w.db, outsider)
	colleague := mustUser(t, w.db, jobboard.RoleEmployer)
	if _, err := w.db.Pool.Exec(ctx, "INSERT INTO company_members (company_id, user_id) VALUES ($1, $2)", w.company.ID, colleague.UserID); err != nil {
		t.Fatal(err)
	}

	for name, actor := range map[string]*jobboard.Actor{
		"anonymous": nil, "candidate": &w.candidate, "outsider": &outsider, "member": &w.employer,
	} {
		if _, err := w.db.Job(ctx, actor, w.job.ID); err != nil {
			t.Errorf("open job, %s: %v", name, err)
		}
	}
	closed := mustClose(t, w.db, w.employer, w.job.ID)
	for name, actor := range map[string]*jobboard.Actor{"anonymous": nil, "candidate": &w.candidate, "outsider": &outsider} {
		_, err := w.db.Job(ctx, actor, w.job.ID)
		if !errors.Is(err, jobboard.ErrNotFound) {
			t.Errorf("closed job, %s: err = %v, want ErrNotFound", name, err)
		}
	}
	for name, actor := range map[string]*jobboard.Actor{"creator": &w.employer, "colleague": &colleague} {
		got, err := w.db.Job(ctx, actor, w.job.ID)
		if err != nil {
			t.Errorf("closed job, %s: %v", name, err)
		} else if diff := cmp.Diff(closed, got); diff != "" {
			t.Errorf("closed job, %s (-want +got):\n%s", name, diff)
		}
	}
	_, err := w.db.Job(ctx, &w.employer, w.job.ID+1000)
	wantErr(t, err, jobboard.ErrNotFound)
}

func TestUpdateJob(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()

	salary := &jobboard.Salary{Min: 40000, Max: 60000, Currency: " gbp "}
	got, err := w.db.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{
		Title: ptr("  Senior Backend Engineer "), Remote: ptr(true),
		SetSalary: true, Salary: salary,
	})
	if err != nil {
		t.Fatalf("UpdateJob: %v", err)
	}
	want := w.job
	want.Title = "Senior Backend Engineer"
	want.Remote = true
	want.Salary = &jobboard.Salary{Min: 40000, Max: 60000, Currency: "GBP"}
	want.UpdatedAt = got.UpdatedAt
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UpdateJob (-want +got):\n%s", diff)
	}
	if !got.UpdatedAt.After(w.job.UpdatedAt) {
		t.Errorf("updated_at %v not after %v", got.UpdatedAt, w.job.UpdatedAt)
	}
	read, err := w.db.Job(ctx, nil, w.job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, read); diff != "" {
		t.Errorf("read back (-updated +read):\n%s", diff)
	}

	// Removing the salary.
	got, err = w.db.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{SetSalary: true})
	if err != nil {
		t.Fatalf("UpdateJob remove salary: %v", err)
	}
	if got.Salary != nil {
		t.Errorf("salary = %+v, want nil", got.Salary)
	}

	t.Run("invalid patch changes nothing", func(t *testing.T) {
		before, _ := w.db.Job(ctx, nil, w.job.ID)
		_, err := w.db.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{
			Title: ptr(""), Status: ptr(jobboard.JobStatus("archived")),
		})
		var ve *jobboard.ValidationError
		if !errors.As(err, &ve) || len(ve.Fields) != 2 {
			t.Fatalf("err = %v, want a ValidationError on title and status", err)
		}
		after, _ := w.db.Job(ctx, nil, w.job.ID)
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("job changed (-before +after):\n%s", diff)
		}
	})
	t.Run("only members", func(t *testing.T) {
		outsider := mustUser(t, w.db, jobboard.RoleEmployer)
		mustCompany(t, w.db, outsider)
		before, _ := w.db.Job(ctx, nil, w.job.ID)
		for name, actor := range map[string]jobboard.Actor{"outsider": outsider, "candidate": w.candidate} {
			_, err := w.db.UpdateJob(ctx, actor, w.job.ID, jobboard.JobPatch{Title: ptr("Hijacked")})
			if !errors.Is(err, jobboard.ErrNotFound) {
				t.Errorf("%s: err = %v, want ErrNotFound", name, err)
			}
		}
		after, _ := w.db.Job(ctx, nil, w.job.ID)
		if diff := cmp.Diff(before, after); diff != "" {
			t.Errorf("job changed (-before +after):\n%s", diff)
		}
		_, err := w.db.UpdateJob(ctx, w.employer, w.job.ID+1000, jobboard.JobPatch{Title: ptr("X")})
		wantErr(t, err, jobboard.ErrNotFound)
	})
	t.Run("close and reopen", func(t *testing.T) {
		closed := mustClose(t, w.db, w.employer, w.job.ID)
		if closed.Status != jobboard.JobClosed {
			t.Fatalf("status = %q", closed.Status)
		}
		open, err := w.db.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{Status: ptr(jobboard.JobOpen)})
		if err != nil || open.Status != jobboard.JobOpen {
			t.Fatalf("reopen = %q, %v", open.Status, err)
		}
	})
}

// Concurrent patches of different fields both survive: the row lock taken
// when reading makes each patch apply to the other's result.
func TestUpdateJobConcurrentPatchesKeepBothFields(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	const n = 10
	errs := make(chan error, 2*n)
	for i := range n {
		go func() {
			_, err := w.db.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{Title: ptr("Title " + string(rune('A'+i)))})
			errs <- err
		}()
		go func() {
			_, err := w.db.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{Location: ptr("Paris")})
			errs <- err
		}()
	}
	for range 2 * n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	got, err := w.db.Job(ctx, nil, w.job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Location != "Paris" || got.Title == w.job.Title {
		t.Errorf("after concurrent patches: title %q, location %q", got.Title, got.Location)
	}
}
