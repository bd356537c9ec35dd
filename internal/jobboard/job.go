package jobboard

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"
)

// JobStatus says whether a job accepts applications.
type JobStatus string

// The job statuses.
const (
	JobOpen   JobStatus = "open"
	JobClosed JobStatus = "closed"
)

// Valid reports whether s is a known job status.
func (s JobStatus) Valid() bool { return s == JobOpen || s == JobClosed }

// EmploymentType is the kind of contract a job offers.
type EmploymentType string

// The employment types.
const (
	FullTime   EmploymentType = "full_time"
	PartTime   EmploymentType = "part_time"
	Contract   EmploymentType = "contract"
	Internship EmploymentType = "internship"
	Temporary  EmploymentType = "temporary"
)

// EmploymentTypes lists every valid employment type, in display order.
var EmploymentTypes = []EmploymentType{FullTime, PartTime, Contract, Internship, Temporary}

// Valid reports whether t is a known employment type.
func (t EmploymentType) Valid() bool {
	for _, v := range EmploymentTypes {
		if t == v {
			return true
		}
	}
	return false
}

// Salary is a yearly pay range in whole units of Currency (ISO 4217).
type Salary struct {
	Min      int64  `json:"min"`
	Max      int64  `json:"max"`
	Currency string `json:"currency"`
}

// Job is a position offered by a company.
type Job struct {
	ID             int64          `json:"id"`
	CompanyID      int64          `json:"company_id"`
	Title          string         `json:"title"`
	Description    string         `json:"description"`
	Location       string         `json:"location"`
	Remote         bool           `json:"remote"`
	EmploymentType EmploymentType `json:"employment_type"`
	Salary         *Salary        `json:"salary"`
	Status         JobStatus      `json:"status"`
	CreatedAt      time.Time      `json:"created_at"`
	UpdatedAt      time.Time      `json:"updated_at"`
}

// Limits on job input.
const (
	MaxTitleLen    = 200
	MaxLocationLen = 200
	MaxSalary      = 100_000_000
)

// NewJob is the input of a job.
type NewJob struct {
	Title          string         `json:"title"`
	Description    string         `json:"description"`
	Location       string         `json:"location"`
	Remote         bool           `json:"remote"`
	EmploymentType EmploymentType `json:"employment_type"`
	Salary         *Salary        `json:"salary"`
}

// Normalize trims surrounding white space and upper-cases the currency.
func (j *NewJob) Normalize() {
	j.Title = strings.TrimSpace(j.Title)
	j.Location = strings.TrimSpace(j.Location)
	if j.Salary != nil {
		j.Salary.Currency = strings.ToUpper(strings.TrimSpace(j.Salary.Currency))
	}
}

// Validate returns a *ValidationError naming every invalid field.
func (j NewJob) Validate() error { return j.problems().err() }

func (j NewJob) problems() problems {
	p := problems{}
	requiredText(p, "title", j.Title, MaxTitleLen)
	requiredText(p, "description", j.Description, MaxDescriptionLen)
	if utf8.RuneCountInString(j.Location) > MaxLocationLen {
		p.add("location", "must be at most %d characters", MaxLocationLen)
	}
	if !j.EmploymentType.Valid() {
		p.add("employment_type", "must be one of %v", EmploymentTypes)
	}
	validateSalary(p, j.Salary)
	return p
}

func validateSalary(p problems, s *Salary) {
	if s == nil {
		return
	}
	if s.Min < 0 || s.Min > MaxSalary {
		p.add("salary.min", "must be between 0 and %d", MaxSalary)
	}
	if s.Max < s.Min || s.Max > MaxSalary {
		p.add("salary.max", "must be at least salary.min and at most %d", MaxSalary)
	}
	if len(s.Currency) != 3 || strings.ToUpper(s.Currency) != s.Currency || strings.ContainsFunc(s.Currency, func(r rune) bool { return r < 'A' || r > 'Z' }) {
		p.add("salary.currency", "must be a three-letter ISO 4217 code")
	}
}

// JobPatch is a partial update of a job; nil fields stay as they are.
// SetSalary with a nil Salary removes the salary.
type JobPatch struct {
	Title          *string
	Description    *string
	Location       *string
	Remote         *bool
	EmploymentType *EmploymentType
	SetSalary      bool
	Salary         *Salary
	Status         *JobStatus
}

