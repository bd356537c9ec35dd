// Package outbox moves committed status events from the outbox table to the
// queue. A status change writes its event to the outbox in its own
// transaction; then two paths publish it:
//
//   - Relay, the fast path: the API publishes the event right after the
//     commit and marks its row published.
//   - The sweeper (package sweeper), the safety net: a scheduled function
//     publishes the rows still unpublished after a grace period (the API
//     died between commit and publish, or SQS refused).
//
// Either path may publish an event twice (a crash after SendMessage, before
// the row is marked). The worker's claim on event_id absorbs that.
package outbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// DefaultRelayTimeout bounds one relay: the publish and the mark.
const DefaultRelayTimeout = 5 * time.Second

// Relay publishes a committed event and marks its outbox row published. It
// implements jobboard.EventRelay and is safe for concurrent use.
type Relay struct {
	publisher jobboard.EventPublisher
	store     jobboard.OutboxStore
	// Timeout bounds one Relay call; zero means DefaultRelayTimeout.
	Timeout time.Duration
}

var _ jobboard.EventRelay = (*Relay)(nil)

// NewRelay returns a Relay that publishes through p and marks rows in s.
func NewRelay(p jobboard.EventPublisher, s jobboard.OutboxStore) *Relay {
	return &Relay{publisher: p, store: s}
}

// Relay publishes ev, then marks it published. It runs even if ctx is
// cancelled (a client that hangs up after the commit must not stop the
// publish), bounded by Timeout. Errors: the publish failed or the queue
// refused the event (the row stays unpublished and the sweeper publishes it
// after its grace period); the mark failed (the event is in the queue and
// the sweeper will publish it once more, which the worker absorbs).
func (r *Relay) Relay(ctx context.Context, ev jobboard.Event) error {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultRelayTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()

	accepted, err := r.publisher.Publish(ctx, []jobboard.Event{ev})
	if err != nil {
		return fmt.Errorf("relay event %s: %w", ev.EventID, err)
	}
	if !slices.Contains(accepted, ev.EventID) {
		return fmt.Errorf("relay event %s: the queue refused it", ev.EventID)
	}
	if err := r.store.MarkPublished(ctx, []string{ev.EventID}); err != nil {
		return fmt.Errorf("relay event %s: published, but: %w", ev.EventID, err)
	}
	return nil
}
