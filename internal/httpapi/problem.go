package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// ProblemBase is the prefix of every problem type URI this API answers with.
// The URIs identify problem kinds; they need not resolve.
const ProblemBase = "https://jobboard.example/problems/"

// Problem kinds, appended to ProblemBase to form the "type" member.
const (
	kindBadRequest           = "bad-request"
	kindUnauthenticated      = "unauthenticated"
	kindInvalidCredentials   = "invalid-credentials"
	kindForbidden            = "forbidden"
	kindNotFound             = "not-found"
	kindMethodNotAllowed     = "method-not-allowed"
	kindEmailTaken           = "email-taken"
	kindDuplicateApplication = "duplicate-application"
	kindJobClosed            = "job-closed"
	kindInvalidTransition    = "invalid-transition"
	kindPreconditionFailed   = "precondition-failed"
	kindBodyTooLarge         = "body-too-large"
	kindValidation           = "validation"
	kindInternal             = "internal"
	kindUnavailable          = "unavailable"
	kindQueryTimeout         = "query-timeout"
	kindTooManyAttempts      = "too-many-attempts"
	kindIdempotencyKeyInUse  = "idempotency-key-in-use"
	kindIdempotencyKeyReused = "idempotency-key-reused"
	kindBusy                 = "busy"

	kindAlreadyVerified          = "already-verified"
	kindInvalidVerificationToken = "invalid-verification-token"
	kindVerificationTokenExpired = "verification-token-expired"
	kindVerificationTokenUsed    = "verification-token-used"
	kindTooManyVerification      = "too-many-verification-emails"

	kindNotSuppressed        = "not-suppressed"
	kindSuppressedByBounce   = "suppressed-by-bounce"
	kindVerificationRequired = "verification-required"

	kindInvalidResetToken = "invalid-password-reset-token"
	kindResetTokenExpired = "password-reset-token-expired"
	kindResetTokenUsed    = "password-reset-token-used"

	kindTooManyWebhookEndpoints  = "too-many-webhook-endpoints"
	kindWebhookEndpointDisabled  = "webhook-endpoint-disabled"
	kindTooManyWebhookDispatches = "too-many-webhook-dispatches"
	kindTooManyCompanies         = "too-many-companies"
)

// problem is an RFC 9457 problem details object. Errors (field-level detail)
// and RequestID are extension members.
type problem struct {
	Type      string                `json:"type"`
	Title     string                `json:"title"`
	Status    int                   `json:"status"`
	Detail    string                `json:"detail,omitempty"`
	Instance  string                `json:"instance,omitempty"`
	Errors    []jobboard.FieldError `json:"errors,omitempty"`
	RequestID string                `json:"request_id,omitempty"`

	// MoreErrors counts the errors left out of Errors (see capEchoes).
	MoreErrors int `json:"more_errors,omitempty"`
}

// Bounds on what a problem echoes of the caller's input, so that an answer
// is never much larger than the request that caused it (7,000 unknown query
// parameters once made a 436 KiB answer to a 48 KB request): at most
// maxEchoedErrors field errors, each naming at most maxEchoedNameLen bytes
// of the field, then a count of the rest. Eight is more than any input of
// the API can have invalid at once (a job has seven fields).
const (
	maxEchoedErrors  = 8
	maxEchoedNameLen = 64
)

// capEchoes applies the bounds to p.Errors: the first maxEchoedErrors,
// each field name cut to maxEchoedNameLen bytes (at a rune boundary, "…"
// added), and the number of the others in MoreErrors.
func (p *problem) capEchoes() {
	if len(p.Errors) > maxEchoedErrors {
		p.MoreErrors = len(p.Errors) - maxEchoedErrors
		p.Errors = p.Errors[:maxEchoedErrors]
	}
	p.Errors = slices.Clone(p.Errors) // the error's own list stays as it was
	for i, f := range p.Errors {
		if len(f.Field) <= maxEchoedNameLen {
			continue
		}
		cut := maxEchoedNameLen
		for cut > 0 && !utf8.RuneStart(f.Field[cut]) {
			cut--
		}
		p.Errors[i].Field = f.Field[:cut] + "…"
	}
}

// requestError is a request the API cannot read: malformed JSON, an unknown
// field, a bad path id, query parameter, cursor or header. It answers 400.
type requestError struct {
	detail string
	fields []jobboard.FieldError
	cause  error
}

func (e *requestError) Error() string {
	if e.cause != nil {
		return e.detail + ": " + e.cause.Error()
	}
	return e.detail
}

func (e *requestError) Unwrap() error { return e.cause }

// badRequest returns a *requestError; field, when not empty, names the part
// of the request at fault (a JSON member, a query parameter, a header).
func badRequest(field, detail string) *requestError {
	e := &requestError{detail: detail}
	if field != "" {
		e.fields = []jobboard.FieldError{{Field: field, Detail: detail}}
	}
	return e
}

