package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func TestParseQueryExecMode(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]pgx.QueryExecMode{
		"":                0,
		"cache_statement": pgx.QueryExecModeCacheStatement,
		"cache_describe":  pgx.QueryExecModeCacheDescribe,
		"describe_exec":   pgx.QueryExecModeDescribeExec,
		"exec":            pgx.QueryExecModeExec,
		"simple_protocol": pgx.QueryExecModeSimpleProtocol,
	} {
		if got, err := postgres.ParseQueryExecMode(name); err != nil || got != want {
			t.Errorf("ParseQueryExecMode(%q) = %v, %v; want %v", name, got, err, want)
		}
	}
	for _, name := range []string{"prepared", "exec ", "EXEC", "cache statement"} {
		if _, err := postgres.ParseQueryExecMode(name); err == nil || !strings.Contains(err.Error(), "cache_statement") {
			t.Errorf("ParseQueryExecMode(%q): %v; want an error that names the modes", name, err)
		}
	}
}

// namedStatements returns the named prepared statements of the store's
// connection (its pool has one), as the server lists them.
func namedStatements(t *testing.T, db *pgtest.DB) []string {
	t.Helper()
	rows, _ := postgres.Pool(db.DB).Query(context.Background(), "SELECT name FROM pg_prepared_statements")
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// Behind a connection proxy that multiplexes server connections (RDS
// Proxy), a named prepared statement is session state that ties the
// client's connection to one server connection. In every mode but
// cache_statement, what the API, the worker and the sweeper ask of the
// store leaves the server holding no named prepared statement for the
// connection; cache_statement does leave some, which shows that the server
// would list them.
func TestOnlyCacheStatementPreparesNamedStatements(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	if err := w.db.SeedJobs(context.Background(), w.company.ID, 500); err != nil {
		t.Fatal(err)
	}
	for _, name := range postgres.QueryExecModeNames() {
		t.Run(name, func(t *testing.T) {
			mode, err := postgres.ParseQueryExecMode(name)
			if err != nil {
				t.Fatal(err)
			}
			db := pgtest.Open(t, w.db.URL, postgres.WithQueryExecMode(mode), func(c *pgxpool.Config) { c.MaxConns = 1 })
			storeWorkload(t, db, w)
			names := namedStatements(t, db)
			switch {
			case mode == pgx.QueryExecModeCacheStatement && len(names) == 0:
				t.Errorf("%s: no named prepared statement on the server; the check cannot see them", name)
			case mode != pgx.QueryExecModeCacheStatement && len(names) > 0:
				t.Errorf("%s: the server holds %d named prepared statements: %s", name, len(names), strings.Join(names, ", "))
			}
		})
	}
}

// storeWorkload asks db what the functions ask of the store: the API's
// reads, searches of every shape, writes with and without an
// Idempotency-Key, an application through to a status change, the
// worker's claim of its event and the sweeper's rounds.
func storeWorkload(t *testing.T, db *pgtest.DB, w world) {
	t.Helper()
	ctx := context.Background()
	check := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	_, err := db.Job(ctx, nil, w.job.ID)
	check("job", err)
	_, err = db.Job(ctx, &w.employer, w.job.ID)
	check("job, member", err)
	_, err = db.Company(ctx, w.company.ID)
	check("company", err)
	_, err = db.UserByID(ctx, w.candidate.UserID)
	check("user", err)
	_, err = db.JobListingVersion(ctx)
	check("listing version", err)
	for _, f := range []jobboard.JobFilter{
		{}, {After: w.job.ID}, {Query: "engineer"}, {Query: "rust"}, {Query: "rust", After: w.job.ID},
		{Query: manyWords + " engineer"}, {Location: "Berlin"}, {Query: "engineer", Location: "Berlin"},
		{Query: "nurse", SalaryMin: ptr(int64(50000))}, {CompanyID: &w.company.ID},
	} {
		for range 7 { // past the five custom plans after which PostgreSQL may keep a generic one
			_, err := db.SearchJobs(ctx, &w.employer, f)
			check("search", err)
		}
	}
	title := "Backend Engineer (Go)"
	_, err = db.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{Title: &title})
	check("update job", err)
	nj := newJob("Site Reliability Engineer")
	_, err = db.CreateJob(ctx, w.employer, w.company.ID, nj)
	check("create job", err)
	_, err = db.Write(ctx, &jobboard.IdempotentRequest{Scope: "user:1", Key: "k-" + t.Name(), Fingerprint: []byte("f")},
		func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
			if _, err := st.CreateJob(ctx, w.employer, w.company.ID, nj); err != nil {
				return nil, err
			}
			return &jobboard.StoredResponse{Status: 201, Body: []byte(`{}`)}, nil
		})
	check("keyed create job", err)
	_, err = db.StoredResponse(ctx, "user:1", "k-"+t.Name())
	check("stored response", err)

	candidate := mustUser(t, db, jobboard.RoleCandidate)
	app, err := db.Apply(ctx, candidate, w.job.ID, jobboard.NewApplication{CoverLetter: "Hello"})
	check("apply", err)
	_, err = db.Application(ctx, candidate, app.ID)
	check("application", err)
	_, err = db.JobApplications(ctx, w.employer, w.job.ID, 10, 0)
	check("job applications", err)
	_, err = db.CandidateApplications(ctx, candidate, 10, 0)
	check("candidate applications", err)
	_, ev, err := changeStatus(ctx, db, w.employer, app.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing})
	check("change status", err)
	_, err = db.History(ctx, candidate, app.ID)
	check("history", err)
	claim, err := db.ClaimEvent(ctx, *ev, time.Minute)
	check("claim event", err)
	_, err = db.FinishClaims(ctx, []jobboard.Finish{{EventID: ev.EventID, Token: claim.Token, Outcome: jobboard.OutcomeSent}})
	check("finish claim", err)
	_, _, err = db.PublishPending(ctx, 0, time.Hour, 10, func(_ context.Context, events []jobboard.Event) ([]string, error) {
		ids := make([]string, len(events))
		for i, e := range events {
			ids[i] = e.EventID
		}
		return ids, nil
	})
	check("publish pending", err)
	_, err = db.Backlog(ctx)
	check("backlog", err)
	loginKey := jobboard.ThrottleKey{Digest: []byte("login-key"), Policy: jobboard.DefaultLoginPolicy}
	_, err = db.LoginAttempt(ctx, time.Now(), loginKey)
	check("login attempt", err)
	check("login succeeded", db.LoginSucceeded(ctx, loginKey))
	_, err = db.DeleteExpired(ctx, time.Hour, 100)
	check("delete expired", err)
}

