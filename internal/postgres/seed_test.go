package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func TestSeedJobs(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	const n = 5000
	if err := w.db.SeedJobs(ctx, w.company.ID, n); err != nil {
		t.Fatalf("SeedJobs: %v", err)
	}
	if got := count(t, w.db, "SELECT count(*) FROM jobs WHERE company_id = $1", w.company.ID); got != n+1 {
		t.Errorf("jobs = %d, want %d", got, n+1)
	}
	// Varied enough for searches and filters to mean something.
	checks := []struct {
		name     string
		sql      string
		min, max int
	}{
		{"distinct titles", "SELECT count(DISTINCT title) FROM jobs", 40, n},
		{"distinct descriptions", "SELECT count(DISTINCT description) FROM jobs", 80, n},
		{"distinct locations", "SELECT count(DISTINCT location) FROM jobs", 8, 20},
		{"employment types", "SELECT count(DISTINCT employment_type) FROM jobs", len(jobboard.EmploymentTypes), len(jobboard.EmploymentTypes)},
		{"currencies", "SELECT count(DISTINCT salary_currency) FROM jobs", 3, 3},
		{"closed", "SELECT count(*) FROM jobs WHERE status = 'closed'", n / 20, n / 5},
		{"remote", "SELECT count(*) FROM jobs WHERE remote", n / 5, n / 2},
		{"without salary", "SELECT count(*) FROM jobs WHERE salary_min IS NULL", n / 10, n / 3},
		{"engineer", "SELECT count(*) FROM jobs WHERE search @@ to_tsquery('english', 'engineer')", n / 4, n / 2},
		{"nurse", "SELECT count(*) FROM jobs WHERE search @@ to_tsquery('english', 'nurse')", n / 25, n / 6},
		{"rust", "SELECT count(*) FROM jobs WHERE search @@ to_tsquery('english', 'rust')", 1, n / 40},
	}
	for _, c := range checks {
		if got := count(t, w.db, c.sql); got < c.min || got > c.max {
			t.Errorf("%s: %d, want %d..%d", c.name, got, c.min, c.max)
		}
	}
	page, err := w.db.SearchJobs(ctx, nil, jobboard.JobFilter{Query: "python", Limit: 10})
	if err != nil || len(page.Items) != 10 || page.NextAfter == 0 {
		t.Errorf("search python over seeded jobs: %d items, next %d, %v", len(page.Items), page.NextAfter, err)
	}

	err = w.db.SeedJobs(ctx, w.company.ID+1000, 10)
	if err == nil {
		t.Error("seeding a company that does not exist succeeded")
	}
	if got := count(t, w.db, "SELECT count(*) FROM jobs"); got != n+1 {
		t.Errorf("after the failed seed: jobs = %d, want %d", got, n+1)
	}
}

// BenchmarkSearchJobs pages through 100k seeded jobs. Each case reports its
// cost as a ratio to the first page of the plain listing, measured in the
// same run ("x-listing"): the last page of a search should cost about what
// its first page does, and a text search about what a listing does.
func BenchmarkSearchJobs(b *testing.B) {
	db := pgtest.NewDB(b)
	ctx := context.Background()
	employer := mustUser(b, db, jobboard.RoleEmployer)
	company := mustCompany(b, db, employer)
	if err := db.SeedJobs(ctx, company.ID, 100_000); err != nil {
		b.Fatal(err)
	}
	search := func(f jobboard.JobFilter) jobboard.Page[jobboard.Job] {
		page, err := db.SearchJobs(ctx, nil, f)
		if err != nil {
			b.Fatal(err)
		}
		return page.Page
	}
	// lastCursor is the cursor whose page is the last one of f.
	lastCursor := func(f jobboard.JobFilter) int64 {
		var ids []int64
		f.Limit = jobboard.MaxPageSize
		for {
			page := search(f)
			for _, j := range page.Items {
				ids = append(ids, j.ID)
			}
			if page.NextAfter == 0 {
				break
			}
			f.After = page.NextAfter
		}
		slices.Sort(ids)
		if len(ids) <= jobboard.DefaultPageSize {
			return 0
		}
		return ids[jobboard.DefaultPageSize/2]
	}
	listing := func() { search(jobboard.JobFilter{Limit: jobboard.DefaultPageSize}) }
	medianDuration(100, listing) // warm the pool's connections and caches
	baseline := medianDuration(300, listing)

	cases := []struct {
		name string
		f    jobboard.JobFilter
	}{
		{"listing", jobboard.JobFilter{}},
		{"common word", jobboard.JobFilter{Query: "engineer"}},
		{"rare word", jobboard.JobFilter{Query: "rust"}},
		{"phrase and negation", jobboard.JobFilter{Query: `"backend engineer" -senior`}},
		{"word and filters", jobboard.JobFilter{Query: "python", Location: "berlin", Remote: ptr(false), SalaryMin: ptr(int64(90000))}},
		{"filters", jobboard.JobFilter{EmploymentType: jobboard.Contract, Remote: ptr(true)}},
	}
	for _, c := range cases {
		c.f.Limit = jobboard.DefaultPageSize
		last := c.f
		last.After = lastCursor(c.f)
		for _, p := range []struct {
			name string
			f    jobboard.JobFilter
		}{{"first page", c.f}, {"last page", last}} {
			b.Run(c.name+"/"+p.name, func(b *testing.B) {
				for b.Loop() {
					search(p.f)
				}
				b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(baseline), "x-listing")
			})
		}
	}
}

// medianDuration runs fn n times and returns the median duration.
func medianDuration(n int, fn func()) time.Duration {
	ds := make([]time.Duration, n)
	for i := range ds {
		start := time.Now()
		fn()
		ds[i] = time.Since(start)
	}
	slices.Sort(ds)
	return ds[n/2]
}
