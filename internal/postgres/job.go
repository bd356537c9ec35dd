package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.JobStore = (*DB)(nil)

// jobColumns is the column list that scanJob reads, in order.
const jobColumns = `j.id, j.company_id, j.title, j.description, j.location, j.remote,
	j.employment_type, j.salary_min, j.salary_max, j.salary_currency, j.status,
	j.created_at, j.updated_at`

func scanJob(row pgx.CollectableRow) (jobboard.Job, error) { return scanJobWith(row) }

// scanJobWith is scanJob for a row with more columns after the job's, read
// into extra.
func scanJobWith(row pgx.CollectableRow, extra ...any) (jobboard.Job, error) {
	var (
		j        jobboard.Job
		lo, hi   *int64
		currency *string
	)
	err := row.Scan(append([]any{&j.ID, &j.CompanyID, &j.Title, &j.Description, &j.Location, &j.Remote,
		&j.EmploymentType, &lo, &hi, &currency, &j.Status, &j.CreatedAt, &j.UpdatedAt}, extra...)...)
	if err == nil && lo != nil && hi != nil && currency != nil {
		j.Salary = &jobboard.Salary{Min: *lo, Max: *hi, Currency: *currency}
	}
	return j, err
}

// salaryArgs splits an optional salary into the three nullable columns.
func salaryArgs(s *jobboard.Salary) (lo, hi *int64, currency *string) {
	if s == nil {
		return nil, nil, nil
	}
	return &s.Min, &s.Max, &s.Currency
}

// actorID is the actor's user id, or NULL for an anonymous caller (which then
// matches no membership).
func actorID(actor *jobboard.Actor) *int64 {
	if actor == nil {
		return nil
	}
	return &actor.UserID
}

// createJobSQL inserts nothing unless the actor is a member of the company,
// with a live session ($11), so the authorisation and the write are one
// statement.
var createJobSQL = `
INSERT INTO jobs AS j (company_id, title, description, location, remote,
	employment_type, salary_min, salary_max, salary_currency)
SELECT $1, $3, $4, $5, $6, $7, $8, $9, $10
WHERE EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = $1 AND m.user_id = $2)
  AND ` + liveSession("$2", "$11") + `
RETURNING ` + jobColumns

// CreateJob stores an open job of the company. Errors: jobboard.ErrNotFound
// when the company does not exist or the actor is not its member,
// jobboard.ErrSessionRevoked.
func (u *unit) CreateJob(ctx context.Context, actor jobboard.Actor, companyID int64, nj jobboard.NewJob) (jobboard.Job, error) {
	q, err := u.writer(ctx)
	if err != nil {
		return jobboard.Job{}, fmt.Errorf("create job in company %d: %w", companyID, err)
	}
	lo, hi, currency := salaryArgs(nj.Salary)
	rows, _ := q.Query(ctx, createJobSQL, companyID, actor.UserID, nj.Title, nj.Description,
		nj.Location, nj.Remote, nj.EmploymentType, lo, hi, currency, actor.PasswordChangedAt)
	j, err := pgx.CollectExactlyOneRow(rows, scanJob)
	if errors.Is(err, pgx.ErrNoRows) {
		err = refusal(ctx, q, actor, jobboard.ErrNotFound)
	}
	if err != nil {
		return jobboard.Job{}, fmt.Errorf("create job in company %d: %w", companyID, timeout(ctx, err))
	}
	return j, nil
}

// jobSQL returns an open job to anyone and a closed one only to a member of
// its company with a live session ($2 and $3 are NULL for an anonymous
// caller).
var jobSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE j.id = $1
  AND (j.status = 'open'
       OR EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = j.company_id AND m.user_id = $2)
          AND ` + liveSession("$2", "$3") + `)`

// openJobSQL returns an open job: what an anonymous caller may see. It is
// a statement of its own rather than jobSQL with a NULL actor: for a NULL,
// PostgreSQL's plan for the values drops the membership, so it stays
// cheaper than the generic plan, and the prepared jobSQL is planned again
// on every read instead of running its generic plan (0 generic plans in 20
// reads while company_members, a small table that autovacuum may never
// analyze, had no statistics).
const openJobSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE j.id = $1 AND j.status = 'open'`

