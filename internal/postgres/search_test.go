package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// board is a set of jobs of two companies with varied fields, some closed.
type board struct {
	db        *pgtest.DB
	a, b      jobboard.Company
	ea, eb    jobboard.Actor // the employers (members) of a and b
	candidate jobboard.Actor
	jobs      []jobboard.Job // as created (and closed), in id order
}

func newBoard(t *testing.T) board {
	t.Helper()
	db := pgtest.NewDB(t)
	bd := board{db: db, ea: mustUser(t, db, jobboard.RoleEmployer), eb: mustUser(t, db, jobboard.RoleEmployer),
		candidate: mustUser(t, db, jobboard.RoleCandidate)}
	bd.a = mustCompany(t, db, bd.ea)
	bd.b = mustCompany(t, db, bd.eb)
	titles := []string{"Backend Engineer", "Python Engineer", "Registered Nurse", "Product Designer", "Backend Python Developer"}
	locations := []string{"Berlin", "New York", "berlin-Mitte", "Remote EU (100% remote)"}
	for i := range 60 {
		nj := jobboard.NewJob{
			Title:          titles[i%len(titles)],
			Description:    "Join us.",
			Location:       locations[i%len(locations)],
			Remote:         i%3 == 0,
			EmploymentType: jobboard.EmploymentTypes[(i/2)%len(jobboard.EmploymentTypes)],
		}
		if i%7 != 0 {
			nj.Salary = &jobboard.Salary{Min: 30000 + int64(i)*1000, Max: 50000 + int64(i)*1000, Currency: "EUR"}
		}
		owner, company := bd.ea, bd.a
		if i%2 == 1 {
			owner, company = bd.eb, bd.b
		}
		j := mustJob(t, db, owner, company.ID, nj)
		if i%6 == 5 {
			j = mustClose(t, db, owner, j.ID)
		}
		bd.jobs = append(bd.jobs, j)
	}
	return bd
}

// expected computes, in Go and independently of the SQL, the ids a search
// must return, newest first. has is the text condition on the lower-cased
// title.
func (bd board) expected(actor *jobboard.Actor, f jobboard.JobFilter, has func(title string) bool) []int64 {
	var ids []int64
	for _, j := range bd.jobs {
		member := actor != nil && ((actor.UserID == bd.ea.UserID && j.CompanyID == bd.a.ID) ||
			(actor.UserID == bd.eb.UserID && j.CompanyID == bd.b.ID))
		seesClosed := member && f.CompanyID != nil
		switch {
		case j.Status != jobboard.JobOpen && !seesClosed:
		case has != nil && !has(strings.ToLower(j.Title)):
		case f.Location != "" && !strings.EqualFold(j.Location, strings.TrimSpace(f.Location)):
		case f.Remote != nil && j.Remote != *f.Remote:
		case f.EmploymentType != "" && j.EmploymentType != f.EmploymentType:
		case f.SalaryMin != nil && (j.Salary == nil || j.Salary.Max < *f.SalaryMin):
		case f.CompanyID != nil && j.CompanyID != *f.CompanyID:
		default:
			ids = append(ids, j.ID)
		}
	}
	slices.Reverse(ids)
	return ids
}

// storeMode is a store in one of pgx's query exec modes.
type storeMode struct {
	mode string
	db   *pgtest.DB
}

// everyMode returns stores over db's database in each of pgx's query exec
// modes (DATABASE_QUERY_EXEC_MODE), so that a test can show the same
// answers whether statements are prepared, described or sent unnamed.
func everyMode(t *testing.T, db *pgtest.DB) []storeMode {
	t.Helper()
	var stores []storeMode
	for _, name := range postgres.QueryExecModeNames() {
		mode, err := postgres.ParseQueryExecMode(name)
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, storeMode{name, pgtest.Open(t, db.URL, postgres.WithQueryExecMode(mode))})
	}
	return stores
}

