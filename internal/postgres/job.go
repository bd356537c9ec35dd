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
func (db *DB) CreateJob(ctx context.Context, actor jobboard.Actor, companyID int64, nj jobboard.NewJob) (jobboard.Job, error) {
	q, err := db.writer(ctx)
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

// Job returns an open job, or a closed one to a member of its company. actor
// may be nil; a session that has ended is answered as to anyone. Errors:
// jobboard.ErrNotFound.
func (db *DB) Job(ctx context.Context, actor *jobboard.Actor, id int64) (jobboard.Job, error) {
	rows, _ := db.pool.Query(ctx, jobSQL, id, actorID(actor), sessionOf(actor))
	j, err := pgx.CollectExactlyOneRow(rows, scanJob)
	if err != nil {
		return jobboard.Job{}, fmt.Errorf("job %d: %w", id, notFound(timeout(ctx, err)))
	}
	return j, nil
}

var jobForUpdateSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE j.id = $1
  AND EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = j.company_id AND m.user_id = $2)
  AND ` + liveSession("$2", "$3") + `
FOR UPDATE OF j`

// updateJobSQL moves updated_at strictly forward, even for two updates in
// one microsecond or under a clock step back: it is the job's entity tag.
const updateJobSQL = `
UPDATE jobs AS j
SET title = $2, description = $3, location = $4, remote = $5, employment_type = $6,
	salary_min = $7, salary_max = $8, salary_currency = $9, status = $10,
	updated_at = greatest(now(), j.updated_at + interval '1 microsecond')