// Job returns an open job, or a closed one to a member of its company. actor
// may be nil; a session that has ended is answered as to anyone. Errors:
// jobboard.ErrNotFound.
func (db *DB) Job(ctx context.Context, actor *jobboard.Actor, id int64) (jobboard.Job, error) {
	sql, args := jobSQL, []any{id, actorID(actor), sessionOf(actor)}
	if actor == nil {
		sql, args = openJobSQL, args[:1]
	}
	rows, _ := db.pool.Query(ctx, sql, args...)
	j, err := pgx.CollectExactlyOneRow(rows, scanJob)
	if err != nil {
		return jobboard.Job{}, fmt.Errorf("job %d: %w", id, notFound(timeout(ctx, err)))
	}
	return j, nil
}

// updateJobSetSQL is the UPDATE and SET of a patch: each field the patch
// sets ($3 to $12; NULL or $8 false: not set) replaces the one stored, the
// others stay, read under the row lock that the update takes, so
// concurrent patches do not overwrite each other's fields. It moves
// updated_at strictly forward, even for two updates in one microsecond or
// under a clock step back: it is the job's entity tag.
const updateJobSetSQL = `
UPDATE jobs AS j
SET title = coalesce($3, j.title), description = coalesce($4, j.description),
	location = coalesce($5, j.location), remote = coalesce($6, j.remote),
	employment_type = coalesce($7, j.employment_type),
	salary_min = CASE WHEN $8 THEN $9 ELSE j.salary_min END,
	salary_max = CASE WHEN $8 THEN $10 ELSE j.salary_max END,
	salary_currency = CASE WHEN $8 THEN $11 ELSE j.salary_currency END,
	status = coalesce($12, j.status),
	updated_at = greatest(now(), j.updated_at + interval '1 microsecond')`

// jobMemberSessionSQL is the condition that actor $2, with a live session
// ($13), is a member of job j's company.
var jobMemberSessionSQL = `EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = j.company_id AND m.user_id = $2)
  AND ` + liveSession("$2", "$13")

// updateJobSQL applies a patch (updateJobSetSQL) to a job of a company the
// actor ($2) is a member of, with a live session ($13), in one statement.
// A patch that closes the job runs updateJobClosingSQL instead
// (webhook_emit.go).
var updateJobSQL = updateJobSetSQL + `
WHERE j.id = $1 AND ` + jobMemberSessionSQL + `
RETURNING ` + jobColumns

// UpdateJob applies a patch to a job of a company the actor is a member
// of, in one statement: on its own, or in the unit's keyed write. The patch is judged before: the fields it leaves keep valid
// values (see jobboard.JobPatch.Validate). Errors: a
// *jobboard.ValidationError when the patch is invalid (nothing is written
// then), jobboard.ErrNotFound, jobboard.ErrSessionRevoked.
func (u *unit) UpdateJob(ctx context.Context, actor jobboard.Actor, id int64, p jobboard.JobPatch) (jobboard.Job, error) {
	p.Normalize()
	if err := p.Validate(); err != nil {
		return jobboard.Job{}, fmt.Errorf("update job %d: %w", id, err)
	}
	q, err := u.writer(ctx)
	if err != nil {
		return jobboard.Job{}, fmt.Errorf("update job %d: %w", id, err)
	}
	var employmentType, status *string
	if p.EmploymentType != nil {
		employmentType = (*string)(p.EmploymentType)
	}
	if p.Status != nil {
		status = (*string)(p.Status)
	}
	lo, hi, currency := salaryArgs(p.Salary)
	args := []any{id, actor.UserID, p.Title, p.Description, p.Location, p.Remote,
		employmentType, p.SetSalary, lo, hi, currency, status, actor.PasswordChangedAt}
	var (
		updated jobboard.Job
		emitted []string
	)
	if p.Status != nil && *p.Status == jobboard.JobClosed {
		// Closing an open job writes the job.closed webhook event too,
		// when an endpoint wants it (webhook_emit.go).
		var was string
		rows, _ := q.Query(ctx, updateJobClosingSQL, args...)
		updated, err = pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (jobboard.Job, error) {
			return scanJobWith(row, &was, &emitted)
		})
	} else {
		rows, _ := q.Query(ctx, updateJobSQL, args...)
		updated, err = pgx.CollectExactlyOneRow(rows, scanJob)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		err = refusal(ctx, q, actor, jobboard.ErrNotFound)
	}
	if err == nil {
		err = u.emitPayloads(emitted)
	}
	if err != nil {
		return jobboard.Job{}, fmt.Errorf("update job %d: %w", id, timeout(ctx, err))
	}
	return updated, nil
}

