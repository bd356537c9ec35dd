package jobboard

import (
	"context"
	"time"
)

// EventOutcome is what handling one event came to. A finished claim records
// it; every log line about the event carries it.
type EventOutcome string

// The outcomes a claim can be finished with, and those of ClaimEvent that
// leave the caller nothing to send.
const (
	// OutcomeSent: claimed, emailed, recorded.
	OutcomeSent EventOutcome = "sent"
	// OutcomeDuplicate: the event's claim is finished already (any outcome).
	OutcomeDuplicate EventOutcome = "duplicate"
	// OutcomeBusy: another worker holds a live lease on the event. Retry
	// after the lease ends; that worker may still release it.
	OutcomeBusy EventOutcome = "busy"
	// OutcomePayloadMismatch: the event id is claimed with a different
	// payload. Not emailed; worth an ERROR, since one event id must never
	// describe two changes.
	OutcomePayloadMismatch EventOutcome = "payload_mismatch"
	// OutcomeApplicationMissing: the application was deleted before the
	// event was handled. The claim is finished so redeliveries skip fast.
	OutcomeApplicationMissing EventOutcome = "application_missing"
	// OutcomeRejected: the mail service refused this email for good. The
	// claim is finished so the event is not retried forever.
	OutcomeRejected EventOutcome = "rejected"
	// OutcomeRecipientUnverified: a status event whose candidate has not
	// verified their address. No email: its text is partly written by
	// other users, so it goes only to an owner-confirmed address. The
	// claim is finished; a later change, after verification, is emailed.
	OutcomeRecipientUnverified EventOutcome = "recipient_unverified"
	// OutcomeSuperseded: a status event older (by Event.Version) than a
	// status of the same application that has been emailed or is being
	// emailed. No email: the candidate must never be told an older status
	// after a newer one, and the newer email tells them where the
	// application is. The claim is finished.
	OutcomeSuperseded EventOutcome = "superseded"
	// OutcomeAlreadyVerified: a verification event whose account is
	// verified by now. No email; the claim is finished.
	OutcomeAlreadyVerified EventOutcome = "already_verified"
	// OutcomeUserMissing: a verification event whose account no longer
	// exists. The claim is finished.
	OutcomeUserMissing EventOutcome = "user_missing"
	// OutcomeNoAccount: a password reset event for an address that no
	// account had when it was asked for (the API queues those too, so that
	// its answer does not tell), or whose account is gone. No email; the
	// claim is finished.
	OutcomeNoAccount EventOutcome = "no_account"
)

// ApplicationDetails is what the status email needs to know about an
// application, loaded with its job, company and candidate.
type ApplicationDetails struct {
	ApplicationID  int64
	Status         ApplicationStatus
	CandidateEmail string
	CandidateName  string
	JobTitle       string
	CompanyName    string
}

// Claim is what step one of handling an event came to.
type Claim struct {
	// Outcome is empty when this worker now owns the event and must send
	// it; otherwise it is why there is nothing to send: OutcomeDuplicate,
	// OutcomeBusy (another worker holds the event, or the email of an
	// older status of the same application), OutcomePayloadMismatch, or a
	// claim finished at once: OutcomeApplicationMissing,
	// OutcomeRecipientUnverified, OutcomeSuperseded (status events), OutcomeUserMissing, OutcomeAlreadyVerified (verification
	// events), OutcomeNoAccount (password reset events).
	Outcome EventOutcome
	// Token is the lease token of an owned claim; FinishClaim and
	// ReleaseClaim need it.
	Token string
	// BusyFor is, for OutcomeBusy, how long the other worker's lease has
	// left: the latest moment worth retrying.
	BusyFor time.Duration
	// BusyOrder is, for OutcomeBusy, true when what is held is not this
	// event but the email of an older status of the same application: it
	// is likely to be over in moments (when that email is recorded),
	// long before its lease ends.
	BusyOrder bool
	// Attempts counts the leases the event has had, this one included: more
	// than one means an earlier worker's lease expired and was taken over.
	Attempts int
	// Application is the application of a status event that is owned.
	Application ApplicationDetails
	// Recipient is, for an owned verification or password reset event,
	// the address and the fresh token of its link (made by this claim; an
	// earlier attempt's token no longer works).
	Recipient RecipientDetails
}

// Finish is the outcome of an owned claim: OutcomeSent with the mail
// service's message id, or OutcomeRejected.
type Finish struct {
	EventID           string
	Token             string
	Outcome           EventOutcome
	ProviderMessageID string
}

// EventStore records which events have been handled, in three steps: claim
// (a short transaction), then the caller sends with no transaction open,
// then finish or release (a short transaction each).
type EventStore interface {
	// ClaimEvent claims ev.EventID with a lease of the given length: a new
	// claim, or the take-over of a claim whose lease expired. An owned
	// claim comes with what the email needs; for a verification or a
	// password reset event that includes a new token, whose hash the claim
	// stores. See Claim for the outcomes; OutcomeApplicationMissing,
	// OutcomeRecipientUnverified, OutcomeSuperseded, OutcomeUserMissing,
	// OutcomeAlreadyVerified and OutcomeNoAccount finish the claim at once.
	// Errors: database errors, an event type it cannot claim.
	ClaimEvent(ctx context.Context, ev Event, lease time.Duration) (Claim, error)
	// FinishClaims records the outcomes of owned claims, all in one
	// statement. It returns the event ids whose token no longer holds the
	// claim (taken over, or released): those are left alone. Recording the
	// same outcome again under the same token succeeds. A status claim's
	// hold on its application's order ends with it. Errors: database
	// errors (then nothing is recorded).
	FinishClaims(ctx context.Context, fs []Finish) (lost []string, err error)
	// ReleaseClaim deletes an owned claim that did not lead to an email, so
	// that a retry can claim the event again; a status claim's hold on its
	// application's order ends with it. Errors: ErrLeaseLost when
	// token no longer holds the claim; database errors.
	ReleaseClaim(ctx context.Context, eventID, token string) error
}

// OutboxBacklog is what the outbox holds that has not reached the queue.
type OutboxBacklog struct {
	// Count is the number of unpublished (and unexpired) rows.
	Count int64
	// OldestAge is the age of the oldest of them; zero when Count is zero.
	OldestAge time.Duration
}

// OutboxStore is the outbox of events.
type OutboxStore interface {
	// MarkPublished records that the queue accepted the events.
	// Errors: database errors.
	MarkPublished(ctx context.Context, eventIDs []string) error
	// PublishPending locks up to limit events that have stayed unpublished
	// for at least grace and are at most maxAge old, skipping rows another
	// sweeper has locked, and calls publish with them inside the
	// transaction; the ids publish returns are marked published. It returns
	// how many events it locked and how many it marked. An error from
	// publish rolls back and is returned wrapped. Errors: database errors.
	PublishPending(ctx context.Context, grace, maxAge time.Duration, limit int,
		publish func(ctx context.Context, events []Event) (accepted []string, err error)) (locked, published int, err error)
	// ExpireUnpublished marks the unpublished events older than olderThan
	// as expired, so that they are never published, and returns their ids.
	// Errors: database errors.
	ExpireUnpublished(ctx context.Context, olderThan time.Duration) ([]string, error)
	// Backlog reports the unpublished, unexpired events.
	// Errors: database errors.
	Backlog(ctx context.Context) (OutboxBacklog, error)
}
