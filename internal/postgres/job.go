package postgres

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.JobStore = (*DB)(nil)

// jobColumns is the column list that scanJob reads, in order.
const jobColumns = `j.id, j.company_id, j.title, j.description, j.location, j.remote,
	j.employment_type, j.salary_min, j.salary_max, j.salary_currency, j.status,
	j.created_at, j.updated_at`

func scanJob(row pgx.CollectableRow) (jobboard.Job, error) {
	var (
		j        jobboard.Job
		lo, hi   *int64
		currency *string
	)
	err := row.Scan(&j.ID, &j.CompanyID, &j.Title, &j.Description, &j.Location, &j.Remote,
		&j.EmploymentType, &lo, &hi, &currency, &j.Status, &j.CreatedAt, &j.UpdatedAt)
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
// so the authorisation and the write are one statement.
const createJobSQL = `
INSERT INTO jobs AS j (company_id, title, description, location, remote,
	employment_type, salary_min, salary_max, salary_currency)
SELECT $1, $3, $4, $5, $6, $7, $8, $9, $10
WHERE EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = $1 AND m.user_id = $2)
RETURNING ` + jobColumns

// CreateJob stores an open job of the company. Errors: jobboard.ErrNotFound
// when the company does not exist or the actor is not its member.
func (db *DB) CreateJob(ctx context.Context, actor jobboard.Actor, companyID int64, nj jobboard.NewJob) (jobboard.Job, error) {
	q, err := db.writer(ctx)
	if err != nil {
		return jobboard.Job{}, fmt.Errorf("create job in company %d: %w", companyID, err)
	}
	lo, hi, currency := salaryArgs(nj.Salary)
	rows, _ := q.Query(ctx, createJobSQL, companyID, actor.UserID, nj.Title, nj.Description,
		nj.Location, nj.Remote, nj.EmploymentType, lo, hi, currency)
	j, err := pgx.CollectExactlyOneRow(rows, scanJob)
	if err != nil {
		return jobboard.Job{}, fmt.Errorf("create job in company %d: %w", companyID, notFound(timeout(ctx, err)))
	}
	return j, nil
}

// jobSQL returns an open job to anyone and a closed one only to a member of
// its company ($2 is NULL for an anonymous caller).
const jobSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE j.id = $1
  AND (j.status = 'open'
       OR EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = j.company_id AND m.user_id = $2))`

// Job returns an open job, or a closed one to a member of its company. actor
// may be nil. Errors: jobboard.ErrNotFound.
func (db *DB) Job(ctx context.Context, actor *jobboard.Actor, id int64) (jobboard.Job, error) {
	rows, _ := db.pool.Query(ctx, jobSQL, id, actorID(actor))
	j, err := pgx.CollectExactlyOneRow(rows, scanJob)
	if err != nil {
		return jobboard.Job{}, fmt.Errorf("job %d: %w", id, notFound(timeout(ctx, err)))
	}
	return j, nil
}

const jobForUpdateSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE j.id = $1
  AND EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = j.company_id AND m.user_id = $2)
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
// written then).
func (db *DB) UpdateJob(ctx context.Context, actor jobboard.Actor, id int64, p jobboard.JobPatch) (jobboard.Job, error) {
	var updated jobboard.Job
	err := db.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, jobForUpdateSQL, id, actor.UserID)
		current, err := pgx.CollectExactlyOneRow(rows, scanJob)
		if err != nil {
			return notFound(err)
		}
		next, err := p.Apply(current)
		if err != nil {
			return err
		}
		lo, hi, currency := salaryArgs(next.Salary)
		rows, _ = tx.Query(ctx, updateJobSQL, id, next.Title, next.Description, next.Location,
			next.Remote, next.EmploymentType, lo, hi, currency, next.Status)
		updated, err = pgx.CollectExactlyOneRow(rows, scanJob)
		return err
	})
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
	searchJobsSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE %s
ORDER BY j.id DESC
LIMIT $%d`
	searchOpen = `j.status = 'open'`
	// searchCompany keeps one company's jobs: open ones, and closed ones too
	// when the actor is a member (an uncorrelated EXISTS, evaluated once).
	searchCompany = `j.company_id = $%[1]d AND (j.status = 'open' OR EXISTS (
		SELECT 1 FROM company_members m WHERE m.company_id = $%[1]d AND m.user_id = $%[2]d))`
	// searchQuery also refuses, inside the statement, a query that the
	// index cannot answer (querytree gives 'T' for one of only negated
	// words): the planner folds that condition to false and reads nothing,
	// where the query alone would be checked against every open job.
	searchQuery = `j.search @@ websearch_to_tsquery('english', $%[1]d)
  AND querytree(websearch_to_tsquery('english', $%[1]d)) <> 'T'`
	// searchQueryUnseen is searchQuery with the query hidden from the
	// planner (see searchTextJobsSQL).
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
)