// The fragments SearchJobs assembles its WHERE clause from. Each is fixed
// text; %[1]d and %[2]d become the positions of its own parameters, so user
// input only ever travels as a parameter. Only the fragments in use are
// joined, so the planner sees exactly the conditions of this search, with
// status = 'open' literally, and can match the partial indexes:
// jobs_open_id_idx newest first for listings, jobs_open_location_idx and
// jobs_open_facets_idx for locations, jobs_open_salary_idx for a salary no
// job reaches, jobs_search_idx for text.
const (
	searchOpen = `j.status = 'open'`
	// searchQuery also refuses, inside the statement, a query that the
	// index cannot answer (querytree gives 'T' for one of only negated
	// words): the planner folds that condition to false and reads nothing,
	// where the query alone would be checked against every open job.
	searchQuery = `j.search @@ websearch_to_tsquery('english', $%[1]d)
  AND querytree(websearch_to_tsquery('english', $%[1]d)) <> 'T'`
	// searchQueryHidden is the text condition of searchWindowSQL: a check
	// of each job read, which no index can answer (IS TRUE is not an
	// indexable form), with the query hidden from the planner. It does not
	// refuse a query of only negated words (searchSearchableSQL does, in
	// searchHeaderSQL): the window bounds what such a query reads.
	searchQueryHidden = `(j.search @@ (SELECT websearch_to_tsquery('english', $%[1]d))) IS TRUE`
	// searchQueryUnseen is searchQuery with the query hidden from the
	// planner (see searchIndexSQL).
	searchQueryUnseen = `j.search @@ (SELECT websearch_to_tsquery('english', $%[1]d))
  AND querytree(websearch_to_tsquery('english', $%[1]d)) <> 'T'`
	// searchLocation is an exact match on the normalised location, which
	// jobs_open_location_idx answers in id order whether or not anything
	// matches.
	searchLocation       = `lower(j.location) = lower($%[1]d)`
	searchRemote         = `j.remote = $%[1]d`
	searchEmploymentType = `j.employment_type = $%[1]d`
	searchSalaryMin      = `j.salary_max >= $%[1]d`
	searchAfter          = `j.id < $%[1]d`
	// searchAfterChecked is the cursor as a check of each job read rather
	// than an index condition: jobs_search_idx holds the id too (btree_gin),
	// and the planner, which underrates that part of a GIN index, would
	// otherwise read there every id below the cursor, one index entry at a
	// time (28 ms for 3,000 ids under load, where the matches alone take
	// 1 ms).
	searchAfterChecked = `j.id + 0 < $%[1]d`
)

// searchCompany keeps one company's jobs: open ones, and closed ones too
// when the actor is a member with a live session (an uncorrelated EXISTS,
// evaluated once); one whose session has ended sees what anyone sees.
var searchCompany = `j.company_id = $%[1]d AND (j.status = 'open' OR EXISTS (
		SELECT 1 FROM company_members m WHERE m.company_id = $%[1]d AND m.user_id = $%[2]d)
	AND ` + liveSession("$%[2]d", "$%[3]d") + `)`

// A search is one round trip, and a text search that did not fill its
// page sometimes a second (searchIndexSQL).
//
// Most searches have no filter besides the words and the cursor. Their
// statements (searchListingSQL, searchWindowSQL, searchIndexSQL) are
// written so that no value of their parameters can change their plan: the
// words are hidden from the planner in a subquery (searchQueryHidden,
// searchQueryUnseen), the page size is part of the text rather than a
// parameter, and each leaves the planner one plan (see each). PostgreSQL's
// generic plan is then the plan it would make for the values, so such a
// statement runs in the pool's mode: prepared once per connection in
// pgx's default mode (cache_statement), where PostgreSQL soon keeps its
// generic plan and stops planning it, and sent unnamed in the modes that
// a connection proxy needs, where it is planned every time, cheaply. The
// page goes in one round trip right after searchHeaderSQL, which reads the
// job listing version (the search's entity tag is made from it) and
// whether the words can be searched at all; read first, the version is
// never newer than the page, so a page is never older than its tag.
//
// A search with filters (a location, remote, an employment type, a salary,
// a company) needs a plan made for its values: which index reads the
// fewest jobs depends on them (a salary that no job reaches is answered by
// jobs_open_salary_idx, a low one by walking the newest jobs). Its
// statement is searchPageSQL around searchListingSQL or searchWalkSQL, sent
// unnamed (QueryExecModeExec) in every mode, so that it is planned with
// the request's values.
//
// searchPageSQL answers the page (%[3]s) and, beside it in the same
// snapshot, the job listing version, whether the query can be searched at
// all (%[1]s; only when the page is empty does it matter) and whether the
// page is certainly complete (%[2]s). An empty page is one row of NULLs
// beside those columns. %[4]s is a WITH clause, for searchWalkSQL.
const searchPageSQL = `%[4]s
SELECT v.version, %[1]s AS searchable, %[2]s AS complete, ` + jobColumns + `
FROM job_listing_version v
LEFT JOIN LATERAL (%[3]s) j ON true
ORDER BY j.id DESC`

