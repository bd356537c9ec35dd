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

// Each event reaches the queue of its type, and only that one: account
// mail its own queue, or the status queue when there is none.
func TestRouterSendsEachEventToItsQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	status, hooks, account := newQueue(t, 30, 3), newQueue(t, 30, 3), newQueue(t, 30, 3)
	r := queue.Router{Status: queue.NewPublisher(status.client, status.url), Webhooks: queue.NewPublisher(hooks.client, hooks.url),
		Account: queue.NewPublisher(account.client, account.url)}
	email, hook := newEvent(jobboard.StatusReviewing), deliveryEvent("00000000-0000-4000-9000-000000000001")
	reset := jobboard.Event{Type: jobboard.EventTypePasswordResetRequested, EventID: "00000000-0000-4000-9000-000000000003", OccurredAt: time.Now(), UserID: 7}
	accepted, err := r.Publish(ctx, []jobboard.Event{email, hook, reset})
	if err != nil || len(accepted) != 3 {
		t.Fatalf("Publish = %v, %v", accepted, err)
	}
	for _, q := range []struct {
		url  string
		want int
	}{{status.url, 1}, {hooks.url, 1}, {account.url, 1}} {
		if n, _ := localaws.QueueDepth(ctx, status.client, q.url); n != q.want {
			t.Errorf("queue %s holds %d messages, want %d", q.url, n, q.want)
		}
	}
	r.Account = nil
	if accepted, err := r.Publish(ctx, []jobboard.Event{reset}); err != nil || !slices.Equal(accepted, []string{reset.EventID}) {
		t.Fatalf("no account queue: Publish = %v, %v", accepted, err)
	}
	if n, _ := localaws.QueueDepth(ctx, status.client, status.url); n != 2 {
		t.Errorf("no account queue: the status queue holds %d messages, want 2", n)
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