// A text search runs searchWalkSQL, and searchIndexSQL only when that does
// not fill the page, so that no plan reads every open job one by one. The
// planner alone walks jobs_open_id_idx newest first, checking each job,
// whenever it expects the words to be common enough to fill a page soon;
// but it cannot know how common a word is that its statistics do not list.
// It guesses 0.5 %, so for a word no job has, or 36 of them joined by "or"
// (a guessed 16 %), it walks and checks every open job (90 ms and 480 ms
// at 100,000 jobs).
//
// searchWalkSQL walks only the newest jobs that meet the other conditions
// (%[1]s), at most $%[3]d of them, checking the text condition (%[2]s):
// the walk is a subquery with its own LIMIT, which no condition is pushed
// into, so it stops there whatever the words. It fills the page for the
// common words (one job in 48 or more fills a page of 20 from 1,008 jobs),
// with the walk the planner would have chosen.
//
// searchIndexSQL answers the whole search again through the indexes, but
// only if more jobs than the walk's meet the other conditions (else the
// walk has seen them all, and its answer is complete): the words have just
// proved rare among those jobs, so the text index is the one to ask. Its
// text condition (%[2]s here) hides the query from the planner in a
// subquery, so that it assumes the 0.5 % it assumes for any query it cannot
// see, rather than its own guess for these words, with which it could
// prefer to read every open job through another index. ORDER BY j.id + 0
// cannot be had from jobs_open_id_idx, so no walk is left to choose: only
// the matches are read, and sorted. It answers alone, so the two
// statements need not see the same jobs.
const (
	searchWalkSQL = `
SELECT ` + jobColumns + `
FROM (SELECT * FROM jobs j WHERE %[1]s ORDER BY j.id DESC LIMIT $%[3]d) j
WHERE %[2]s
ORDER BY j.id DESC
LIMIT $%[4]d`
	searchIndexSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE %[1]s
  AND %[2]s
  AND EXISTS (SELECT FROM jobs j WHERE %[1]s ORDER BY j.id DESC OFFSET $%[3]d LIMIT 1)
ORDER BY j.id + 0 DESC
LIMIT $%[4]d`
)

// searchWalkPerPageRow is how many of the newest jobs a text search checks
// one by one per row it wants, before it asks the text index: a query that
// matches at least one job in 48 fills its page from them.
const searchWalkPerPageRow = 48

// searchWalk returns how many of the newest jobs a text search for query
// checks one by one when it wants rows rows. Checking a job against a query
// costs about one lexeme lookup per word (36 words joined by "or" cost 3.5
// µs a job, one word 0.2 µs), so beyond two words the walk shrinks in
// proportion, keeping its cost that of a two-word walk; it never goes below
// two pages.
func searchWalk(query string, rows int) int {
	words := 0
	for _, w := range strings.FieldsFunc(query, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if !strings.EqualFold(w, "or") {
			words++
		}
	}
	walk := searchWalkPerPageRow * rows
	if words > 2 {
		walk = walk * 2 / words
	}
	return max(walk, 2*rows)
}

// searchableSQL tells whether the search index can answer a query.
const searchableSQL = `SELECT querytree(websearch_to_tsquery('english', $1)) <> 'T'`

// searchBuilder collects fixed WHERE fragments and their parameters: the
// text condition apart from the others.
type searchBuilder struct {
	where []string
	// text and textUnseen are the text condition, as searchQuery and as
	// searchQueryUnseen.
	text, textUnseen string
	args             []any
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

// statements returns the statements of the search for rows rows: for a
// search without text its one statement, for a text search searchWalkSQL
// with a walk of walk jobs and searchIndexSQL.
func (b *searchBuilder) statements(rows, walk int) (first, byIndex string) {
	where := strings.Join(b.where, "\n  AND ")
	if b.text == "" {
		return fmt.Sprintf(searchJobsSQL, where, b.param(rows)), ""
	}
	walkParam, rowsParam := b.param(walk), b.param(rows)
	return fmt.Sprintf(searchWalkSQL, where, b.text, walkParam, rowsParam),
		fmt.Sprintf(searchIndexSQL, where, b.textUnseen, walkParam, rowsParam)
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

// SearchJobs returns one page of jobs matching f, newest first. Only open
// jobs are listed, except that a member of the company named by f.CompanyID
// also sees that company's closed jobs. actor may be nil.
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
func (db *DB) SearchJobs(ctx context.Context, actor *jobboard.Actor, f jobboard.JobFilter) (jobboard.Page[jobboard.Job], error) {
	limit := pageLimit(f.Limit)
	q := strings.TrimSpace(f.Query)
	first, byIndex, args := db.searchStatements(actor, f, limit)

	// QueryExecModeExec sends the statement unnamed, so PostgreSQL plans it
	// with this request's values every time. A named prepared statement
	// (pgx's default) may be moved to a generic plan by the plan cache, and a
	// generic plan cannot know how common the searched words are or how
	// selective the filters: forced generic at 100k jobs, the first page for
	// a common word reads all 34k matches through the GIN index and sorts
	// them (130 ms), where the planned-per-value query walks jobs_open_id_idx
	// and stops after one page (0.6 ms). Planning each search costs about
	// 0.2 ms.
	args = append([]any{pgx.QueryExecModeExec}, args...)
	rows, _ := db.pool.Query(ctx, first, args...)
	jobs, err := pgx.CollectRows(rows, scanJob)
	if err == nil && byIndex != "" && len(jobs) <= limit {
		// The walk did not fill the page: the indexes answer, unless the
		// walk saw every job (then byIndex returns nothing).
		rows, _ := db.pool.Query(ctx, byIndex, args...)
		var found []jobboard.Job
		if found, err = pgx.CollectRows(rows, scanJob); len(found) > 0 {
			jobs = found
		}
	}
	if err != nil {
		return jobboard.Page[jobboard.Job]{}, fmt.Errorf("search jobs: %w", timeout(ctx, err))
	}
	if len(jobs) == 0 && q != "" {
		// Nothing matched: tell a query that could not be searched from one
		// that found nothing.
		var searchable bool
		if err := db.pool.QueryRow(ctx, searchableSQL, q).Scan(&searchable); err != nil {
			return jobboard.Page[jobboard.Job]{}, fmt.Errorf("search jobs: check query: %w", timeout(ctx, err))
		}
		if !searchable {
			return jobboard.Page[jobboard.Job]{}, fmt.Errorf("search jobs for %q: %w", f.Query, jobboard.ErrUnsearchable)
		}
	}
	return pageOf(jobs, limit, func(j jobboard.Job) int64 { return j.ID }), nil
}

// searchStatements returns the statements of SearchJobs for a page of
// limit rows (see searchBuilder.statements) and their arguments.
func (db *DB) searchStatements(actor *jobboard.Actor, f jobboard.JobFilter, limit int) (first, byIndex string, args []any) {
	var b searchBuilder
	if f.CompanyID != nil {
		b.add(searchCompany, *f.CompanyID, actorID(actor))
	} else {
		b.add(searchOpen)
	}
	q := strings.TrimSpace(f.Query)
	if q != "" {
		b.text = b.fragment(searchQuery, q)
		b.textUnseen = fmt.Sprintf(searchQueryUnseen, len(b.args))
	}
	if loc := strings.TrimSpace(f.Location); loc != "" {
		b.add(searchLocation, loc)
	}
	if f.Remote != nil {
		b.add(searchRemote, *f.Remote)
	}
	if f.EmploymentType != "" {
		b.add(searchEmploymentType, string(f.EmploymentType))
	}
	if f.SalaryMin != nil {
		b.add(searchSalaryMin, *f.SalaryMin)
	}
	if f.After > 0 {
		b.add(searchAfter, f.After)
	}
	// One row more than the page tells whether another page follows.
	walk := db.searchWalk
	if walk == 0 {
		walk = searchWalk(q, limit+1)
	}
	first, byIndex = b.statements(limit+1, walk)
	return first, byIndex, b.args
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
