package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.ApplicationStore = (*DB)(nil)

// applicationColumns is the column list that scanApplication reads, in order.
const applicationColumns = `a.id, a.job_id, a.candidate_id, a.cover_letter, a.status, a.version,
	a.created_at, a.updated_at`

func scanApplication(row pgx.CollectableRow) (jobboard.Application, error) {
	return scanApplicationWith(row)
}

// scanApplicationWith is scanApplication for a row with more columns after
// the application's, read into extra.
func scanApplicationWith(row pgx.CollectableRow, extra ...any) (jobboard.Application, error) {
	var a jobboard.Application
	err := row.Scan(append([]any{&a.ID, &a.JobID, &a.CandidateID, &a.CoverLetter, &a.Status, &a.Version,
		&a.CreatedAt, &a.UpdatedAt}, extra...)...)
	return a, err
}

// afterCursor turns "no cursor" (zero) into a bound every id is below, so
// the keyset condition id < $n stays one static statement.
func afterCursor(after int64) int64 {
	if after <= 0 {
		return math.MaxInt64
	}
	return after
}

// applySQL inserts only for an open job and an actor who is a candidate in
// the users table, with a live session ($4, read from the same row). The
// unique constraint applications_job_candidate_key, not a prior check,
// decides between two racing applications.
const applySQL = `
INSERT INTO applications AS a (job_id, candidate_id, cover_letter)
SELECT j.id, $2, $3
FROM jobs j
WHERE j.id = $1 AND j.status = 'open'
  AND EXISTS (SELECT 1 FROM users u WHERE u.id = $2 AND u.role = 'candidate'
	AND (u.password_changed_at IS NULL OR u.password_changed_at <= $4))
RETURNING ` + applicationColumns

// applyRefusedSQL explains, after applySQL inserted nothing, why: whether
// the job exists, its status, and whether the actor $2 is a member of its
// company (and so may see it closed).
const applyRefusedSQL = `
SELECT j.status, EXISTS (SELECT 1 FROM company_members m WHERE m.company_id = j.company_id AND m.user_id = $2)
FROM jobs j WHERE j.id = $1`

// Apply stores a candidate's application to an open job. Errors:
// jobboard.ErrForbidden when the actor is not a candidate,
// jobboard.ErrNotFound when the job does not exist or is closed and the
// actor may not see it (as Job answers), jobboard.ErrJobClosed when it is
// closed and the actor is a member of its company,
// jobboard.ErrDuplicateApplication when the candidate has applied to it
// already, jobboard.ErrSessionRevoked.
func (u *unit) Apply(ctx context.Context, actor jobboard.Actor, jobID int64, na jobboard.NewApplication) (jobboard.Application, error) {
	if actor.Role != jobboard.RoleCandidate {
		return jobboard.Application{}, fmt.Errorf("apply to job %d: %w", jobID, jobboard.ErrForbidden)
	}
	q, err := u.writer(ctx)
	if err != nil {
		return jobboard.Application{}, fmt.Errorf("apply to job %d: %w", jobID, err)
	}
	// The statement writes the application.submitted webhook event too,
	// when the company has an endpoint that wants it (webhook_emit.go).
	var emitted []string
	rows, _ := q.Query(ctx, applyEmittingSQL, jobID, actor.UserID, na.CoverLetter, actor.PasswordChangedAt)
	a, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (jobboard.Application, error) {
		return scanApplicationWith(row, &emitted)
	})
	if err == nil {
		err = u.emitPayloads(emitted)
	}
	switch {
	case err == nil:
		return a, nil
	case isUniqueViolation(err, "applications_job_candidate_key"):
		err = jobboard.ErrDuplicateApplication
	case pgCode(err) == foreignKeyViolation:
		// The job was deleted between the SELECT and the foreign key check.
		err = jobboard.ErrNotFound
	case errors.Is(err, pgx.ErrNoRows):
		if err = refusal(ctx, q, actor, nil); err == nil {
			err = applyRefused(ctx, q, jobID, actor.UserID)
		}
	}
	return jobboard.Application{}, fmt.Errorf("apply to job %d: %w", jobID, timeout(ctx, err))
}

