package jobboard

import (
	"context"
	"strings"
	"time"
)

// OutcomeSuppressed is the outcome of an email whose recipient's address
// is on the suppression list (a hard bounce or a complaint came back for
// it): not sent, the claim finished; the rule working as meant, not a
// fault.
const OutcomeSuppressed EventOutcome = "suppressed"

// FeedbackKind is what the mail service reported about one email.
type FeedbackKind string

// The kinds of delivery feedback the project acts on. Other SES event
// types (opens, clicks, rejects, delays) are acknowledged and ignored.
const (
	// FeedbackSent: the mail service accepted the email for delivery.
	FeedbackSent FeedbackKind = "sent"
	// FeedbackDelivered: the recipient's mail server accepted it.
	FeedbackDelivered FeedbackKind = "delivered"
	// FeedbackBounced: a permanent ("hard") bounce: the address does not
	// exist or refuses mail for good. Suppresses the address.
	FeedbackBounced FeedbackKind = "bounced"
	// FeedbackSoftBounced: a transient bounce (mailbox full, message too
	// large, a temporary refusal). Counted, not suppressing.
	FeedbackSoftBounced FeedbackKind = "soft_bounced"
	// FeedbackComplained: the recipient marked the email as spam.
	// Suppresses the address.
	FeedbackComplained FeedbackKind = "complained"
	// FeedbackIgnored: an event type the project does not act on.
	FeedbackIgnored FeedbackKind = "ignored"
)

// Feedback is one delivery event of the mail service, decoded.
type Feedback struct {
	// ID identifies the event itself, the same for every copy of it: the
	// idempotency key of applying it.
	ID   string
	Kind FeedbackKind
	// MessageID is the mail service's id of the email (SendEmail's answer).
	MessageID string
	// EventID is the email's event_id tag: the event it emailed ("" when
	// the email carried none).
	EventID string
	// Recipients are the addresses the feedback is about, lower-cased.
	Recipients []string
	// At is when the mail service says it happened.
	At time.Time
	// Detail says more, for the record: the bounce's type and subtype, the
	// complaint's feedback type.
	Detail string
}

// SuppressionReason is why an address is suppressed.
type SuppressionReason string

// The reasons an address is on the suppression list.
const (
	SuppressedByBounce    SuppressionReason = "bounce"
	SuppressedByComplaint SuppressionReason = "complaint"
)

// Suppression is an address on the project's suppression list.
type Suppression struct {
	Email        string
	Reason       SuppressionReason
	Detail       string
	SESMessageID string
	Since        time.Time
}

// Blocks reports whether the suppression stops an email of the event type
// to an address that its account verified at verifiedAt (zero: never, or
// not known). A complaint stops every email but one: the verification
// link of an account that had verified the address before the complaint.
// Following it is how the owner shows that the address is still theirs
// before withdrawing the complaint (SuppressionWrites), so that whoever
// registers an address that complained can neither lift the complaint nor
// mail it a link. A bounce stops every email but the ones the owner of the
// address asks for themselves, the verification and the password reset
// links: following a verification link is how a bounce suppression is
// lifted, and a wrong address costs one bounce at most.
func (s Suppression) Blocks(eventType string, verifiedAt time.Time) bool {
	if s.Reason == SuppressedByComplaint {
		return eventType != EventTypeEmailVerificationRequested || verifiedAt.IsZero() || !verifiedAt.Before(s.Since)
	}
	return eventType != EventTypeEmailVerificationRequested && eventType != EventTypePasswordResetRequested
}

// FeedbackResult is what applying one feedback event did.
type FeedbackResult struct {
	// Duplicate: the event had been applied already; nothing changed.
	Duplicate bool
	// Suppressed are the addresses this event put on the suppression list
	// (or moved from bounce to complaint).
	Suppressed []string
}

// FeedbackStore records delivery feedback.
type FeedbackStore interface {
	// ApplyFeedback records f once, by f.ID, in one transaction: the
	// delivery state of the email, and for a hard bounce or a complaint
	// the suppression of its recipients (a soft bounce is counted).
	// Errors: database errors (then nothing is recorded).
	ApplyFeedback(ctx context.Context, f Feedback) (FeedbackResult, error)
}

// SuppressionList tells whether an address is suppressed.
type SuppressionList interface {
	// Suppression returns the address's suppression, if any (found false
	// when it is deliverable). Errors: database errors.
	Suppression(ctx context.Context, email string) (s Suppression, found bool, err error)
}

// SuppressionWrites is the one lift of the suppression list that is an
// account owner's to ask for, a write of jobboard.Writes (so that a keyed
// request makes it in its one transaction).
type SuppressionWrites interface {
	// WithdrawComplaint lifts the complaint suppression of the actor's own
	// address, in one statement that finds the address through the actor's
	// account (so no other address can be named) with a live session, and
	// returns the address's delivery after it. Only an account that
	// verified the address after the complaint lifts it: having the address
	// is not owning it, since anyone can register any address. A bounce
	// suppression is left as it is: following a verification link lifts
	// it. Errors: ErrNotSuppressed (nothing to lift: a second call ends
	// here), ErrVerificationRequired, ErrSuppressedByBounce,
	// ErrSessionRevoked, ErrNotFound (the account is gone), database
	// errors.
	WithdrawComplaint(ctx context.Context, actor Actor) (AddressDelivery, error)
}

// NormalizeEmail is the form addresses are stored and compared in:
// trimmed and lower-cased.
func NormalizeEmail(email string) string {
	return strings.ToLower(strings.TrimSpace(email))
}

// EmailDelivery is what became of the email about one event, as its
// recipient may see it.
type EmailDelivery struct {
	// State is pending (not handled yet), sent, delivered, bounced,
	// complained, or not_sent (Reason says why: the worker's outcome,
	// such as suppressed or recipient_unverified).
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
}

// AddressDelivery is whether email can reach an account's address.
type AddressDelivery struct {
	Deliverable bool `json:"deliverable"`
	// Reason (bounce or complaint) and Since say why not.
	Reason SuppressionReason `json:"reason,omitempty"`
	Since  *time.Time        `json:"since,omitempty"`
}
