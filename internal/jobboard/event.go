package jobboard

import (
	"context"
	"time"
)

// EventTypeStatusChanged is the type of the event that every real status
// change emits, on the wire and in the SQS message attribute "type".
const EventTypeStatusChanged = "application.status_changed"

// StatusChangedEvent is written to the outbox in the transaction of a status
// change and travels to the worker through SQS. EventID identifies the change
// itself (not a delivery) and is the worker's idempotency key.
type StatusChangedEvent struct {
	Type          string            `json:"type"`
	EventID       string            `json:"event_id"`
	OccurredAt    time.Time         `json:"occurred_at"`
	ApplicationID int64             `json:"application_id"`
	OldStatus     ApplicationStatus `json:"old_status"`
	NewStatus     ApplicationStatus `json:"new_status"`
}

// EventPublisher sends status events to the queue.
type EventPublisher interface {
	// Publish sends events, at most ten per call, and returns the ids of the
	// ones the queue accepted. An error means none may have been accepted.
	Publish(ctx context.Context, events []StatusChangedEvent) (accepted []string, err error)
}
