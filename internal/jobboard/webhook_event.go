package jobboard

import (
	"context"
	"sync"
)

// The pipeline's webhook events. Each outbox row goes to one queue: the
// webhook deliveries to the webhook queue (the delivery function), the rest
// to the status events queue (the email worker). A change that both emails
// and calls webhooks writes one row for each (see docs/design.md).
const (
	// EventTypeWebhookDelivery asks the delivery function to attempt one
	// delivery (DeliveryID) of the dispatch Generation: written with the
	// change, by a replay or by a ping.
	EventTypeWebhookDelivery = "webhook.delivery_requested"
	// EventTypeWebhookEndpointDisabled asks the email worker to tell one
	// member (UserID) of a company (CompanyID) that an endpoint
	// (EndpointID) was disabled after failing for days. The email has a
	// fixed text.
	EventTypeWebhookEndpointDisabled = "webhook.endpoint_disabled"
)

func init() {
	requiredFields[EventTypeWebhookDelivery] = func(ev Event) string {
		switch {
		case ev.DeliveryID <= 0:
			return "missing or non-positive delivery_id"
		case ev.Generation <= 0:
			return "missing or non-positive generation"
		}
		return ""
	}
	requiredFields[EventTypeWebhookEndpointDisabled] = func(ev Event) string {
		switch {
		case ev.UserID <= 0:
			return "missing or non-positive user_id"
		case ev.EndpointID <= 0:
			return "missing or non-positive endpoint_id"
		case ev.CompanyID <= 0:
			return "missing or non-positive company_id"
		}
		return ""
	}
}

// ForWebhookQueue reports whether events of type typ go to the webhook
// queue rather than the status events queue.
func ForWebhookQueue(typ string) bool { return typ == EventTypeWebhookDelivery }

// OutboxNotes collects the events that store methods wrote to the outbox,
// so that the caller can relay them to their queue right after the commit.
// The notes are the fast path only: an event a method does not note, or
// that is never relayed, is published by the sweeper after its grace
// period, so nothing depends on them for correctness. Safe for concurrent
// use.
type OutboxNotes struct {
	mu     sync.Mutex
	events []Event
}

type outboxNotesKey struct{}

// WithOutboxNotes returns a context whose store writes note their outbox
// events in the returned OutboxNotes.
func WithOutboxNotes(ctx context.Context) (context.Context, *OutboxNotes) {
	n := &OutboxNotes{}
	return context.WithValue(ctx, outboxNotesKey{}, n), n
}

// NoteOutbox records events written to the outbox, when ctx carries
// OutboxNotes; otherwise it does nothing.
func NoteOutbox(ctx context.Context, evs ...Event) {
	n, _ := ctx.Value(outboxNotesKey{}).(*OutboxNotes)
	if n == nil || len(evs) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, evs...)
}

// Events returns the events noted so far.
func (n *OutboxNotes) Events() []Event {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Event(nil), n.events...)
}
