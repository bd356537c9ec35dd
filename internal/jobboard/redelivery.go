package jobboard

import (
	"context"
	"time"
)

// Redelivery is a queue message to deliver again after a delay: the backoff
// of a record that failed.
type Redelivery struct {
	MessageID     string
	ReceiptHandle string
	After         time.Duration
}

// Redeliverer schedules the next delivery of failed queue messages,
// instead of leaving them to the queue's visibility timeout.
type Redeliverer interface {
	// Redeliver makes each message visible again after its delay.
	// Errors: the queue refused some or all; those keep their visibility.
	Redeliver(ctx context.Context, rs []Redelivery) error
}

// Requeue is a queue message to send again as a new message, delivered
// after a delay, the one received being done: a record put off without
// being attempted, whose wait must not count as a receive toward the
// dead-letter queue (a new message starts its count afresh).
type Requeue struct {
	MessageID string
	Body      string
	// Attributes are the message's String attributes.
	Attributes map[string]string
	After      time.Duration
}

// Requeuer sends messages again, each as a new message after its delay.
type Requeuer interface {
	// Requeue sends each message again. Errors: the queue refused some or
	// all; those were not sent.
	Requeue(ctx context.Context, rs []Requeue) error
}
