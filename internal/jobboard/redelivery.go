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
