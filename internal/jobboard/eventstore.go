package jobboard

import (
	"context"
	"errors"
	"time"
)

// ErrEventBusy means another worker holds the claim of the same event and
// did not finish within the lock timeout. Retry later; the other worker may
// still roll back.
var ErrEventBusy = errors.New("event is being processed by another worker")

// EventOutcome is what handling one status event came to. It is recorded
// with the claim and logged on every line about the event.
type EventOutcome string

// The outcomes of handling a status event.
const (
	// OutcomeSent: claimed, emailed, committed.
	OutcomeSent EventOutcome = "sent"
	// OutcomeDuplicate: an earlier delivery of the event has been handled.
	OutcomeDuplicate EventOutcome = "duplicate"
	// OutcomePayloadMismatch: the event id has been handled, but that
	// delivery carried a different payload. Not emailed; worth an ERROR,
	// since one event id must never describe two changes.
	OutcomePayloadMismatch EventOutcome = "payload_mismatch"
	// OutcomeApplicationMissing: the application was deleted before the
	// event was handled. The claim is kept so redeliveries skip fast.
	OutcomeApplicationMissing EventOutcome = "application_missing"
	// OutcomeRejected: the mail service refused the email for good. The
	// claim is kept so the event is not retried forever.
	OutcomeRejected EventOutcome = "rejected"
)

// ApplicationDetails is what the status email needs to know about an
// application, loaded in one query with its job, company and candidate.
type ApplicationDetails struct {
	ApplicationID  int64
	Status         ApplicationStatus
	CandidateEmail string
	CandidateName  string
	JobTitle       string
	CompanyName    string
}

// EventStore records which status events have been handled.
type EventStore interface {
	// ProcessStatusEvent handles one delivery of ev in one transaction:
	// it claims ev.EventID, loads the application and calls send with it.
	// payloadHash identifies the event's content, so that a second event
	// reusing an id is told apart from a redelivery.
	//
	// A nil error from send commits the claim (OutcomeSent); an error
	// wrapping ErrMailRejected commits it too (OutcomeRejected, nil error);
	// any other error from send rolls the claim back and is returned
	// wrapped, so a redelivery can try again. Send is not called for a
	// duplicate, a payload mismatch or a missing application.
	//
	// Errors: ErrEventBusy when another transaction holds the claim longer
	// than the lock timeout; database errors.
	ProcessStatusEvent(ctx context.Context, ev Event, payloadHash []byte,
		send func(ctx context.Context, d ApplicationDetails) error) (EventOutcome, error)
}

// OutboxStore is the outbox of status events, and the retention of the
// records the event pipeline leaves behind.
type OutboxStore interface {
	// MarkPublished records that the queue accepted the events.
	// Errors: database errors.
	MarkPublished(ctx context.Context, eventIDs []string) error
	// PublishPending locks up to limit events that have stayed unpublished
	// for at least olderThan, skipping rows another sweeper has locked, and
	// calls publish with them inside the transaction; the ids publish
	// returns are marked published. It returns how many events it locked
	// and how many it marked. An error from publish rolls back and is
	// returned wrapped. Errors: database errors.
	PublishPending(ctx context.Context, olderThan time.Duration, limit int,
		publish func(ctx context.Context, events []Event) (accepted []string, err error)) (locked, published int, err error)
	// DeleteProcessedEvents deletes claims older than olderThan, at most
	// batch rows per statement, and returns how many it deleted.
	// Errors: database errors.
	DeleteProcessedEvents(ctx context.Context, olderThan time.Duration, batch int) (int64, error)
	// DeletePublishedOutbox deletes outbox rows published more than
	// olderThan ago, at most batch rows per statement, and returns how many
	// it deleted. Unpublished rows are never deleted. Errors: database errors.
	DeletePublishedOutbox(ctx context.Context, olderThan time.Duration, batch int) (int64, error)
}
