package jobboard

import (
	"context"
	"errors"
)

// Mail error kinds, returned (wrapped) by Mailer implementations. Any other
// error from a Mailer is retryable.
var (
	// ErrMailThrottled: the mail service asks us to slow down. Roll back and
	// stop starting new work in this batch.
	ErrMailThrottled = errors.New("mail service throttled the send")
	// ErrMailRejected: the mail service refused this email for good (bad
	// address, unverified sender, suspended account). Retrying cannot help.
	ErrMailRejected = errors.New("mail service rejected the email permanently")
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

// Mailer sends status emails.
type Mailer interface {
	// SendStatusEmail sends one email and returns the provider's message id.
	// Errors wrap ErrMailThrottled or ErrMailRejected where those apply;
	// every other error is worth a retry.
	SendStatusEmail(ctx context.Context, e StatusEmail) (messageID string, err error)
}

// EventRelay passes a committed status event on to the queue right after the
// transaction that wrote it, and marks its outbox row published.
type EventRelay interface {
	// Relay publishes the event and marks it published. An error leaves the
	// outbox row unpublished, for the sweeper; the status change itself is
	// already committed.
	Relay(ctx context.Context, ev Event) error
}