// jobSearcher is what walk pages through: a DB, or a TunedSearch of one.
type jobSearcher interface {
	SearchJobs(ctx context.Context, actor *jobboard.Actor, f jobboard.JobFilter) (jobboard.JobListing, error)
}

// walk follows the cursors from the first page to the last and returns every
// id seen, checking each page on the way. between runs after every page.
func walk(t *testing.T, db jobSearcher, actor *jobboard.Actor, f jobboard.JobFilter, between func()) []int64 {
	t.Helper()
	var ids []int64
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("cursor never ends")
		}
		page, err := db.SearchJobs(context.Background(), actor, f)
		if err != nil {
			t.Fatalf("SearchJobs(%+v): %v", f, err)
		}
		if len(page.Items) > f.Limit {
			t.Fatalf("page of %d items, limit %d", len(page.Items), f.Limit)
		}
		for _, j := range page.Items {
			if len(ids) > 0 && j.ID >= ids[len(ids)-1] {
				t.Fatalf("id %d after %d: not strictly newest first", j.ID, ids[len(ids)-1])
			}
			ids = append(ids, j.ID)
		}
		if page.NextAfter == 0 {
			return ids
		}
		if len(page.Items) != f.Limit || page.NextAfter != page.Items[len(page.Items)-1].ID {
			t.Fatalf("cursor %d on a page of %d items (limit %d)", page.NextAfter, len(page.Items), f.Limit)
		}
		f.After = page.NextAfter
		if between != nil {
			between()
		}
	}
}

func contains(words ...string) func(string) bool {
	return func(title string) bool {
		for _, w := range words {
			if !strings.Contains(title, w) {
				return false
			}
		}
		return true
	}
}

// manyWords is 18 different stop words: a query with them has as many
// words as it takes to ask the text index at once (searchIndexFirst),
// and matches what it would match without them.
const manyWords = "the a an of to in on at for with by from and is are was were be"

