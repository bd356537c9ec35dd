package jobboard

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Error kinds. Adapters wrap them with context (fmt.Errorf("...: %w", ErrX));
// the HTTP layer maps them to problem responses with errors.Is.
var (
	// ErrNotFound: the thing does not exist, or the actor may not see it.
	// Both answer the same so that existence does not leak.
	ErrNotFound = errors.New("not found")
	// ErrUnauthenticated: the request carries no valid credentials.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrInvalidCredentials: login failed. Deliberately says neither which
	// part (email or password) was wrong.
	ErrInvalidCredentials = errors.New("invalid email or password")
	// ErrForbidden: the actor is signed in but its role may not do this at all
	// (a candidate creating a company). Used only where the target is not a
	// thing the actor could be hiding from; otherwise ErrNotFound.
	ErrForbidden = errors.New("forbidden")
	// ErrEmailTaken: a user with that email exists.
	ErrEmailTaken = errors.New("email already registered")
	// ErrDuplicateApplication: the candidate has applied to the job already.
	ErrDuplicateApplication = errors.New("already applied to this job")
	// ErrJobClosed: the job no longer accepts applications.
	ErrJobClosed = errors.New("job is closed")
	// ErrInvalidTransition: the status workflow does not allow the change.
	ErrInvalidTransition = errors.New("invalid status transition")
	// ErrPreconditionFailed: an If-Match version is stale.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrTimeout: the database gave up on a statement that ran longer than
	// the configured limit. The request may succeed later or in a narrower
	// form; it is not the client's fault and not a bug.
	ErrTimeout = errors.New("statement timed out")
	// ErrUnsearchable: a text search has no word that an index can look up
	// (only negated words), so answering it would read every job.
	ErrUnsearchable = errors.New("the search query has no word to search for")
)

// BlockedError is an attempt refused because too many failed before it
// (logins to an account from one client, or any attempts of one client).
// It matches ErrTooManyAttempts.
type BlockedError struct {
	// RetryAfter is how long until the next attempt is accepted.
	RetryAfter time.Duration
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("too many failed attempts; retry after %s", e.RetryAfter)
}

// Is makes errors.Is(err, ErrTooManyAttempts) true.
func (e *BlockedError) Is(target error) bool { return target == ErrTooManyAttempts }

// ErrTooManyAttempts is the kind of an attempt refused for a while after
// repeated failures (see BlockedError for how long).
var ErrTooManyAttempts = errors.New("too many failed attempts")

// FieldError is one invalid input field.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// ValidationError lists every invalid field of an input. It is returned by the
// Validate methods of the input types; the HTTP layer answers 422.
type ValidationError struct {
	Fields []FieldError
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Field + ": " + f.Detail
	}
	return "invalid input: " + strings.Join(parts, "; ")
}

// problems collects field errors while validating an input.
type problems map[string]string

func (p problems) add(field, format string, args ...any) {
	if _, ok := p[field]; !ok {
		p[field] = fmt.Sprintf(format, args...)
	}
}

// err returns nil when nothing was added, else a *ValidationError with the
// fields in a stable order.
func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	ve := &ValidationError{Fields: make([]FieldError, 0, len(p))}
	for f, d := range p {
		ve.Fields = append(ve.Fields, FieldError{Field: f, Detail: d})
	}
	sort.Slice(ve.Fields, func(i, j int) bool { return ve.Fields[i].Field < ve.Fields[j].Field })
	return ve
}