// searchHeaderSQL is the job listing version and whether the query can be
// searched at all (%s: searchSearchableSQL, or true for a search without
// words), read just before a page of a search without filters. The second
// is a subquery so that a plan for the values cannot fold it to a constant
// and look cheaper than the generic plan (which PostgreSQL would then never
// keep).
const searchHeaderSQL = `SELECT version, (SELECT %s) FROM job_listing_version`

// searchListingSQL is the page of a search without text: the planner's own
// plan, which every filter's index keeps bounded. Without filters that is
// the walk of jobs_open_id_idx, whatever the cursor.
const searchListingSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE %s
ORDER BY j.id DESC
LIMIT %d`

// A text search cannot leave the plan to PostgreSQL alone. The planner
// walks jobs_open_id_idx newest first, checking each job, whenever it
// expects the words to fill a page soon; but it cannot know how common a
// word is that its statistics do not list (it guesses 0.5 %), nor how
// rare a phrase or a negation makes common words. For a word no job has,
// 36 unknown words joined by "or", or "engineer -engineer" it walks and
// checks every open job (50 ms, 480 ms and 90 ms at 100,000 jobs). The
// two ways to answer cost in opposite directions: a walk costs the jobs it
// reads until the page is full (page size / density), the text index costs
// every match of the words (density × jobs) and a sort. So a text search
// first walks a bounded stretch of the newest jobs, which is the right plan
// for every word common enough to fill the page there, and what it finds
// there is the cheap fact that decides the rest: a page still short after
// the stretch means the words are rare, so the text index, which reads only
// their matches, answers the rest (searchIndexSQL).
//
// Without other filters, the stretch is the newest ids (searchWindowSQL):
// the planner's own walk of jobs_open_id_idx, with the text checked inside
// the scan (the fastest walk: 0.45 µs a job), that stops at the window's
// lowest id (%[2]s: below the cursor, or below the newest id the jobs'
// sequence gave, searchNewestSQL). The text condition is in a form no index
// answers (searchQueryHidden), so that the window's id range cannot be read
// in jobs_search_idx instead (see searchAfterChecked). A window of 150 ids
// per row of the page fills it for any word in 1 % of the jobs or more, in
// one statement, as PostgreSQL's own walk did. A query of many words, none
// joined by "or", skips the window and asks the text index in the first
// statement (see searchIndexFirst).
//
// With filters, their index decides which jobs come next, so the stretch
// is a number of the newest jobs that meet them (searchWalkSQL): a WITH
// query with its own LIMIT, which no condition is pushed into, so the walk
// stops there whatever the words. Such a stretch is often all the jobs
// that meet the filters (a location no job has, all filters combined):
// searchWalkCompleteSQL counts them, so that such a page is known to be
// complete without a second statement.
const (
	searchWindowSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE %[1]s AND j.id >= %[2]s
ORDER BY j.id DESC
LIMIT %[3]d`
	// searchNewestSQL is one more than the newest id, the top of the
	// first page's window: the last value of the jobs' id sequence, which
	// is not a read of jobs, so it costs the planner nothing (max(id) would
	// make it plan a second scan of jobs). An id the sequence gave to a
	// job not committed, or since deleted, only leaves the window fewer
	// jobs.
	searchNewestSQL = `(SELECT last_value + 1 FROM jobs_id_seq)`
	// searchWalkSQL is the stretch (a WITH clause, so that it is read once)
	// and the page from it; searchWalkCompleteSQL tells whether fewer jobs
	// than the stretch meet the filters, so that the walk read them all.
	searchWalkSQL = `
WITH walk AS MATERIALIZED (SELECT * FROM jobs j WHERE %[1]s ORDER BY j.id DESC LIMIT $%[2]d)`
	searchWalkPageSQL = `
SELECT ` + jobColumns + `
FROM walk j
WHERE %[1]s
ORDER BY j.id DESC
LIMIT %[2]d`
	searchWalkCompleteSQL = `(SELECT count(*) < $%d FROM walk)`
	// searchSearchableSQL tells whether the text index can answer the
	// query at all.
	searchSearchableSQL = `querytree(websearch_to_tsquery('english', $%d)) <> 'T'`
)