func TestSearchJobsFilters(t *testing.T) {
	t.Parallel()
	bd := newBoard(t)
	cases := []struct {
		name  string
		actor *jobboard.Actor
		f     jobboard.JobFilter
		has   func(string) bool
	}{
		{name: "everything open"},
		{name: "word", f: jobboard.JobFilter{Query: "engineer"}, has: contains("engineer")},
		{name: "stemmed word", f: jobboard.JobFilter{Query: "Nurses"}, has: contains("nurse")},
		{name: "two words", f: jobboard.JobFilter{Query: "backend python"}, has: contains("backend", "python")},
		{name: "negation", f: jobboard.JobFilter{Query: "engineer -python"},
			has: func(s string) bool { return strings.Contains(s, "engineer") && !strings.Contains(s, "python") }},
		{name: "phrase", f: jobboard.JobFilter{Query: `"backend engineer"`}, has: contains("backend engineer")},
		{name: "or", f: jobboard.JobFilter{Query: "nurse or designer"},
			has: func(s string) bool { return strings.Contains(s, "nurse") || strings.Contains(s, "designer") }},
		{name: "no match", f: jobboard.JobFilter{Query: "astronaut"}, has: contains("astronaut")},
		{name: "location, any case", f: jobboard.JobFilter{Location: "BERLIN"}},
		{name: "location with spaces around", f: jobboard.JobFilter{Location: "  new york "}},
		{name: "location is not a substring", f: jobboard.JobFilter{Location: "berl"}},
		{name: "location percent is literal", f: jobboard.JobFilter{Location: "Remote EU (100% remote)"}},
		{name: "location wildcard characters match nothing extra", f: jobboard.JobFilter{Location: "%"}},
		{name: "location underscore is literal", f: jobboard.JobFilter{Location: "Berli_"}},
		{name: "location that no job has", f: jobboard.JobFilter{Location: "Atlantis"}},
		{name: "salary no job reaches", f: jobboard.JobFilter{SalaryMin: ptr(int64(jobboard.MaxSalary))}},
		{name: "negation with a word", f: jobboard.JobFilter{Query: "engineer -backend"},
			has: func(s string) bool { return strings.Contains(s, "engineer") && !strings.Contains(s, "backend") }},
		{name: "remote", f: jobboard.JobFilter{Remote: ptr(true)}},
		{name: "on site", f: jobboard.JobFilter{Remote: ptr(false)}},
		{name: "employment type", f: jobboard.JobFilter{EmploymentType: jobboard.Contract}},
		{name: "salary reaches", f: jobboard.JobFilter{SalaryMin: ptr(int64(80000))}},
		{name: "company, anonymous", f: jobboard.JobFilter{CompanyID: &bd.b.ID}},
		{name: "company, its member sees closed jobs", actor: &bd.ea, f: jobboard.JobFilter{CompanyID: &bd.a.ID}},
		{name: "company, another employer", actor: &bd.eb, f: jobboard.JobFilter{CompanyID: &bd.a.ID}},
		{name: "company, candidate", actor: &bd.candidate, f: jobboard.JobFilter{CompanyID: &bd.a.ID}},
		{name: "member without company filter sees only open jobs", actor: &bd.ea},
		{name: "everything at once", actor: &bd.ea, has: contains("engineer"), f: jobboard.JobFilter{
			Query: "engineer", Location: "berlin", Remote: ptr(false), EmploymentType: jobboard.FullTime,
			SalaryMin: ptr(int64(40000)), CompanyID: &bd.a.ID}},
		{name: "many words or'ed, most unknown", f: jobboard.JobFilter{Query: "astronaut or pilot or nurse or zookeeper or designer or juggler"},
			has: func(s string) bool { return strings.Contains(s, "nurse") || strings.Contains(s, "designer") }},
		{name: "word and location", f: jobboard.JobFilter{Query: "python", Location: "new york"}, has: contains("python")},
		{name: "word, company member sees closed jobs", actor: &bd.eb, f: jobboard.JobFilter{Query: "engineer", CompanyID: &bd.b.ID},
			has: contains("engineer")},
		{name: "contradiction", f: jobboard.JobFilter{Query: "engineer -engineer"}, has: contains("no title has this")},
		// Enough words, none joined by "or", for the text index to answer
		// at once, without a window (searchIndexFirst).
		{name: "many words, none or'ed", f: jobboard.JobFilter{Query: manyWords + " engineer -python"},
			has: func(s string) bool { return strings.Contains(s, "engineer") && !strings.Contains(s, "python") }},
		{name: "many words, one or'ed", f: jobboard.JobFilter{Query: manyWords + " nurse or designer"},
			has: func(s string) bool { return strings.Contains(s, "nurse") || strings.Contains(s, "designer") }},
	}
	open := len(bd.expected(nil, jobboard.JobFilter{}, nil))
	proper := 0
	stores := everyMode(t, bd.db)
	for _, c := range cases {
		want := bd.expected(c.actor, c.f, c.has)
		if len(want) > 0 && len(want) < open {
			proper++
		}
		// Text searches check the newest jobs one by one (the walk), then
		// ask the text index about the rest: a walk of 1 or 3 rows makes
		// every page of the small board cross from one part to the other.
		// Every query exec mode gives the same pages.
		for _, store := range stores {
			for _, searchWalk := range []int{0, 1, 3} {
				for _, limit := range []int{1, 4, 100} {
					t.Run(fmt.Sprintf("%s/%s/walk %d/limit %d", c.name, store.mode, searchWalk, limit), func(t *testing.T) {
						f := c.f
						f.Limit = limit
						got := walk(t, postgres.TunedSearch{DB: store.db.DB, Walk: searchWalk}, c.actor, f, nil)
						if diff := cmp.Diff(want, got); diff != "" {
							t.Errorf("ids (-want +got):\n%s", diff)
						}
					})
				}
			}
		}
	}
	// The filters must actually select: most cases keep some jobs but not all.
	if proper < len(cases)-10 {
		t.Errorf("only %d of %d cases select a proper non-empty subset; the board does not exercise the filters", proper, len(cases))
	}
}

