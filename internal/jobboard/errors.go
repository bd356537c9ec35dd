package jobboard

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// The domain's error kinds, every one of them in this file. Adapters wrap
// them with context (fmt.Errorf("...: %w", ErrX)); the HTTP layer maps those
// a request can meet to problem responses with errors.Is (one table,
// httpapi's problemKinds).
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

// ErrSessionRevoked is the error of a session issued before the account's
// password was last reset. It matches ErrUnauthenticated.
var ErrSessionRevoked = fmt.Errorf("session issued before the last password reset: %w", ErrUnauthenticated)

// TransitionError says which change the workflow refused. It matches
// ErrInvalidTransition with errors.Is.
type TransitionError struct {
	From, To ApplicationStatus
}

func (e *TransitionError) Error() string {
	return "cannot change status from " + string(e.From) + " to " + string(e.To)
}

// Is makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// ErrIdempotencyKeyInUse means that another request with the same
// idempotency key is still running (its transaction holds the key). Retry
// later: once it has finished, the retry gets its answer.
var ErrIdempotencyKeyInUse = errors.New("a request with this idempotency key is still in progress")

// Errors of verification.
var (
	// ErrAlreadyVerified: the account's address is verified; there is
	// nothing to send.
	ErrAlreadyVerified = errors.New("email address already verified")
	// ErrVerificationTokenInvalid: the token is not one we issued (or its
	// link was replaced by a newer attempt of the same email).
	ErrVerificationTokenInvalid = errors.New("verification token is invalid")
	// ErrVerificationTokenExpired: the token is ours, but older than
	// VerificationTokenTTL.
	ErrVerificationTokenExpired = errors.New("verification token has expired")
	// ErrVerificationTokenUsed: the token is ours and was used already.
	ErrVerificationTokenUsed = errors.New("verification token was used already")
)

// VerificationThrottledError is a verification email refused because the
// account or address asked too often. It matches ErrVerificationThrottled.
type VerificationThrottledError struct {
	// RetryAfter is how long until a request is accepted.
	RetryAfter time.Duration
	// Bound is "cooldown", "account" or "address".
	Bound string
}

func (e *VerificationThrottledError) Error() string {
	return fmt.Sprintf("too many verification emails (%s); retry after %s", e.Bound, e.RetryAfter)
}

// Is makes errors.Is(err, ErrVerificationThrottled) true.
func (e *VerificationThrottledError) Is(target error) bool { return target == ErrVerificationThrottled }

// ErrVerificationThrottled is the kind of a verification email refused for
// a while (see VerificationThrottledError for how long).
var ErrVerificationThrottled = errors.New("too many verification emails")

// Errors of password reset. Reset tokens are made, hashed and checked like
// verification tokens (NewVerificationToken, HashVerificationToken,
// ValidVerificationToken): 256 random bits, stored as their SHA-256.
var (
	// ErrPasswordResetTokenInvalid: the token is not one we issued, or its
	// account no longer has the address it was sent to.
	ErrPasswordResetTokenInvalid = errors.New("password reset token is invalid")
	// ErrPasswordResetTokenExpired: the token is ours, but older than
	// PasswordResetTokenTTL.
	ErrPasswordResetTokenExpired = errors.New("password reset token has expired")
	// ErrPasswordResetTokenUsed: the token, or another of the account's,
	// has reset the password already.
	ErrPasswordResetTokenUsed = errors.New("password reset token was used already")
)

// Errors of lifting a suppression.
var (
	// ErrNotSuppressed: the address is not on the suppression list; there
	// is nothing to lift.
	ErrNotSuppressed = errors.New("email address is not suppressed")
	// ErrSuppressedByBounce: the address is suppressed because it bounced,
	// which a withdrawn complaint does not change; a verification link
	// that reaches it does.
	ErrSuppressedByBounce = errors.New("email address is suppressed by a bounce, not a complaint")
	// ErrVerificationRequired: the account has not verified its address
	// since the complaint, so it has not shown that the address is its
	// own; a verification link followed now does.
	ErrVerificationRequired = errors.New("the address must be verified again since the complaint")
)

// Errors of webhooks.
var (
	// ErrTooManyWebhookEndpoints: the company has MaxWebhookEndpoints.
	ErrTooManyWebhookEndpoints = errors.New("the company has the most webhook endpoints allowed")
	// ErrWebhookEndpointDisabled: the endpoint is disabled, so it can be
	// neither pinged nor replayed to.
	ErrWebhookEndpointDisabled = errors.New("the webhook endpoint is disabled")
	// ErrTooManyCompanies: the employer has created
	// MaxCompaniesPerEmployer companies.
	ErrTooManyCompanies = errors.New("the employer has created the most companies allowed")
)