// applyRefused finds the reason applySQL inserted nothing. A closed job is
// ErrNotFound to whoever may not see it, so that applying does not reveal
// what GET hides.
func applyRefused(ctx context.Context, q querier, jobID, actorID int64) error {
	var (
		status jobboard.JobStatus
		member bool
	)
	if err := q.QueryRow(ctx, applyRefusedSQL, jobID, actorID).Scan(&status, &member); err != nil {
		return notFound(timeout(ctx, err))
	}
	switch {
	case status != jobboard.JobOpen && member:
		return jobboard.ErrJobClosed
	case status != jobboard.JobOpen:
		return jobboard.ErrNotFound
	}
	// The job is open, so the users table says the actor is no candidate.
	return jobboard.ErrForbidden
}

// visibleApplication is the condition, over applications a joined to jobs j,
// that the actor $2, whose session ($3) is live, may see the application:
// its candidate, or a member of the job's company.
var visibleApplication = `(a.candidate_id = $2 OR EXISTS (
	SELECT 1 FROM company_members m WHERE m.company_id = j.company_id AND m.user_id = $2))
  AND ` + liveSession("$2", "$3")

var applicationSQL = `
SELECT ` + applicationColumns + `
FROM applications a
JOIN jobs j ON j.id = a.job_id
WHERE a.id = $1 AND ` + visibleApplication

// Application returns an application to its candidate or to a member of the
// job's company. Errors: jobboard.ErrNotFound, jobboard.ErrSessionRevoked.
func (db *DB) Application(ctx context.Context, actor jobboard.Actor, id int64) (jobboard.Application, error) {
	rows, _ := db.pool.Query(ctx, applicationSQL, id, actor.UserID, actor.PasswordChangedAt)
	a, err := pgx.CollectExactlyOneRow(rows, scanApplication)
	if errors.Is(err, pgx.ErrNoRows) {
		err = refusal(ctx, db.pool, actor, jobboard.ErrNotFound)
	}
	if err != nil {
		return jobboard.Application{}, fmt.Errorf("application %d: %w", id, timeout(ctx, err))
	}
	return a, nil
}

// jobMemberSQL tells whether actor $2, whose session ($3) is live, is a
// member of job $1's company.
var jobMemberSQL = `
SELECT EXISTS (
	SELECT 1 FROM jobs j
	JOIN company_members m ON m.company_id = j.company_id
	WHERE j.id = $1 AND m.user_id = $2)
  AND ` + liveSession("$2", "$3")

var jobApplicationsSQL = `
SELECT ` + applicationColumns + `
FROM applications a
WHERE a.job_id = $1 AND a.id < $3
  AND EXISTS (
	SELECT 1 FROM jobs j
	JOIN company_members m ON m.company_id = j.company_id
	WHERE j.id = $1 AND m.user_id = $2)
  AND ` + liveSession("$2", "$5") + `
ORDER BY a.id DESC
LIMIT $4`

// JobApplications lists a job's applications, newest first, to a member of
// its company; after is the last id of the previous page (zero: first page)
// and limit is clamped like SearchJobs's. Errors: jobboard.ErrNotFound when
// the job does not exist or the actor is not a member of its company,
// jobboard.ErrSessionRevoked.
func (db *DB) JobApplications(ctx context.Context, actor jobboard.Actor, jobID int64, limit int, after int64) (jobboard.Page[jobboard.Application], error) {
	limit = pageLimit(limit)
	rows, _ := db.pool.Query(ctx, jobApplicationsSQL, jobID, actor.UserID, afterCursor(after), limit+1, actor.PasswordChangedAt)
	apps, err := pgx.CollectRows(rows, scanApplication)
	if err != nil {
		return jobboard.Page[jobboard.Application]{}, fmt.Errorf("applications of job %d: %w", jobID, timeout(ctx, err))
	}
	if len(apps) == 0 {
		// An empty page is either a job without (more) applications or a
		// job the actor may not see (or a session that ended); only the
		// first is an answer.
		var member bool
		if err := db.pool.QueryRow(ctx, jobMemberSQL, jobID, actor.UserID, actor.PasswordChangedAt).Scan(&member); err != nil {
			return jobboard.Page[jobboard.Application]{}, fmt.Errorf("applications of job %d: %w", jobID, timeout(ctx, err))
		}
		if !member {
			return jobboard.Page[jobboard.Application]{}, fmt.Errorf("applications of job %d: %w", jobID,
				refusal(ctx, db.pool, actor, jobboard.ErrNotFound))
		}
	}
	return pageOf(apps, limit, applicationID), nil
}

func applicationID(a jobboard.Application) int64 { return a.ID }