// The API's reads are planned once per connection in cache_statement: a
// job read, and every statement of a search without filters, which is
// written so that no value changes its plan. PostgreSQL then keeps their
// generic plan after the five custom plans it makes first, rather than
// planning every request, here in a fresh database whose company_members
// has no statistics yet. (That the generic plans of searches read no more
// than custom ones is TestSearchJobsReadsBoundedRows's.)
func TestReadsKeepAGenericPlan(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	if err := w.db.SeedJobs(ctx, w.company.ID, 2000); err != nil {
		t.Fatal(err)
	}
	db := pgtest.Open(t, w.db.URL, postgres.WithQueryExecMode(pgx.QueryExecModeCacheStatement),
		func(c *pgxpool.Config) { c.MaxConns = 1 })
	fixed := map[string]bool{}
	traced := postgres.TunedSearch{DB: db.DB, Trace: func(sql string, _ []any, fixedPlan bool) {
		if fixedPlan {
			fixed[sql] = true
		}
	}}
	for range 8 {
		for _, f := range []jobboard.JobFilter{
			{}, {After: w.job.ID}, {Query: "engineer"}, {Query: "engineer", After: w.job.ID},
			{Query: "astronaut"}, {Query: manyWords + " nurse"},
		} {
			if _, err := traced.SearchJobs(ctx, nil, f); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Anonymous reads first, then a member's: the first five plans of a
	// statement decide.
	for _, actor := range []*jobboard.Actor{nil, &w.employer} {
		for range 8 {
			if _, err := db.Job(ctx, actor, w.job.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(fixed) < 5 {
		t.Fatalf("%d statements of fixed plan traced, want the listing, window and text index ones", len(fixed))
	}
	type prepared struct {
		Statement            string
		GenericPlans, Custom int64
	}
	rows, _ := postgres.Pool(db.DB).Query(ctx, "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements")
	stmts, err := pgx.CollectRows(rows, pgx.RowToStructByPos[prepared])
	if err != nil {
		t.Fatal(err)
	}
	for sql := range fixed {
		if !slices.ContainsFunc(stmts, func(p prepared) bool { return p.Statement == sql }) {
			t.Errorf("not prepared:\n%s", sql)
		}
	}
	if len(stmts) < len(fixed)+3 { // and the header and the two job reads
		t.Errorf("%d statements prepared, want at least %d", len(stmts), len(fixed)+3)
	}
	for _, p := range stmts {
		if p.GenericPlans == 0 {
			t.Errorf("planned for the values every time (%d custom plans):\n%s", p.Custom, p.Statement)
		}
	}
}