// The HTTP layer's own error kinds, beside the domain's (package jobboard).
var (
	// errBadRequest is the kind of every *requestError.
	errBadRequest = errors.New("bad request")
	// errBodyTooLarge: the body is larger than maxBodyBytes.
	errBodyTooLarge = errors.New("request body too large")
	// errKeyReused: an Idempotency-Key sent again with another request.
	errKeyReused = errors.New("idempotency key reused with another request")
	// errWebhooksOff, errEmailDeliveryOff, errNoDatabase: the server is
	// configured without webhooks, the suppression list, a database.
	errWebhooksOff      = errors.New("webhooks are not configured")
	errEmailDeliveryOff = errors.New("the suppression list is not configured")
	errNoDatabase       = errors.New("no database is configured")
	// errDatabaseDown: the database does not answer a ping.
	errDatabaseDown = errors.New("the database does not answer")
)

// Is makes errors.Is(err, errBadRequest) true.
func (e *requestError) Is(target error) bool { return target == errBadRequest }

// problemKinds is the one table from the errors a handler returns to the
// problems they answer: the domain's kinds and the HTTP layer's own.
// problemFor walks it in order with errors.Is, and the first row that
// matches wins. An empty detail is the kind's own text; fill, when set,
// takes from the error what it carries (its fields, its own detail).
var problemKinds = []struct {
	err    error
	status int
	kind   string
	detail string
	fill   func(err error, p *problem)
}{
	{jobboard.ErrTooManyAttempts, http.StatusTooManyRequests, kindTooManyAttempts,
		"Too many failed attempts from your network; wait for the time given in Retry-After.", nil},
	{errHashBusy, http.StatusServiceUnavailable, kindBusy,
		"The server is busy checking other passwords; retry after the time given in Retry-After.", nil},
	{jobboard.ErrVerificationThrottled, http.StatusTooManyRequests, kindTooManyVerification,
		"A verification email was sent to this address recently; wait for the time given in Retry-After.", nil},
	{jobboard.ErrUnsearchable, http.StatusBadRequest, kindBadRequest, "The query string has invalid parameters.",
		func(_ error, p *problem) {
			p.Errors = []jobboard.FieldError{{Field: "q", Detail: "needs a word to search for: words after - only exclude, and cannot be searched alone"}}
		}},
	// The database's statement timeout, or the request's own deadline (in
	// Lambda, set before the function's timeout so that the API answers
	// instead of being cut off).
	{jobboard.ErrTimeout, http.StatusServiceUnavailable, kindQueryTimeout, timeoutDetail, nil},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, kindQueryTimeout, timeoutDetail, nil},
	{errBodyTooLarge, http.StatusRequestEntityTooLarge, kindBodyTooLarge, "The request body is larger than 1 MiB.", nil},
	{jobboard.ErrInvalidInput, http.StatusUnprocessableEntity, kindValidation, "The input has invalid fields.",
		func(err error, p *problem) {
			var ve *jobboard.ValidationError
			if errors.As(err, &ve) {
				p.Errors = ve.Fields
			}
		}},
	{errBadRequest, http.StatusBadRequest, kindBadRequest, "", func(err error, p *problem) {
		var re *requestError
		if errors.As(err, &re) {
			p.Detail, p.Errors = re.detail, re.fields
		}
	}},
	{errKeyReused, http.StatusUnprocessableEntity, kindIdempotencyKeyReused,
		"This Idempotency-Key was used with a different request (method, path, If-Match or body); use a new key for a new request.", nil},
	{errWebhooksOff, http.StatusServiceUnavailable, kindUnavailable, "Webhooks are not configured on this server.", nil},
	{errEmailDeliveryOff, http.StatusServiceUnavailable, kindUnavailable, "The suppression list is not configured on this server.", nil},
	{errNoDatabase, http.StatusServiceUnavailable, kindUnavailable, "No database is configured.", nil},
	{errDatabaseDown, http.StatusServiceUnavailable, kindUnavailable, "The database does not answer.", nil},
	{jobboard.ErrInvalidTransition, http.StatusConflict, kindInvalidTransition, "", func(err error, p *problem) {
		var te *jobboard.TransitionError
		if errors.As(err, &te) {
			p.Detail = te.Error() + "."
		}
	}},
	{jobboard.ErrNotFound, http.StatusNotFound, kindNotFound, "The resource does not exist or is not visible to you.", nil},
	{jobboard.ErrSessionRevoked, http.StatusUnauthorized, kindUnauthenticated,
		"The account's password was reset after this token was issued; sign in again.", nil},
	{jobboard.ErrUnauthenticated, http.StatusUnauthorized, kindUnauthenticated, "A valid bearer token is required.", nil},
	{jobboard.ErrInvalidCredentials, http.StatusUnauthorized, kindInvalidCredentials, "The email or password is wrong.", nil},
	{jobboard.ErrForbidden, http.StatusForbidden, kindForbidden, "Your role may not do this.", nil},
	{jobboard.ErrEmailTaken, http.StatusConflict, kindEmailTaken, "An account with this email exists.", nil},
	{jobboard.ErrDuplicateApplication, http.StatusConflict, kindDuplicateApplication, "You have applied to this job already.", nil},
	{jobboard.ErrJobClosed, http.StatusConflict, kindJobClosed, "The job no longer accepts applications.", nil},
	{jobboard.ErrPreconditionFailed, http.StatusPreconditionFailed, kindPreconditionFailed,
		"The application has changed since you read it (If-Match is stale).", nil},
	{jobboard.ErrIdempotencyKeyInUse, http.StatusConflict, kindIdempotencyKeyInUse,
		"A request with this Idempotency-Key is still in progress; retry it after a moment to get its answer.", nil},
	{jobboard.ErrAlreadyVerified, http.StatusConflict, kindAlreadyVerified, "Your email address is verified already.", nil},
	{jobboard.ErrNotSuppressed, http.StatusConflict, kindNotSuppressed,
		"Email reaches your address already: there is no complaint to withdraw.", nil},
	{jobboard.ErrVerificationRequired, http.StatusConflict, kindVerificationRequired,
		"Show that the address is yours first: ask for a verification email (POST /v1/auth/resend-verification), follow its link, then withdraw the complaint.", nil},
	{jobboard.ErrSuppressedByBounce, http.StatusConflict, kindSuppressedByBounce,
		"Your address bounced; a withdrawn complaint does not change that. Ask for a verification email (POST /v1/auth/resend-verification) and follow its link.", nil},
	{jobboard.ErrVerificationTokenInvalid, http.StatusBadRequest, kindInvalidVerificationToken,
		"The verification link is not valid (a newer email may have replaced it); sign in and ask for a new one.", nil},
	{jobboard.ErrVerificationTokenExpired, http.StatusGone, kindVerificationTokenExpired,
		"The verification link has expired; sign in and ask for a new one.", nil},
	{jobboard.ErrVerificationTokenUsed, http.StatusGone, kindVerificationTokenUsed,
		"The verification link has been used already.", nil},
	{jobboard.ErrPasswordResetTokenInvalid, http.StatusBadRequest, kindInvalidResetToken,
		"The password reset link is not valid; ask for a new one.", nil},
	{jobboard.ErrPasswordResetTokenExpired, http.StatusGone, kindResetTokenExpired,
		"The password reset link has expired; ask for a new one.", nil},
	{jobboard.ErrPasswordResetTokenUsed, http.StatusGone, kindResetTokenUsed,
		"The password reset link has been used, or the password has been reset since it was sent.", nil},
	{jobboard.ErrTooManyWebhookEndpoints, http.StatusConflict, kindTooManyWebhookEndpoints,
		fmt.Sprintf("The company has the most webhook endpoints allowed (%d); delete one first.", jobboard.MaxWebhookEndpoints), nil},
	{jobboard.ErrTooManyCompanies, http.StatusConflict, kindTooManyCompanies,
		fmt.Sprintf("You have created the most companies allowed (%d).", jobboard.MaxCompaniesPerEmployer), nil},
	{jobboard.ErrTooManyWebhookDispatches, http.StatusTooManyRequests, kindTooManyWebhookDispatches,
		"Too many pings and replays of this endpoint or company lately; wait for the time given in Retry-After.", nil},
	{jobboard.ErrWebhookEndpointDisabled, http.StatusConflict, kindWebhookEndpointDisabled,
		"The webhook endpoint is disabled; enable it (PATCH enabled: true) first.", nil},
}

const timeoutDetail = "The request took too long to answer and was stopped; try again later, or narrow the search."

// problemFor turns any error a handler returns into the problem to answer
// (problemKinds). It is the one place where errors become statuses. The
// bool reports an unexpected error: the caller logs its cause at ERROR,
// and the client sees only a generic detail.
func problemFor(err error) (problem, bool) {
	for _, k := range problemKinds {
		if !errors.Is(err, k.err) {
			continue
		}
		detail := k.detail
		if detail == "" {
			detail = capitalize(k.err.Error()) + "."
		}
		p := newProblem(k.status, k.kind, detail)
		if k.fill != nil {
			k.fill(err, &p)
		}
		return p, false
	}
	return newProblem(http.StatusInternalServerError, kindInternal,
		"Something went wrong on our side; the request id identifies it in our logs."), true
}

func newProblem(status int, kind, detail string) problem {
	return problem{Type: ProblemBase + kind, Title: http.StatusText(status), Status: status, Detail: detail}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