var candidateApplicationsSQL = `
SELECT ` + applicationColumns + `
FROM applications a
WHERE a.candidate_id = $1 AND a.id < $2
  AND ` + liveSession("$1", "$4") + `
ORDER BY a.id DESC
LIMIT $3`

// CandidateApplications lists the actor's own applications, newest first;
// after is the last id of the previous page (zero: first page) and limit is
// clamped like SearchJobs's. Errors: jobboard.ErrSessionRevoked, database
// errors.
func (db *DB) CandidateApplications(ctx context.Context, actor jobboard.Actor, limit int, after int64) (jobboard.Page[jobboard.Application], error) {
	limit = pageLimit(limit)
	rows, _ := db.pool.Query(ctx, candidateApplicationsSQL, actor.UserID, afterCursor(after), limit+1, actor.PasswordChangedAt)
	apps, err := pgx.CollectRows(rows, scanApplication)
	if err == nil && len(apps) == 0 {
		// No applications (more), or a session that ended.
		err = refusal(ctx, db.pool, actor, nil)
	}
	if err != nil {
		return jobboard.Page[jobboard.Application]{}, fmt.Errorf("applications of candidate %d: %w", actor.UserID, timeout(ctx, err))
	}
	return pageOf(apps, limit, applicationID), nil
}

// applicationForUpdateSQL locks the application for the rest of the
// transaction. A concurrent change waits here, then reads the row as the
// first change left it (its new version and status).
var applicationForUpdateSQL = `
SELECT ` + applicationColumns + `, a.candidate_id = $2
FROM applications a
JOIN jobs j ON j.id = a.job_id
WHERE a.id = $1 AND ` + visibleApplication + `
FOR UPDATE OF a`

const changeStatusUpdateSQL = `
UPDATE applications AS a
SET status = $2, version = a.version + 1, updated_at = now()
WHERE a.id = $1
RETURNING ` + applicationColumns

const changeStatusHistorySQL = `
INSERT INTO application_status_history (application_id, old_status, new_status, changed_by, changed_at, event_id)
VALUES ($1, $2, $3, $4, $5, $6)`

// changeStatusOutboxSQL writes the event; its payload ($3) is JSON text
// (see storeAnswerSQL).
const changeStatusOutboxSQL = `
INSERT INTO outbox (event_id, event_type, payload, created_at) VALUES ($1, $2, $3::jsonb, $4)`

