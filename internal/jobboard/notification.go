package jobboard

import (
	"context"
	"errors"
)

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

// StatusEmail is what the candidate is told about a status change.
type StatusEmail struct {
	EventID       string
	To            string
	CandidateName string
	JobTitle      string
	CompanyName   string
	ApplicationID int64
	OldStatus     ApplicationStatus
	NewStatus     ApplicationStatus
}

// Mailer sends the worker's emails. Each method sends one email, once (no
// retries of its own), and returns the provider's message id. Errors wrap
// ErrMailThrottled, ErrMailPaused, ErrMailRejected, ErrMailRefused or
// ErrMailAmbiguous where those apply; any other error means the email was
// not sent.
type Mailer interface {
	// SendStatusEmail sends a status email.
	SendStatusEmail(ctx context.Context, e StatusEmail) (messageID string, err error)
	// SendVerificationEmail sends the link that verifies an address.
	SendVerificationEmail(ctx context.Context, e VerificationEmail) (messageID string, err error)
	// SendPasswordResetEmail sends the link that resets a password.
	SendPasswordResetEmail(ctx context.Context, e PasswordResetEmail) (messageID string, err error)
}

// EventRelay passes a committed event on to the queue right after the
// transaction that wrote it, and marks its outbox row published.
type EventRelay interface {
	// Relay publishes the event and marks it published. An error leaves the
	// outbox row unpublished, for the sweeper; the change itself is already
	// committed.
	Relay(ctx context.Context, ev Event) error
}