// Jobs created while a client pages through results have higher ids than
// its cursor: they do not appear, and nothing repeats or is skipped.
func TestSearchJobsStableWhileInserting(t *testing.T) {
	t.Parallel()
	bd := newBoard(t)
	for _, store := range everyMode(t, bd.db) {
		for _, f := range []jobboard.JobFilter{{Limit: 3}, {Limit: 2, Query: "engineer"}} {
			stableWhileInserting(t, &bd, store, f)
		}
	}
}

// stableWhileInserting pages through f with the store while jobs are
// added to bd, and checks the pages.
func stableWhileInserting(t *testing.T, bd *board, store storeMode, f jobboard.JobFilter) {
	t.Helper()
	var has func(string) bool
	if f.Query != "" {
		has = contains(f.Query)
	}
	want := bd.expected(nil, f, has)
	inserted := 0
	got := walk(t, store.db, nil, f, func() {
		bd.jobs = append(bd.jobs, mustJob(t, bd.db, bd.ea, bd.a.ID, newJob("Backend Engineer, new")))
		inserted++
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s, %+v: ids (-want +got):\n%s", store.mode, f, diff)
	}
	if inserted < 3 {
		t.Errorf("%s: only %d jobs inserted while paging", store.mode, inserted)
	}
	// A new first page does show them.
	page, err := store.db.SearchJobs(context.Background(), nil, jobboard.JobFilter{Limit: 1, Query: f.Query})
	if err != nil {
		t.Fatal(err)
	}
	if page.Items[0].Title != "Backend Engineer, new" {
		t.Errorf("%s: newest job = %q, want the one inserted last", store.mode, page.Items[0].Title)
	}
}

func TestSearchJobsPageSize(t *testing.T) {
	t.Parallel()
	bd := newBoard(t) // 50 open jobs
	for _, c := range []struct{ limit, want int }{
		{0, jobboard.DefaultPageSize}, {-5, jobboard.DefaultPageSize}, {7, 7}, {1000, 50},
	} {
		page, err := bd.db.SearchJobs(context.Background(), nil, jobboard.JobFilter{Limit: c.limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != c.want {
			t.Errorf("limit %d: %d items, want %d", c.limit, len(page.Items), c.want)
		}
	}
	// Exactly a full last page: no cursor pointing at an empty page.
	open := len(bd.expected(nil, jobboard.JobFilter{}, nil))
	page, err := bd.db.SearchJobs(context.Background(), nil, jobboard.JobFilter{Limit: open})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != open || page.NextAfter != 0 {
		t.Errorf("limit = all %d: %d items, cursor %d; want all and no cursor", open, len(page.Items), page.NextAfter)
	}
	// A query of stop words only matches nothing, without an error.
	page, err = bd.db.SearchJobs(context.Background(), nil, jobboard.JobFilter{Query: "the and", Limit: 10})
	if err != nil || len(page.Items) != 0 || page.Items == nil {
		t.Errorf("stop words: %d items (nil %t), %v; want an empty page", len(page.Items), page.Items == nil, err)
	}
}

// A query of only negated words cannot use the search index; it is refused
// rather than checked against every open job. Stop words alone still find
// nothing, without an error.
func TestSearchJobsRefusesUnsearchableQueries(t *testing.T) {
	t.Parallel()
	bd := newBoard(t)
	ctx := context.Background()
	for _, store := range everyMode(t, bd.db) {
		for _, f := range []jobboard.JobFilter{{}, {Location: "berlin"}, {After: bd.jobs[40].ID}} {
			for _, q := range []string{"-engineer", "-engineer -nurse", `-"backend engineer"`, "engineer or -nurse"} {
				f.Query, f.Limit = q, 10
				_, err := store.db.SearchJobs(ctx, nil, f)
				if !errors.Is(err, jobboard.ErrUnsearchable) {
					t.Errorf("%s, %+v: %v, want %v", store.mode, f, err, jobboard.ErrUnsearchable)
				}
			}
			for _, q := range []string{"the and", "astronaut", "engineer -engineer"} {
				f.Query, f.Limit = q, 10
				page, err := store.db.SearchJobs(ctx, nil, f)
				if err != nil || len(page.Items) != 0 {
					t.Errorf("%s, %+v: %d items, %v; want an empty page", store.mode, f, len(page.Items), err)
				}
			}
		}
	}
}

// A query of many words, none joined by "or", asks the text index in its
// first and only statement: a window of the newest ids would all but never
// fill its page, and would cost a statement of its own. Joined by "or",
// the same words keep the window, which such a query often fills.
func TestSearchJobsManyWordsAskTheIndexAtOnce(t *testing.T) {
	t.Parallel()
	bd := newBoard(t)
	statements := func(q string) (int, jobboard.JobListing) {
		n := 0
		traced := postgres.TunedSearch{DB: bd.db.DB, Trace: func(string, []any, bool) { n++ }}
		page, err := traced.SearchJobs(context.Background(), nil, jobboard.JobFilter{Query: q, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		return n, page
	}
	many := manyWords + " nurse"
	n, page := statements(many)
	if n != 1 {
		t.Errorf("%q: %d statements, want 1", many, n)
	}
	want := bd.expected(nil, jobboard.JobFilter{Query: "nurse"}, contains("nurse"))
	if len(want) > 5 {
		want = want[:5]
	}
	var got []int64
	for _, j := range page.Items {
		got = append(got, j.ID)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("page (-want +got):\n%s", diff)
	}
	for q, want := range map[string]bool{
		many:                         true,
		many + " or designer":        false, // "or": the window may fill
		strings.Repeat("nurse ", 20): false, // one word, said 20 times
		"nurse designer":             false,
		strings.ToUpper(manyWords):   true,
		strings.Join(strings.Fields(manyWords)[:16], " "): false, // 16 words
	} {
		if got := postgres.SearchIndexFirst(q, 6); got != want {
			t.Errorf("searchIndexFirst(%q) = %t, want %t", q, got, want)
		}
	}
}

// rowsRead runs an anonymous SearchJobs for f, then EXPLAIN ANALYZE of
// every statement it ran that reads jobs, and returns how many rows of
// jobs their plans read: the rows every scan of jobs returned or removed by
// a filter or a recheck. generic is the same for the generic plans that
// PostgreSQL may keep for the statements that the pool's mode prepares
// (fixedPlan); the others are always planned for their values. It also
// returns the page.
func rowsRead(t *testing.T, db *pgtest.DB, f jobboard.JobFilter) (read, generic int, page jobboard.JobListing) {
	t.Helper()
	type statement struct {
		sql   string
		args  []any
		fixed bool
	}
	var ran []statement
	traced := postgres.TunedSearch{DB: db.DB, Trace: func(sql string, args []any, fixed bool) { ran = append(ran, statement{sql, args, fixed}) }}
	page, err := traced.SearchJobs(context.Background(), nil, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range ran {
		n := plansRead(t, db, st.sql, st.args, false)
		read += n
		if st.fixed {
			n = plansRead(t, db, st.sql, st.args, true)
		}
		generic += n
	}
	return read, generic, page
}

// plansRead returns the rows of jobs that the plans of sql with args read
// (see explain): of its own plan, or, for a call of a function of
// migration 014, of the plans of the statements the function runs.
func plansRead(t *testing.T, db *pgtest.DB, sql string, args []any, generic bool) int {
	t.Helper()
	if !strings.HasPrefix(sql, "SELECT * FROM ") {
		return jobsRead(t, explain(t, db, sql, args, generic))
	}
	n := 0
	for _, plan := range explainInside(t, db, sql, args, generic) {
		n += jobsRead(t, plan)
	}
	return n
}

// explainInside runs sql, a call of a PL/pgSQL function, on a connection
// of its own (the server's superuser's) under auto_explain, and returns the plans (as explain does)
// of every statement the function ran, which auto_explain logs to the
// client. With generic, they are the generic plans (plan_cache_mode
// force_generic_plan); else the first plans of a session, made for the
// values.
func explainInside(t *testing.T, db *pgtest.DB, sql string, args []any, generic bool) []json.RawMessage {
	t.Helper()
	ctx := context.Background()
	// LOAD 'auto_explain' takes a superuser: the server's user, in db's
	// database.
	cfg, err := pgx.ParseConfig(pgtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	own, err := pgx.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = own.Database
	var plans []json.RawMessage
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		_, logged, ok := strings.Cut(n.Message, "plan:\n")
		var entry struct {
			Query string          `json:"Query Text"`
			Plan  json.RawMessage `json:"Plan"`
		}
		if ok && json.Unmarshal([]byte(logged), &entry) == nil && entry.Query != sql {
			plans = append(plans, entry.Plan)
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	setup := "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; " +
		"SET auto_explain.log_nested_statements = on; SET auto_explain.log_format = json; SET client_min_messages = log"
	if generic {
		setup += "; SET plan_cache_mode = force_generic_plan"
	}
	if _, err := conn.Exec(ctx, setup); err != nil {
		t.Fatalf("%s: %v", setup, err)
	}
	rows, _ := conn.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	if len(plans) == 0 {
		t.Fatalf("%s: auto_explain logged no plan of the statements inside", sql)
	}
	return plans
}

// explain returns the plan of EXPLAIN ANALYZE of sql with args: the plan
// made for the values, or with generic the generic plan (plan_cache_mode
// force_generic_plan, on a statement prepared for the purpose).
func explain(t *testing.T, db *pgtest.DB, sql string, args []any, generic bool) json.RawMessage {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	query, mode := "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, pgx.QueryExecModeExec
	if generic {
		params := make([]string, len(args))
		for i := range args {
			params[i] = fmt.Sprintf("$%d", i+1)
		}
		for _, setup := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE generic AS " + sql} {
			if _, err := conn.Exec(ctx, setup, pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatalf("%s: %v", setup, err)
			}
		}
		defer func() {
			if _, err := conn.Exec(ctx, "DEALLOCATE generic; RESET plan_cache_mode", pgx.QueryExecModeSimpleProtocol); err != nil {
				t.Fatal(err)
			}
		}()
		// EXECUTE takes no parameters of its own: the simple protocol
		// sends the arguments as quoted literals.
		query, mode = "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE generic("+strings.Join(params, ", ")+")", pgx.QueryExecModeSimpleProtocol
	}
	var plan []struct {
		Plan json.RawMessage `json:"Plan"`
	}
	if err := conn.QueryRow(ctx, query, append([]any{mode}, args...)...).Scan(&plan); err != nil || len(plan) != 1 {
		t.Fatalf("%s: %v", query, err)
	}
	return plan[0].Plan
}

// jobsRead sums the rows of jobs that the nodes of plan read.
func jobsRead(t *testing.T, plan json.RawMessage) int {
	t.Helper()
	var node struct {
		Relation         string            `json:"Relation Name"`
		Rows             float64           `json:"Actual Rows"`
		Loops            float64           `json:"Actual Loops"`
		RemovedByFilter  float64           `json:"Rows Removed by Filter"`
		RemovedByRecheck float64           `json:"Rows Removed by Index Recheck"`
		Plans            []json.RawMessage `json:"Plans"`
	}
	if err := json.Unmarshal(plan, &node); err != nil {
		t.Fatal(err)
	}
	n := 0
	if node.Relation == "jobs" {
		n = int((node.Rows + node.RemovedByFilter + node.RemovedByRecheck) * node.Loops)
	}
	for _, p := range node.Plans {
		n += jobsRead(t, p)
	}
	return n
}

// A text search reads at most its stretch of the newest jobs one by one,
// and then only the matches the text index finds, whatever the planner expects of the words. Without the
// bound, the planner guesses that a word its statistics do not list is in
// 0.5 % of the jobs, and 36 such words joined by "or" in 16 %: it walks the
// newest jobs expecting a page soon, and reads every open job.
func TestSearchJobsReadsBoundedRows(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	if err := w.db.SeedJobs(ctx, w.company.ID, 5000); err != nil {
		t.Fatal(err)
	}
	open := count(t, w.db, "SELECT count(*) FROM jobs WHERE status = 'open'")
	newest := count(t, w.db, "SELECT max(id) FROM jobs")
	unknown := strings.Fields("b c e f g h j k l n p q r u v w x z 0 1 2 3 4 5 6 7 8 9 bb cc ee ff gg hh jj kk")
	const limit = jobboard.DefaultPageSize
	for _, c := range []struct {
		name string
		f    jobboard.JobFilter
	}{
		{"a word no job has", jobboard.JobFilter{Query: "astronaut"}},
		{"36 such words or'ed", jobboard.JobFilter{Query: strings.Join(unknown, " or ")}},
		{"a rare word", jobboard.JobFilter{Query: "rust"}},
		{"a rare word, a later page", jobboard.JobFilter{Query: "rust", After: int64(newest) - 300}},
		{"a common word", jobboard.JobFilter{Query: "engineer"}},
		{"a contradiction", jobboard.JobFilter{Query: "engineer -engineer"}},
		{"a phrase in an order no job has", jobboard.JobFilter{Query: `"python backend engineer"`}},
		{"a 30-word phrase", jobboard.JobFilter{Query: `"keep production reliable with python notebooks and dashboards while you design products in figma for patients on a busy ward and ship orders from our modern warehouse every single day"`}},
		{"a common word said 20 times", jobboard.JobFilter{Query: strings.Repeat("engineer ", 20)}},
		{"a common word among many stop words", jobboard.JobFilter{Query: manyWords + " engineer"}},
		{"a word and a location no job has", jobboard.JobFilter{Query: "engineer", Location: "Atlantis"}},
		{"a rare word and a common location", jobboard.JobFilter{Query: "rust", Location: "berlin"}},
		{"a word and every filter", jobboard.JobFilter{Query: "engineer", Location: "berlin", Remote: ptr(true),
			EmploymentType: jobboard.FullTime, SalaryMin: ptr(int64(100000))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.f.Limit = limit
			// The stretch checked one by one: ids without filters (at most
			// that many jobs), jobs that meet the filters with them: those
			// the stretch walks in id order, or all of them when the
			// planner, which has no statistics for lower(location) (its
			// index is partial), takes them for few and sorts them instead.
			stretch := postgres.SearchStretch(c.f.Query, postgres.SearchWindowPerRow, limit+1)
			if c.f.Location != "" {
				stretch = max(postgres.SearchStretch(c.f.Query, postgres.SearchWalkPerRow, limit+1),
					count(t, w.db, "SELECT count(*) FROM jobs WHERE status = 'open' AND lower(location) = lower($1)", c.f.Location))
			}
			// The matches of the words alone: what the text index finds
			// before a phrase or a negation is checked on the row.
			var words []string
			for _, w := range strings.FieldsFunc(c.f.Query, func(r rune) bool { return r == ' ' || r == '"' || r == '-' }) {
				if w != "or" {
					words = append(words, w)
				}
			}
			op := " & "
			if strings.Contains(c.f.Query, " or ") {
				op = " | "
			}
			matches := count(t, w.db, "SELECT count(*) FROM jobs WHERE status = 'open' AND search @@ to_tsquery('english', $1)",
				strings.Join(words, op))
			bound := stretch + matches
			read, generic, page := rowsRead(t, w.db, c.f)
			t.Logf("%d items, read %d rows, %d with generic plans (stretch %d, %d matches of the words, %d open jobs)",
				len(page.Items), read, generic, stretch, matches, open)
			if read > bound || generic > bound {
				t.Errorf("read %d rows of jobs, %d with generic plans; want at most %d (stretch %d, %d matches of the words; %d open jobs)",
					read, generic, bound, stretch, matches, open)
			}
		})
	}
}