// Normalize trims the white space around the title and the location and
// upper-cases the salary's currency, as NewJob.Normalize does.
func (p *JobPatch) Normalize() {
	trim := func(s *string) *string {
		if s == nil {
			return nil
		}
		t := strings.TrimSpace(*s)
		return &t
	}
	p.Title, p.Location = trim(p.Title), trim(p.Location)
	if p.Salary != nil {
		s := *p.Salary
		s.Currency = strings.ToUpper(strings.TrimSpace(s.Currency))
		p.Salary = &s
	}
}

// Validate returns a *ValidationError naming every field that the patch
// sets to a value that a job may not have (as NewJob.Validate judges
// them, and the status). The fields it leaves alone keep values that were
// valid when they were written, so a valid patch makes a valid job.
func (p JobPatch) Validate() error {
	probs := problems{}
	if p.Title != nil {
		requiredText(probs, "title", *p.Title, MaxTitleLen)
	}
	if p.Description != nil {
		requiredText(probs, "description", *p.Description, MaxDescriptionLen)
	}
	if p.Location != nil && utf8.RuneCountInString(*p.Location) > MaxLocationLen {
		probs.add("location", "must be at most %d characters", MaxLocationLen)
	}
	if p.EmploymentType != nil && !p.EmploymentType.Valid() {
		probs.add("employment_type", "must be one of %v", EmploymentTypes)
	}
	if p.SetSalary {
		validateSalary(probs, p.Salary)
	}
	if p.Status != nil && !p.Status.Valid() {
		probs.add("status", "must be %q or %q", JobOpen, JobClosed)
	}
	return probs.err()
}

// Page limits.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// JobFilter selects jobs for a search. Zero values mean "any".
type JobFilter struct {
	// Query is full-text search over title and description (web-search
	// syntax). It needs a word that is not negated: ErrUnsearchable.
	Query string
	// Location matches a job's whole location, ignoring case: an exact
	// match that an index answers, not a substring search.
	Location       string
	Remote         *bool
	EmploymentType EmploymentType
	// SalaryMin keeps jobs whose salary range reaches at least this amount.
	SalaryMin *int64
	CompanyID *int64
	// Limit is the page size, 1 to MaxPageSize.
	Limit int
	// After continues from the cursor of a previous page (zero: first page).
	After int64
}

// Page is one page of a keyset-paginated list. NextAfter is zero on the last
// page; the HTTP layer turns it into an opaque cursor.
type Page[T any] struct {
	Items     []T
	NextAfter int64
}

// JobListing is a page of a job search and the job listing version (see
// JobStore.JobListingVersion) read with the page or just before it: the
// page is never older than the version.
type JobListing struct {
	Page[Job]
	Version int64
}

// JobStore keeps jobs.
type JobStore interface {
	// Job returns an open job, or a closed one to a member of its company.
	// Errors: ErrNotFound, ErrTimeout.
	Job(ctx context.Context, actor *Actor, id int64) (Job, error)
	// SearchJobs returns open jobs matching f, newest first; a member filtering
	// by its own company also sees closed ones. actor may be nil. The page
	// comes with the listing version it was read at, so that its entity tag
	// costs no read of its own. Errors: ErrUnsearchable, ErrTimeout.
	SearchJobs(ctx context.Context, actor *Actor, f JobFilter) (JobListing, error)
	// JobListingVersion returns a number that changes, in the same
	// transaction, with every change to any job or company membership: a
	// search page read after the version cannot be older than it. It is
	// the cheap test behind the entity tags of search pages.
	JobListingVersion(ctx context.Context) (int64, error)
}

// JobWrites are the writes beside JobStore's reads that a
// request makes through the Writes it is given (see Writes): in a keyed
// write's transaction, or each committing on its own.
type JobWrites interface {
	// CreateJob stores a job of the company. Errors: ErrNotFound when the
	// company does not exist or the actor is not its member.
	CreateJob(ctx context.Context, actor Actor, companyID int64, j NewJob) (Job, error)
	// UpdateJob applies a patch to a job of a company the actor is a member
	// of. Errors: ErrNotFound, *ValidationError.
	UpdateJob(ctx context.Context, actor Actor, id int64, p JobPatch) (Job, error)
}
