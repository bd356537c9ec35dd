package jobboard

import "context"

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
// ErrMailThrottled, ErrMailPaused, ErrMailRejected or ErrMailAmbiguous
// where those apply; any other error means the email was not sent.
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
