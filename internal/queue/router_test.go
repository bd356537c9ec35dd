package queue_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/queue"
)

func deliveryEvent(id string) jobboard.Event {
	return jobboard.Event{Type: jobboard.EventTypeWebhookDelivery, EventID: id, OccurredAt: time.Now(), DeliveryID: 1, Generation: 1}
}

// Each event reaches the queue of its type, and only that one.
func TestRouterSendsEachEventToItsQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	status, hooks := newQueue(t, 30, 3), newQueue(t, 30, 3)
	r := queue.Router{Status: queue.NewPublisher(status.client, status.url), Webhooks: queue.NewPublisher(hooks.client, hooks.url)}
	email, hook := newEvent(jobboard.StatusReviewing), deliveryEvent("00000000-0000-4000-9000-000000000001")
	accepted, err := r.Publish(ctx, []jobboard.Event{email, hook})
	if err != nil || !slices.Contains(accepted, email.EventID) || !slices.Contains(accepted, hook.EventID) {
		t.Fatalf("Publish = %v, %v", accepted, err)
	}
	for _, q := range []struct {
		url  string
		want string
	}{{status.url, email.EventID}, {hooks.url, hook.EventID}} {
		if n, _ := localaws.QueueDepth(ctx, status.client, q.url); n != 1 {
			t.Errorf("queue %s holds %d messages, want 1", q.url, n)
		}
	}
}

// A queue that fails leaves its events out of accepted; the other's count.
// Webhook events without a webhook queue are refused, not dropped.
func TestRouterWhenAQueueFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	status := newQueue(t, 30, 3)
	good := queue.NewPublisher(status.client, status.url)
	missing := queue.NewPublisher(status.client, status.url+"-missing")
	email, hook := newEvent(jobboard.StatusReviewing), deliveryEvent("00000000-0000-4000-9000-000000000002")

	accepted, err := queue.Router{Status: good, Webhooks: missing}.Publish(ctx, []jobboard.Event{email, hook})
	if err != nil || !slices.Equal(accepted, []string{email.EventID}) {
		t.Errorf("webhook queue failing: %v, %v; want only the status event", accepted, err)
	}
	if accepted, err := (queue.Router{Status: good}).Publish(ctx, []jobboard.Event{hook}); err == nil || len(accepted) != 0 {
		t.Errorf("no webhook queue: %v, %v; want an error", accepted, err)
	}
	if accepted, err := (queue.Router{Status: missing, Webhooks: missing}).Publish(ctx, []jobboard.Event{email, hook}); err == nil || len(accepted) != 0 {
		t.Errorf("both failing: %v, %v; want an error", accepted, err)
	}
}