// ChangeStatus moves an application to a new status. In one transaction it
// locks the application, checks the actor may see it and which party it is
// (its candidate, or a member of the job's company), checks c.IfVersion and
// the workflow, then writes the new status with the next version, a history
// row and an outbox row carrying the event, which the unit hands back once
// committed. Asking for the status the application already has changes
// nothing and writes no event.
// Errors: jobboard.ErrNotFound, jobboard.ErrPreconditionFailed (stale
// IfVersion), jobboard.ErrInvalidTransition (a *jobboard.TransitionError),
// jobboard.ErrSessionRevoked.
func (u *unit) ChangeStatus(ctx context.Context, actor jobboard.Actor, id int64, c jobboard.StatusChange) (jobboard.Application, error) {
	var (
		app     jobboard.Application
		event   *jobboard.Event
		emitted []string
	)
	err := u.inTx(ctx, func(tx pgx.Tx) error {
		var isCandidate bool
		err := tx.QueryRow(ctx, applicationForUpdateSQL, id, actor.UserID, actor.PasswordChangedAt).Scan(
			&app.ID, &app.JobID, &app.CandidateID, &app.CoverLetter, &app.Status, &app.Version,
			&app.CreatedAt, &app.UpdatedAt, &isCandidate)
		if errors.Is(err, pgx.ErrNoRows) {
			return refusal(ctx, tx, actor, jobboard.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if c.IfVersion != nil && *c.IfVersion != app.Version {
			return jobboard.ErrPreconditionFailed
		}
		if c.Status == app.Status {
			return nil
		}
		party := jobboard.PartyEmployer
		if isCandidate {
			party = jobboard.PartyCandidate
		}
		if err := jobboard.CheckTransition(party, app.Status, c.Status); err != nil {
			return err
		}
		old := app.Status
		rows, _ := tx.Query(ctx, changeStatusUpdateSQL, id, c.Status)
		if app, err = pgx.CollectExactlyOneRow(rows, scanApplication); err != nil {
			return err
		}
		ev := jobboard.Event{
			Type:          jobboard.EventTypeStatusChanged,
			EventID:       uuid.NewString(),
			OccurredAt:    app.UpdatedAt.UTC(),
			ApplicationID: app.ID,
			OldStatus:     old,
			NewStatus:     app.Status,
			Version:       app.Version,
		}
		if _, err := tx.Exec(ctx, changeStatusHistorySQL, app.ID, old, app.Status, actor.UserID, ev.OccurredAt, ev.EventID); err != nil {
			return fmt.Errorf("insert history: %w", err)
		}
		payload, err := jobboard.EncodeEvent(ev)
		if err != nil {
			return err
		}
		// The outbox row, and the webhook events of the change for the
		// endpoints that want them (webhook_emit.go), in one statement.
		err = tx.QueryRow(ctx, changeStatusEmittingSQL, ev.EventID, ev.Type, string(payload), ev.OccurredAt,
			app.ID, app.CandidateID, app.JobID, old, app.Status, statusWebhookTypes(app.Status)).Scan(&emitted)
		if err != nil {
			return fmt.Errorf("insert outbox: %w", err)
		}
		event = &ev
		return nil
	})
	if err == nil && event != nil {
		u.emit(*event)
		err = u.emitPayloads(emitted)
	}
	if err != nil {
		return jobboard.Application{}, fmt.Errorf("change status of application %d: %w", id, timeout(ctx, err))
	}
	return app, nil
}

// applicationVisibleSQL tells whether actor $2, whose session ($3) is live,
// may see application $1.
var applicationVisibleSQL = `
SELECT EXISTS (
	SELECT 1 FROM applications a
	JOIN jobs j ON j.id = a.job_id
	WHERE a.id = $1 AND ` + visibleApplication + `)`

// historySQL also reads what became of each change's email: the best
// delivery state SES reported for it (email_deliveries), else the worker's
// outcome (processed_events): sent, not sent and why, or not handled yet.
var historySQL = `
SELECT h.old_status, h.new_status, h.changed_by, h.changed_at, h.event_id::text,
       CASE WHEN d.state IS NOT NULL THEN d.state
            WHEN p.outcome = 'sent' THEN 'sent'
            WHEN p.outcome IS NULL THEN 'pending'
            ELSE 'not_sent' END,
       CASE WHEN d.state IS NULL AND p.outcome <> 'sent' THEN p.outcome ELSE '' END
FROM application_status_history h
LEFT JOIN processed_events p ON p.event_id = h.event_id::text
LEFT JOIN LATERAL (
	SELECT d.state FROM email_deliveries d WHERE d.event_id = h.event_id::text
	ORDER BY array_position(ARRAY['sent', 'delivered', 'bounced', 'complained'], d.state) DESC LIMIT 1
) d ON true
WHERE h.application_id = $1
  AND EXISTS (
	SELECT 1 FROM applications a
	JOIN jobs j ON j.id = a.job_id
	WHERE a.id = $1 AND ` + visibleApplication + `)
ORDER BY h.id`

// History lists an application's status changes, oldest first, to its
// candidate or a member of the job's company. Errors: jobboard.ErrNotFound,
// jobboard.ErrSessionRevoked.
func (db *DB) History(ctx context.Context, actor jobboard.Actor, id int64) ([]jobboard.HistoryEntry, error) {
	rows, _ := db.pool.Query(ctx, historySQL, id, actor.UserID, actor.PasswordChangedAt)
	entries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (jobboard.HistoryEntry, error) {
		var (
			h jobboard.HistoryEntry
			e jobboard.EmailDelivery
		)
		err := row.Scan(&h.OldStatus, &h.NewStatus, &h.ChangedBy, &h.ChangedAt, &h.EventID, &e.State, &e.Reason)
		if actor.Role == jobboard.RoleCandidate {
			// The email went to the candidate: theirs to see, not the company's.
			h.Email = &e
		}
		return h, err
	})
	if err != nil {
		return nil, fmt.Errorf("history of application %d: %w", id, timeout(ctx, err))
	}
	if len(entries) == 0 {
		// No rows: an application never changed, or one the actor may not see.
		var visible bool
		if err := db.pool.QueryRow(ctx, applicationVisibleSQL, id, actor.UserID, actor.PasswordChangedAt).Scan(&visible); err != nil {
			return nil, fmt.Errorf("history of application %d: %w", id, timeout(ctx, err))
		}
		if !visible {
			return nil, fmt.Errorf("history of application %d: %w", id, refusal(ctx, db.pool, actor, jobboard.ErrNotFound))
		}
	}
	return entries, nil
}