// searchIndexSQL answers the rest of a text search through the text
// index: the jobs below %[2]s (the stretch already walked) that meet the
// filters and the words (%[1]s). The stretch has just shown the words to
// be rare among the jobs that meet the filters, and more such jobs to
// exist than it read, so the text index, which reads only the matches of
// the words, is the plan. The statement leaves the planner no other: the
// filters are checks of the rows read (IS TRUE), which no index answers
// (their indexes would read every job that meets them: the planner has no
// statistics for lower(location), whose index is partial, and takes any
// location for 0.5 % of the jobs); the cursor and the bound are checks too
// (see searchAfterChecked); ORDER BY j.id + 0 cannot be had from
// jobs_open_id_idx, so no walk is left to choose; and the text condition
// hides the query from the planner in a subquery, so that it assumes the
// 0.5 % it assumes for any query it cannot see, rather than its own guess
// for these words, with which it could prefer to read every open job. A
// company's search keeps its company condition as is: the text index holds
// open jobs only, and jobs_company_idx reads only the company's jobs.
const searchIndexSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE %[1]s%[2]s
ORDER BY j.id + 0 DESC
LIMIT %[3]d`

// Stretches of the newest jobs that a text search checks one by one before
// it asks the text index, per row of the page: searchWindowPerRow ids when
// no filter is given (one word in 150 fills the page there), and
// searchWalkPerRow jobs that meet the filters.
const (
	searchWindowPerRow = 150
	searchWalkPerRow   = 20
)

// searchStretch returns the stretch (searchWindowPerRow or
// searchWalkPerRow ids or jobs per row) that a text search for query
// checks when it wants rows rows. Checking a job costs about one lexeme
// lookup per word, and a query of many words is either rare (an "and" or
// a phrase of them: the text index is its plan) or, joined by "or", common
// enough to fill a page early: beyond two words the stretch shrinks with
// the square of the words (36 words joined by "or" check 2 × rows jobs,
// the least, at 3.5 µs each).
func searchStretch(query string, perRow, rows int) int {
	words, _, _ := searchWords(query)
	return stretchFor(words, perRow, rows)
}

// stretchFor is searchStretch for a query of words words.
func stretchFor(words, perRow, rows int) int {
	stretch := perRow * rows
	if words > 2 {
		stretch = stretch * 4 / (words * words)
	}
	return max(stretch, 2*rows)
}

// searchIndexFirst reports whether a text search for query without
// filters asks the text index at once, in its first statement, rather
// than after a window of the newest ids. So it does when the query has so
// many different words (17 or 18, by the page size) that the window would
// be at its least, 2 × rows ids, and none is joined by "or": such a window
// fills the page only if half the newest jobs have every word, so it all
// but always costs a statement and a round trip of its own before the
// text index answers anyway (a 30-word phrase over 100,000 jobs, served
// in-process: 1.9–2.8 ms in two statements, 1.3–1.4 ms in one). What the
// index then reads is what the rest of the search would have read: the
// matches of the words. Words repeated count once, so that a common word
// said many times keeps its window.
func searchIndexFirst(query string, rows int) bool {
	_, distinct, or := searchWords(query)
	return !or && stretchFor(distinct, searchWindowPerRow, rows) <= 2*rows
}

// searchWords counts the words of query (runs of letters and digits, "or"
// left out), all of them and the different ones ignoring case, and tells
// whether "or" is one of them.
func searchWords(query string) (words, distinct int, or bool) {
	seen := make(map[string]bool)
	for _, w := range strings.FieldsFunc(query, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		w = strings.ToLower(w)
		if w == "or" {
			or = true
			continue
		}
		words++
		seen[w] = true
	}
	return words, len(seen), or
}

// searchBuilder collects fixed WHERE fragments and their parameters.
type searchBuilder struct {
	where []string
	args  []any
}

// fragment returns fragment with its %[1]d, %[2]d... replaced by the
// positions that args will have, and appends args.
func (b *searchBuilder) fragment(fragment string, args ...any) string {
	positions := make([]any, len(args))
	for i := range args {
		positions[i] = len(b.args) + i + 1
	}
	if len(positions) > 0 {
		fragment = fmt.Sprintf(fragment, positions...)
	}
	b.args = append(b.args, args...)
	return fragment
}

// add appends a condition whose %[1]d, %[2]d... stand for the given args.
func (b *searchBuilder) add(fragment string, args ...any) {
	b.where = append(b.where, b.fragment(fragment, args...))
}

// param appends one more parameter and returns its position.
func (b *searchBuilder) param(arg any) int {
	b.args = append(b.args, arg)
	return len(b.args)
}

// pageLimit clamps a requested page size to 1..MaxPageSize, defaulting to
// DefaultPageSize.
func pageLimit(limit int) int {
	switch {
	case limit <= 0:
		return jobboard.DefaultPageSize
	case limit > jobboard.MaxPageSize:
		return jobboard.MaxPageSize
	}
	return limit
}

// SearchJobs returns one page of jobs matching f, newest first, and the
// job listing version (see JobListingVersion) read before the page or in
// its snapshot, so that the page is never older than the version. Only
// open jobs are listed, except that a member of the company named by
// f.CompanyID also sees that company's closed jobs. actor may be nil.
//
// Filters: Query is full-text search over title and description in web
// search syntax (English stemming); it must have a word that is not negated
// (else jobboard.ErrUnsearchable). Location matches the whole location,
// ignoring case and surrounding space; Remote and EmploymentType match exactly;
// SalaryMin keeps jobs whose salary range reaches at least that amount (jobs
// without a salary are left out). The page size is f.Limit clamped to
// 1..MaxPageSize (DefaultPageSize when zero). Pagination is by keyset on id,
// so a page costs the same wherever it is and jobs created while paging do
// not shift the pages. Errors: jobboard.ErrUnsearchable,
// jobboard.ErrTimeout, and database errors.
func (db *DB) SearchJobs(ctx context.Context, actor *jobboard.Actor, f jobboard.JobFilter) (jobboard.JobListing, error) {
	return db.searchJobs(ctx, actor, f, searchTuning{})
}

// searchTuning changes how SearchJobs goes about a search, for its tests;
// the zero value is SearchJobs'.
type searchTuning struct {
	// walk, when not zero, replaces the stretch that text searches check
	// one by one (see searchStretch), so that tests reach the text index
	// part on a few jobs.
	walk int
	// trace, when set, is told every statement that reads jobs, and
	// whether it runs in the pool's mode (fixedPlan, see searchPageSQL),
	// so that tests can explain them.
	trace func(sql string, args []any, fixedPlan bool)
}

func (t searchTuning) traced(sql string, args []any, fixedPlan bool) {
	if t.trace != nil {
		t.trace(sql, args, fixedPlan)
	}
}

// searchJobs is SearchJobs, tuned.
func (db *DB) searchJobs(ctx context.Context, actor *jobboard.Actor, f jobboard.JobFilter, tuning searchTuning) (jobboard.JobListing, error) {
	limit := pageLimit(f.Limit)
	// One row more than the page tells whether another page follows.
	s := db.search(actor, f, limit+1, tuning.walk)
	var (
		listing    jobboard.JobListing
		found      []jobboard.Job
		searchable bool
		complete   = s.complete
		err        error
	)
	tuning.traced(s.page, s.args, s.fixedPlan)
	if s.fixedPlan {
		found, err = db.searchFixed(ctx, s, &listing.Version, &searchable)
	} else {
		found, err = db.searchPlanned(ctx, s, &listing.Version, &searchable, &complete)
	}
	if err != nil {
		return jobboard.JobListing{}, fmt.Errorf("search jobs: %w", timeout(ctx, err))
	}
	if s.text && !searchable {
		return jobboard.JobListing{}, fmt.Errorf("search jobs for %q: %w", f.Query, jobboard.ErrUnsearchable)
	}
	if s.text && len(found) < limit+1 && !complete {
		// The stretch did not fill the page: the indexes answer the rest,
		// below the stretch (or below the last job found in it).
		below := s.below
		if len(found) > 0 && (below == nil || found[len(found)-1].ID < *below) {
			below = &found[len(found)-1].ID
		}
		sql, args := db.searchRest(actor, f, below, limit+1-len(found))
		tuning.traced(sql, args, s.fixedPlan)
		if !s.fixedPlan { // planned with the values, as the first statement
			args = append([]any{pgx.QueryExecModeExec}, args...)
		}
		rows, _ := db.pool.Query(ctx, sql, args...)
		rest, err := pgx.CollectRows(rows, scanJob)
		if err != nil {
			return jobboard.JobListing{}, fmt.Errorf("search jobs: %w", timeout(ctx, err))
		}
		found = append(found, rest...)
	}
	listing.Page = pageOf(found, limit, func(j jobboard.Job) int64 { return j.ID })
	return listing, nil
}

// searchFixed runs a search whose page statement has one plan for all
// values (see searchPageSQL) in the pool's mode: searchHeaderSQL, then the
// page, in one round trip. It sets version and searchable from the header.
func (db *DB) searchFixed(ctx context.Context, s search, version *int64, searchable *bool) ([]jobboard.Job, error) {
	var found []jobboard.Job
	b := &pgx.Batch{}
	b.Queue(s.header, s.headerArgs...).QueryRow(func(row pgx.Row) error {
		return row.Scan(version, searchable)
	})
	b.Queue(s.page, s.args...).Query(func(rows pgx.Rows) error {
		var err error
		found, err = pgx.CollectRows(rows, scanJob)
		return err
	})
	return found, db.pool.SendBatch(ctx, b).Close()
}

// searchPlanned runs a search with filters: searchPageSQL sent unnamed
// (QueryExecModeExec), so that PostgreSQL plans it with this request's
// values every time. A named prepared statement (pgx's default) may be
// moved to a generic plan by the plan cache, and a generic plan cannot
// know how selective the filters are: for a salary that no job reaches it
// walks every open job. It sets version and searchable from the columns
// beside the page, and complete.
func (db *DB) searchPlanned(ctx context.Context, s search, version *int64, searchable, complete *bool) ([]jobboard.Job, error) {
	rows, _ := db.pool.Query(ctx, s.page, append([]any{pgx.QueryExecModeExec}, s.args...)...)
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*jobboard.Job, error) {
		return scanListedJob(row, version, searchable, complete)
	})
	found := make([]jobboard.Job, 0, len(jobs))
	for _, j := range jobs {
		if j != nil {
			found = append(found, *j)
		}
	}
	return found, err
}

// scanListedJob reads a row of searchPageSQL: the columns beside the page
// into version, searchable and complete, and the job, or nil for the row
// of NULLs of an empty page.
func scanListedJob(row pgx.CollectableRow, version *int64, searchable, complete *bool) (*jobboard.Job, error) {
	var (
		id       *int64
		j        jobboard.Job
		lo, hi   *int64
		currency *string
		// The other columns of a row of NULLs.
		companyID                    *int64
		title, description, location *string
		remote                       *bool
		employmentType, status       *string
		createdAt, updatedAt         *time.Time
	)
	err := row.Scan(version, searchable, complete, &id, &companyID, &title, &description, &location,
		&remote, &employmentType, &lo, &hi, &currency, &status, &createdAt, &updatedAt)
	if err != nil || id == nil {
		return nil, err
	}
	j = jobboard.Job{ID: *id, CompanyID: *companyID, Title: *title, Description: *description,
		Location: *location, Remote: *remote, EmploymentType: jobboard.EmploymentType(*employmentType),
		Status: jobboard.JobStatus(*status), CreatedAt: *createdAt, UpdatedAt: *updatedAt}
	if lo != nil && hi != nil && currency != nil {
		j.Salary = &jobboard.Salary{Min: *lo, Max: *hi, Currency: *currency}
	}
	return &j, nil
}

// search is the first statement of a search and its arguments.
type search struct {
	page string
	args []any
	// text tells a text search, which may need searchRest.
	text bool
	// fixedPlan tells a page statement whose plan no value changes, run
	// after header (with headerArgs) in the pool's mode (searchFixed);
	// otherwise page is searchPageSQL (searchPlanned).
	fixedPlan  bool
	header     string
	headerArgs []any
	// complete tells a page of a fixed plan that is certainly complete (a
	// text search then asks the indexes for no rest), and below the lowest
	// id of the stretch it walked, when known. searchPageSQL tells its own.
	complete bool
	below    *int64
}

// filtered reports whether f has a filter other than the words and the
// cursor.
func filtered(f jobboard.JobFilter) bool {
	return f.CompanyID != nil || strings.TrimSpace(f.Location) != "" || f.Remote != nil ||
		f.EmploymentType != "" || f.SalaryMin != nil
}

// conditions adds the WHERE conditions of f other than the text to b. In
// the rest of a text search (rest true) the cursor and the filters become
// checks of the rows read, never index conditions (see searchIndexSQL).
func conditions(b *searchBuilder, actor *jobboard.Actor, f jobboard.JobFilter, rest bool) {
	add := func(fragment string, args ...any) {
		if rest {
			fragment = "(" + fragment + ") IS TRUE"
		}
		b.add(fragment, args...)
	}
	if f.CompanyID != nil {
		b.add(searchCompany, *f.CompanyID, actorID(actor), sessionOf(actor))
	} else {
		b.add(searchOpen)
	}
	if loc := strings.TrimSpace(f.Location); loc != "" {
		add(searchLocation, loc)
	}
	if f.Remote != nil {
		add(searchRemote, *f.Remote)
	}
	if f.EmploymentType != "" {
		add(searchEmploymentType, string(f.EmploymentType))
	}
	if f.SalaryMin != nil {
		add(searchSalaryMin, *f.SalaryMin)
	}
	if f.After > 0 {
		if rest {
			b.add(searchAfterChecked, f.After)
		} else {
			b.add(searchAfter, f.After)
		}
	}
}

// search returns the first statement of SearchJobs for a page of rows
// rows: without filters searchListingSQL, searchWindowSQL or
// searchIndexSQL, after searchHeaderSQL; with filters searchPageSQL
// around searchListingSQL or searchWalkSQL.
func (db *DB) search(actor *jobboard.Actor, f jobboard.JobFilter, rows, walk int) search {
	q := strings.TrimSpace(f.Query)
	if filtered(f) {
		return db.searchWithFilters(actor, f, q, rows, walk)
	}
	s := search{fixedPlan: true, text: q != "", header: fmt.Sprintf(searchHeaderSQL, "true")}
	if q != "" {
		s.header, s.headerArgs = fmt.Sprintf(searchHeaderSQL, fmt.Sprintf(searchSearchableSQL, 1)), []any{q}
	}
	var b searchBuilder
	if q == "" {
		conditions(&b, actor, f, false)
		s.page, s.args = fmt.Sprintf(searchListingSQL, strings.Join(b.where, "\n  AND "), rows), b.args
		return s
	}
	window := walk
	if window == 0 {
		if searchIndexFirst(q, rows) {
			s.page, s.args = db.searchRest(actor, f, nil, rows)
			s.complete = true
			return s
		}
		window = searchStretch(q, searchWindowPerRow, rows)
	}
	text := b.fragment(searchQueryHidden, q)
	conditions(&b, actor, f, false)
	var lowest string
	if f.After > 0 {
		// The window's lowest id is known here: the second statement, if
		// any, looks below it, and none is needed when it is the first id.
		low := f.After - int64(window)
		lowest, s.below, s.complete = fmt.Sprintf("$%d", b.param(low)), &low, low <= 1
	} else {
		lowest = fmt.Sprintf("%s - $%d", searchNewestSQL, b.param(window))
	}
	s.page = fmt.Sprintf(searchWindowSQL, strings.Join(append([]string{text}, b.where...), "\n  AND "), lowest, rows)
	s.args = b.args
	return s
}

// searchWithFilters returns searchPageSQL around the page of a search
// with filters: searchListingSQL without words, searchWalkSQL with them.
func (db *DB) searchWithFilters(actor *jobboard.Actor, f jobboard.JobFilter, q string, rows, walk int) search {
	var b searchBuilder
	if q == "" {
		conditions(&b, actor, f, false)
		listing := fmt.Sprintf(searchListingSQL, strings.Join(b.where, "\n  AND "), rows)
		return search{page: fmt.Sprintf(searchPageSQL, "true", "true", listing, ""), args: b.args}
	}
	text := b.fragment(searchQuery, q)
	conditions(&b, actor, f, false)
	if walk == 0 {
		walk = searchStretch(q, searchWalkPerRow, rows)
	}
	walkParam := b.param(walk)
	page := fmt.Sprintf(searchWalkPageSQL, text, rows)
	complete := fmt.Sprintf(searchWalkCompleteSQL, walkParam)
	searchable := fmt.Sprintf(searchSearchableSQL, 1) // q is the first parameter
	with := fmt.Sprintf(searchWalkSQL, strings.Join(b.where, "\n  AND "), walkParam)
	return search{page: fmt.Sprintf(searchPageSQL, searchable, complete, page, with), args: b.args, text: true}
}

// searchRest returns searchIndexSQL for the rows rows of a text search
// that come below the id below (nil: no bound) and its arguments.
func (db *DB) searchRest(actor *jobboard.Actor, f jobboard.JobFilter, below *int64, rows int) (string, []any) {
	var b searchBuilder
	text := b.fragment(searchQueryUnseen, strings.TrimSpace(f.Query))
	conditions(&b, actor, f, true)
	where := strings.Join(append(b.where, text), "\n  AND ")
	bound := ""
	if below != nil {
		bound = fmt.Sprintf("\n  AND j.id + 0 < $%d", b.param(*below))
	}
	return fmt.Sprintf(searchIndexSQL, where, bound, rows), b.args
}

// pageOf cuts rows (fetched with one extra row) to a page of limit items and
// sets the cursor when more rows exist.
func pageOf[T any](rows []T, limit int, id func(T) int64) jobboard.Page[T] {
	page := jobboard.Page[T]{Items: rows}
	if page.Items == nil {
		page.Items = []T{}
	}
	if len(rows) > limit {
		page.Items = rows[:limit]
		page.NextAfter = id(page.Items[limit-1])
	}
	return page
}
