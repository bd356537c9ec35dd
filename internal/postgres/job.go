package postgres

import (
	"context"
	"errors"
	"fmt"

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
// cheaper than the generic plan, and the prepared jobSQL would be planned
// again on every read instead of running its generic plan (while
// company_members, a small table that autovacuum may never analyze, has
// no statistics).
const openJobSQL = `
SELECT ` + jobColumns + `
FROM jobs j
WHERE j.id = $1 AND j.status = 'open'`

// jobOpenFunctionSQL and jobForMemberFunctionSQL are openJobSQL and jobSQL
// as the functions of migration 014 (see DB.functions).
const (
	jobOpenFunctionSQL      = `SELECT * FROM job_open($1)`
	jobForMemberFunctionSQL = `SELECT * FROM job_for_member($1, $2, $3)`
)

// Job returns an open job, or a closed one to a member of its company. actor
// may be nil; a session that has ended is answered as to anyone. Errors:
// jobboard.ErrNotFound.
func (db *DB) Job(ctx context.Context, actor *jobboard.Actor, id int64) (jobboard.Job, error) {
	sql, args := jobSQL, []any{id, actorID(actor), sessionOf(actor)}
	if db.functions {
		sql = jobForMemberFunctionSQL
	}
	if actor == nil {
		sql, args = openJobSQL, args[:1]
		if db.functions {
			sql = jobOpenFunctionSQL
		}
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

// updateJobFunctionSQL is updateJobSQL as the function of migration 014
// (see DB.functions).
const updateJobFunctionSQL = `SELECT * FROM update_job($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

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
		sql := updateJobSQL
		if u.db.functions {
			sql = updateJobFunctionSQL
		}
		rows, _ := q.Query(ctx, sql, args...)
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