WHERE j.id = $1
RETURNING ` + jobColumns

// UpdateJob applies a patch to a job of a company the actor is a member of,
// holding the row lock from read to write so concurrent patches do not
// overwrite each other's fields. Errors: jobboard.ErrNotFound, and a
// *jobboard.ValidationError when the patched job is invalid (nothing is
// written then), jobboard.ErrSessionRevoked.
func (db *DB) UpdateJob(ctx context.Context, actor jobboard.Actor, id int64, p jobboard.JobPatch) (jobboard.Job, error) {
	var (
		updated jobboard.Job
		emitted []string
	)
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, jobForUpdateSQL, id, actor.UserID, actor.PasswordChangedAt)
		current, err := pgx.CollectExactlyOneRow(rows, scanJob)
		if errors.Is(err, pgx.ErrNoRows) {
			return refusal(ctx, tx, actor, jobboard.ErrNotFound)
		}
		if err != nil {
			return err
		}
		next, err := p.Apply(current)
		if err != nil {
			return err
		}
		lo, hi, currency := salaryArgs(next.Salary)
		// The update writes the job.closed webhook event too when it closes
		// the job and an endpoint wants it (webhook_emit.go).
		closing := current.Status == jobboard.JobOpen && next.Status == jobboard.JobClosed
		rows, _ = tx.Query(ctx, updateJobEmittingSQL, id, next.Title, next.Description, next.Location,
			next.Remote, next.EmploymentType, lo, hi, currency, next.Status, closing)
		updated, err = pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (jobboard.Job, error) {
			return scanJobWith(row, &emitted)
		})
		return err
	})
	if err == nil {
		err = noteEmitted(ctx, emitted)
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
	// searchQueryChecked is searchQuery as a check of each job read, which
	// no index can answer (IS TRUE is not an indexable form): see
	// searchWindowSQL.
	searchQueryChecked = `(j.search @@ websearch_to_tsquery('english', $%[1]d)
  AND querytree(websearch_to_tsquery('english', $%[1]d)) <> 'T') IS TRUE`
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

// Every search is one statement, searchPageSQL, and a text search that did
// not fill its page sometimes a second, searchIndexSQL.
//
// searchPageSQL answers the page (%[4]s, one of the statements below) and,
// beside it in the same snapshot, the job listing version (the search's
// entity tag is made from it, so it costs no round trip of its own),
// whether the query can be searched at all (%[1]s; only when the page is
// empty does it matter), whether the page is certainly complete (%[2]s)
// and below which id a second statement must look (%[3]s). An empty page
// is one row of NULLs beside those columns. %[5]s is a WITH clause and
// %[6]s a row joined beside the version (searchWindowLowestSQL), for the
// statements below that need them.
const searchPageSQL = `%[5]s
SELECT v.version, %[1]s AS searchable, %[2]s AS complete, %[3]s::bigint AS below, ` + jobColumns + `
FROM job_listing_version v%[6]s
LEFT JOIN LATERAL (%[4]s) j ON true
ORDER BY j.id DESC`

// searchListingSQL is the page of a search without text: the planner's own
// plan, which every filter's index keeps bounded.
const searchListingSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE %s
ORDER BY j.id DESC
LIMIT $%d`

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
// lowest id (%[2]s, below the cursor or the newest id). The text condition
// is in a form no index answers (searchQueryChecked), so that the window's
// id range cannot be read in jobs_search_idx instead (see
// searchAfterChecked). A window of 150 ids per row of the page fills it for
// any word in 1 % of the jobs or more, in one statement, as PostgreSQL's
// own walk did. A query of many words, none joined by "or", skips the
// window and asks the text index in the first statement (see
// searchIndexFirst).
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
LIMIT $%[3]d`
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
LIMIT $%[2]d`
	searchWalkCompleteSQL = `(SELECT count(*) < $%d FROM walk)`
	// searchSearchableSQL tells whether the text index can answer the
	// query at all.
	searchSearchableSQL = `querytree(websearch_to_tsquery('english', $%d)) <> 'T'`
	// searchWindowLowestSQL is the window's lowest id (its top %s, less
	// the window), as the one row w; 1 or less: the window holds every id.
	// OFFSET 0 keeps it a row of its own, computed once, rather than an
	// expression copied into every place that names it.
	searchWindowLowestSQL = `
CROSS JOIN (SELECT %s - $%d::bigint AS lowest OFFSET 0) w`
	// searchNewestSQL is the newest id, the top of the first page's window.
	searchNewestSQL = `(SELECT coalesce(max(id), 0) + 1 FROM jobs)`
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
LIMIT $%[3]d`

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
// job listing version (see JobListingVersion) of the snapshot it was read
// in. Only open jobs are listed, except that a member of the company named
// by f.CompanyID also sees that company's closed jobs. actor may be nil.
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
	limit := pageLimit(f.Limit)
	// One row more than the page tells whether another page follows.
	s := db.search(actor, f, limit+1)

	// QueryExecModeExec sends the statement unnamed, so PostgreSQL plans it
	// with this request's values every time. A named prepared statement
	// (pgx's default) may be moved to a generic plan by the plan cache, and a
	// generic plan cannot know how common the searched words are or how
	// selective the filters: forced generic at 100k jobs, the first page for
	// a common word reads all 34k matches through the GIN index and sorts
	// them (130 ms), where the planned-per-value query walks jobs_open_id_idx
	// and stops after one page (0.6 ms). Planning each search costs about
	// 0.2 ms.
	db.traceSearch(s.page, s.args)
	rows, _ := db.pool.Query(ctx, s.page, append([]any{pgx.QueryExecModeExec}, s.args...)...)
	var (
		listing    jobboard.JobListing
		searchable bool
		complete   bool
		below      *int64
	)
	jobs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*jobboard.Job, error) {
		j, err := scanListedJob(row, &listing.Version, &searchable, &complete, &below)
		return j, err
	})
	if err != nil {
		return jobboard.JobListing{}, fmt.Errorf("search jobs: %w", timeout(ctx, err))
	}
	found := make([]jobboard.Job, 0, len(jobs))
	for _, j := range jobs {
		if j != nil {
			found = append(found, *j)
		}
	}
	if s.text && len(found) < limit+1 && !complete {
		// The stretch did not fill the page: the indexes answer the rest,
		// below the stretch (or below the last job found in it).
		if len(found) > 0 && (below == nil || found[len(found)-1].ID < *below) {
			below = &found[len(found)-1].ID
		}
		sql, args := db.searchRest(actor, f, below, limit+1-len(found))
		db.traceSearch(sql, args)
		rows, _ := db.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, args...)...)
		rest, err := pgx.CollectRows(rows, scanJob)
		if err != nil {
			return jobboard.JobListing{}, fmt.Errorf("search jobs: %w", timeout(ctx, err))
		}
		found = append(found, rest...)
	}
	if len(found) == 0 && s.text && !searchable {
		return jobboard.JobListing{}, fmt.Errorf("search jobs for %q: %w", f.Query, jobboard.ErrUnsearchable)
	}
	listing.Page = pageOf(found, limit, func(j jobboard.Job) int64 { return j.ID })
	return listing, nil
}

func (db *DB) traceSearch(sql string, args []any) {
	if db.searchTrace != nil {
		db.searchTrace(sql, args)
	}
}

// scanListedJob reads a row of searchPageSQL: the columns beside the page
// into version, searchable, complete and below, and the job, or nil for the
// row of NULLs of an empty page.
func scanListedJob(row pgx.CollectableRow, version *int64, searchable, complete *bool, below **int64) (*jobboard.Job, error) {
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
	err := row.Scan(version, searchable, complete, below, &id, &companyID, &title, &description, &location,
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
}

// conditions adds the WHERE conditions of f other than the text to b. In
// the rest of a text search (rest true) the cursor and the filters become
// checks of the rows read, never index conditions (see searchIndexSQL). It
// reports whether f has a filter other than the cursor.
func conditions(b *searchBuilder, actor *jobboard.Actor, f jobboard.JobFilter, rest bool) (filtered bool) {
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
	filtered = len(b.where) > 1 || f.CompanyID != nil
	if f.After > 0 {
		if rest {
			b.add(searchAfterChecked, f.After)
		} else {
			b.add(searchAfter, f.After)
		}
	}
	return filtered
}

// search returns the first statement of SearchJobs for a page of rows
// rows: searchPageSQL around searchListingSQL, searchWindowSQL or
// searchWalkSQL.
func (db *DB) search(actor *jobboard.Actor, f jobboard.JobFilter, rows int) search {
	var b searchBuilder
	q := strings.TrimSpace(f.Query)
	var text, checked string
	if q != "" {
		text = b.fragment(searchQuery, q)
		checked = fmt.Sprintf(searchQueryChecked, len(b.args))
	}
	filtered := conditions(&b, actor, f, false)
	where := strings.Join(b.where, "\n  AND ")
	if q == "" {
		return search{page: fmt.Sprintf(searchPageSQL, "true", "true", "NULL",
			fmt.Sprintf(searchListingSQL, where, b.param(rows)), "", ""), args: b.args}
	}
	searchable := fmt.Sprintf(searchSearchableSQL, 1) // q is the first parameter
	if filtered {
		walk := db.searchWalk
		if walk == 0 {
			walk = searchStretch(q, searchWalkPerRow, rows)
		}
		walkParam := b.param(walk)
		page := fmt.Sprintf(searchWalkPageSQL, text, b.param(rows))
		complete := fmt.Sprintf(searchWalkCompleteSQL, walkParam)
		return search{page: fmt.Sprintf(searchPageSQL, searchable, complete, "NULL", page,
			fmt.Sprintf(searchWalkSQL, where, walkParam), ""), args: b.args, text: true}
	}
	window := db.searchWalk
	if window == 0 {
		if searchIndexFirst(q, rows) {
			page, args := db.searchRest(actor, f, nil, rows) // q is $1 there too
			return search{page: fmt.Sprintf(searchPageSQL, searchable, "true", "NULL", page, "", ""), args: args, text: true}
		}
		window = searchStretch(q, searchWindowPerRow, rows)
	}
	top := searchNewestSQL
	if f.After > 0 {
		top = fmt.Sprintf("$%d::bigint", b.param(f.After))
	}
	lowest := fmt.Sprintf(searchWindowLowestSQL, top, b.param(window))
	page := fmt.Sprintf(searchWindowSQL, strings.Join(append([]string{checked}, b.where...), "\n  AND "), "w.lowest", b.param(rows))
	return search{page: fmt.Sprintf(searchPageSQL, searchable, "w.lowest <= 1", "w.lowest", page, "", lowest), args: b.args, text: true}
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
	return fmt.Sprintf(searchIndexSQL, where, bound, b.param(rows)), b.args
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
