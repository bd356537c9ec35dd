package jobboard

import (
	"context"
	"time"
	"unicode/utf8"
)

// ApplicationStatus is where an application stands in the hiring workflow.
type ApplicationStatus string

// The application statuses. Hired, Rejected and Withdrawn are terminal.
const (
	StatusSubmitted ApplicationStatus = "submitted"
	StatusReviewing ApplicationStatus = "reviewing"
	StatusInterview ApplicationStatus = "interview"
	StatusOffer     ApplicationStatus = "offer"
	StatusHired     ApplicationStatus = "hired"
	StatusRejected  ApplicationStatus = "rejected"
	StatusWithdrawn ApplicationStatus = "withdrawn"
)

// ApplicationStatuses lists every status in workflow order.
var ApplicationStatuses = []ApplicationStatus{
	StatusSubmitted, StatusReviewing, StatusInterview, StatusOffer,
	StatusHired, StatusRejected, StatusWithdrawn,
}

// forward is the employer's main path: each status may move to the next one.
var forward = map[ApplicationStatus]ApplicationStatus{
	StatusSubmitted: StatusReviewing,
	StatusReviewing: StatusInterview,
	StatusInterview: StatusOffer,
	StatusOffer:     StatusHired,
}

// Valid reports whether s is a known status.
func (s ApplicationStatus) Valid() bool {
	for _, v := range ApplicationStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// Terminal reports whether no further change is possible from s.
func (s ApplicationStatus) Terminal() bool {
	return s == StatusHired || s == StatusRejected || s == StatusWithdrawn
}

// Party is the side of an application that asks for a change.
type Party int

// The parties to an application.
const (
	PartyCandidate Party = iota + 1
	PartyEmployer
)

// CheckTransition reports whether party may move an application from one
// status to another. Setting the current status again is not a transition
// (callers treat it as a no-op before asking). Errors: ErrInvalidTransition.
func CheckTransition(party Party, from, to ApplicationStatus) error {
	ok := false
	switch {
	case from.Terminal():
	case party == PartyCandidate:
		ok = to == StatusWithdrawn
	case party == PartyEmployer:
		ok = to == StatusRejected || forward[from] == to
	}
	if !ok {
		return &TransitionError{From: from, To: to}
	}
	return nil
}

// Application is a candidate's application to a job. Version grows by one
// with every status change; the HTTP layer exposes it as the ETag.
type Application struct {
	ID          int64             `json:"id"`
	JobID       int64             `json:"job_id"`
	CandidateID int64             `json:"candidate_id"`
	CoverLetter string            `json:"cover_letter"`
	Status      ApplicationStatus `json:"status"`
	Version     int64             `json:"version"`
	CreatedAt   time.Time         `json:"created_at"`
	UpdatedAt   time.Time         `json:"updated_at"`
}

// MaxCoverLetterLen is the longest cover letter accepted, in characters.
const MaxCoverLetterLen = 10000

// NewApplication is the input of an application.
type NewApplication struct {
	CoverLetter string `json:"cover_letter"`
}

// Validate returns a *ValidationError naming every invalid field.
func (a NewApplication) Validate() error {
	p := problems{}
	if utf8.RuneCountInString(a.CoverLetter) > MaxCoverLetterLen {
		p.add("cover_letter", "must be at most %d characters", MaxCoverLetterLen)
	}
	return p.err()
}

// StatusChange asks to move an application to a new status. IfVersion, when
// set, must equal the application's current version (from an If-Match).
type StatusChange struct {
	Status    ApplicationStatus
	IfVersion *int64
}

// HistoryEntry is one recorded status change.
type HistoryEntry struct {
	OldStatus ApplicationStatus `json:"old_status"`
	NewStatus ApplicationStatus `json:"new_status"`
	ChangedBy int64             `json:"changed_by"`
	ChangedAt time.Time         `json:"changed_at"`
	EventID   string            `json:"event_id"`
	// Email is what became of the email that told the candidate of the
	// change; only the candidate sees it (nil for anyone else).
	Email *EmailDelivery `json:"email,omitempty"`
}

// ApplicationStore keeps applications and their history. Every method checks
// that the actor may see the application: its candidate, or a member of the
// job's company. Anyone else gets ErrNotFound.
type ApplicationStore interface {
	// Application returns one application. Errors: ErrNotFound.
	Application(ctx context.Context, actor Actor, id int64) (Application, error)
	// JobApplications lists a job's applications, newest first, to a member
	// of its company. Errors: ErrNotFound.
	JobApplications(ctx context.Context, actor Actor, jobID int64, limit int, after int64) (Page[Application], error)
	// CandidateApplications lists the actor's own applications, newest first.
	CandidateApplications(ctx context.Context, actor Actor, limit int, after int64) (Page[Application], error)
	// History lists an application's status changes, oldest first.
	// Errors: ErrNotFound.
	History(ctx context.Context, actor Actor, id int64) ([]HistoryEntry, error)
}

// ApplicationWrites are the writes beside ApplicationStore's reads that a
// request makes through the Writes it is given (see Writes): in a keyed
// write's transaction, or each committing on its own.
type ApplicationWrites interface {
	// Apply stores a candidate's application to an open job.
	// Errors: ErrNotFound (no such job, or a closed one the actor may not
	// see), ErrJobClosed (closed, and the actor is a member of its company),
	// ErrDuplicateApplication, ErrForbidden (actor is not a candidate).
	Apply(ctx context.Context, actor Actor, jobID int64, a NewApplication) (Application, error)
	// ChangeStatus moves an application to a new status and, in the same
	// transaction, records the history row and the outbox event. Asking
	// for the status it has already changes nothing and writes no event.
	// Errors: ErrNotFound, ErrInvalidTransition, ErrPreconditionFailed.
	ChangeStatus(ctx context.Context, actor Actor, id int64, c StatusChange) (Application, error)
}
