package postgres

import (
	"context"
	"fmt"
	"strings"

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
// status = 'open' literally, and can match the partial indexes: it walks
// jobs_open_id_idx newest first for listings and common words, uses
// jobs_search_idx for rare words, where btree_gin answers id < cursor inside
// the GIN index, jobs_open_location_idx for a location and
// jobs_open_salary_idx for a salary no job reaches.
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
	// searchLocation is an exact match on the normalised location, which
	// jobs_open_location_idx answers in id order whether or not anything
	// matches.
	searchLocation       = `lower(j.location) = lower($%[1]d)`
	searchRemote         = `j.remote = $%[1]d`
	searchEmploymentType = `j.employment_type = $%[1]d`
	searchSalaryMin      = `j.salary_max >= $%[1]d`
	searchAfter          = `j.id < $%[1]d`
)

// searchableSQL tells whether the search index can answer a query.
const searchableSQL = `SELECT querytree(websearch_to_tsquery('english', $1)) <> 'T'`

// searchBuilder collects fixed WHERE fragments and their parameters.
type searchBuilder struct {
	where []string
	args  []any
}

// add appends a fragment whose %[1]d, %[2]d... stand for the given args.
func (b *searchBuilder) add(fragment string, args ...any) {
	positions := make([]any, len(args))
	for i := range args {
		positions[i] = len(b.args) + i + 1
	}
	if len(positions) > 0 {
		fragment = fmt.Sprintf(fragment, positions...)
	}
	b.where = append(b.where, fragment)
	b.args = append(b.args, args...)
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
	var b searchBuilder
	if f.CompanyID != nil {
		b.add(searchCompany, *f.CompanyID, actorID(actor))
	} else {
		b.add(searchOpen)
	}
	if q := strings.TrimSpace(f.Query); q != "" {
		b.add(searchQuery, q)
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
	limit := pageLimit(f.Limit)
	// One row more than the page tells whether another page follows.
	b.args = append(b.args, limit+1)
	sql := fmt.Sprintf(searchJobsSQL, strings.Join(b.where, "\n  AND "), len(b.args))

	// QueryExecModeExec sends the statement unnamed, so PostgreSQL plans it
	// with this request's values every time. A named prepared statement
	// (pgx's default) may be moved to a generic plan by the plan cache, and a
	// generic plan cannot know how common the searched words are: forced
	// generic at 100k jobs, the first page for a common word reads all 34k
	// matches through the GIN index and sorts them (130 ms), where the
	// planned-per-value query walks jobs_open_id_idx and stops after one page
	// (0.6 ms). Planning each search costs about 0.2 ms.
	rows, _ := db.pool.Query(ctx, sql, append([]any{pgx.QueryExecModeExec}, b.args...)...)
	jobs, err := pgx.CollectRows(rows, scanJob)
	if err != nil {
		return jobboard.Page[jobboard.Job]{}, fmt.Errorf("search jobs: %w", timeout(ctx, err))
	}
	if len(jobs) == 0 && strings.TrimSpace(f.Query) != "" {
		// Nothing matched: tell a query that could not be searched from one
		// that found nothing.
		var searchable bool
		if err := db.pool.QueryRow(ctx, searchableSQL, strings.TrimSpace(f.Query)).Scan(&searchable); err != nil {
			return jobboard.Page[jobboard.Job]{}, fmt.Errorf("search jobs: check query: %w", timeout(ctx, err))
		}
		if !searchable {
			return jobboard.Page[jobboard.Job]{}, fmt.Errorf("search jobs for %q: %w", f.Query, jobboard.ErrUnsearchable)
		}
	}
	return pageOf(jobs, limit, func(j jobboard.Job) int64 { return j.ID }), nil
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