// WebhookDispatchThrottledError is a ping or replay refused because the
// endpoint or its company dispatched too many within the window
// (WebhookDispatchPolicy). It matches ErrTooManyWebhookDispatches.
type WebhookDispatchThrottledError struct {
	// RetryAfter is how long until one is accepted.
	RetryAfter time.Duration
	// Bound is "endpoint" or "company".
	Bound string
}

func (e *WebhookDispatchThrottledError) Error() string {
	return fmt.Sprintf("too many webhook dispatches (%s); retry after %s", e.Bound, e.RetryAfter)
}

// Is makes errors.Is(err, ErrTooManyWebhookDispatches) true.
func (e *WebhookDispatchThrottledError) Is(target error) bool {
	return target == ErrTooManyWebhookDispatches
}

// ErrTooManyWebhookDispatches is the kind of a ping or replay refused for a
// while (see WebhookDispatchThrottledError for how long).
var ErrTooManyWebhookDispatches = errors.New("too many webhook dispatches")

// ErrWebhookSecretMalformed is returned for a secret not of the form
// NewWebhookSecret makes.
var ErrWebhookSecretMalformed = errors.New("webhook signing secret malformed")

// ErrMalformedEvent is matched (errors.Is) by every error DecodeEvent and
// Event.Validate return: the body can never be processed, however often it
// is retried.
var ErrMalformedEvent = errors.New("malformed event")

// MalformedEventError says why a message body is not an event. It matches
// ErrMalformedEvent.
type MalformedEventError struct {
	// Reason is a short description, e.g. "missing event_id".
	Reason string
	// Err is the JSON error behind the reason, if any.
	Err error
}

func (e *MalformedEventError) Error() string {
	if e.Err != nil {
		return "malformed event: " + e.Reason + ": " + e.Err.Error()
	}
	return "malformed event: " + e.Reason
}

// Unwrap returns the JSON error, if any.
func (e *MalformedEventError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrMalformedEvent) true.
func (e *MalformedEventError) Is(target error) bool { return target == ErrMalformedEvent }

// ErrLeaseLost means a claim is no longer held by the lease token that
// tried to finish or release it: its lease expired and another worker took
// the event over (or released it). The caller must leave the claim alone.
var ErrLeaseLost = errors.New("the claim's lease is held by another worker")

// Mail error kinds, returned (wrapped) by Mailer implementations. Any other
// error from a Mailer means the email was not sent and a retry may succeed.
var (
	// ErrMailThrottled: the mail service asks us to slow down (sending
	// rate or quota). Release the claim, stop starting new work, retry
	// later with a backoff.
	ErrMailThrottled = errors.New("mail service throttled the send")
	// ErrMailPaused: the mail service stopped all sending of the account
	// until someone acts (sending paused, account suspended, sender domain
	// not verified, configuration missing). Not this email's fault: release
	// the claim, stop the batch, retry with the longest backoff, alarm.
	ErrMailPaused = errors.New("mail service stopped sending for the account")
	// ErrMailRejected: the mail service refused this email for good (its
	// content or its recipient). Retrying cannot help.
	ErrMailRejected = errors.New("mail service rejected the email permanently")
	// ErrMailRefused: the mail service refused the sender's authorisation
	// (access denied: the sending role may not send as this sender, with
	// this configuration, or in a sandboxed account to this recipient).
	// Someone must change the permissions: release the claim, stop the
	// batch, retry with the longest backoff, alarm.
	ErrMailRefused = errors.New("mail service refused the sender's authorisation")
	// ErrMailAmbiguous: the request may have reached the mail service, but
	// its answer was lost (connection reset, timeout), so whether the email
	// left is unknown. A retry may send it a second time.
	ErrMailAmbiguous = errors.New("mail service may have accepted the email; its answer was lost")
)

// FieldError is one invalid input field.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// ValidationError lists every invalid field of an input. It is returned by the
// Validate methods of the input types; the HTTP layer answers 422. It
// matches ErrInvalidInput.
type ValidationError struct {
	Fields []FieldError
}

// ErrInvalidInput is the kind of every *ValidationError.
var ErrInvalidInput = errors.New("invalid input")

// Is makes errors.Is(err, ErrInvalidInput) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalidInput }

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
