package queue_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/queue"
)

func TestPublishSendsTheWireFormat(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := newQueue(t, 30, 5)
	evs := []jobboard.Event{newEvent(jobboard.StatusReviewing), newEvent(jobboard.StatusInterview), newEvent(jobboard.StatusRejected)}

	accepted, err := queue.NewPublisher(q.client, q.url).Publish(ctx, evs)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if diff := cmp.Diff([]string{evs[0].EventID, evs[1].EventID, evs[2].EventID}, accepted); diff != "" {
		t.Errorf("accepted (-want +got):\n%s", diff)
	}

	byID := map[string]jobboard.Event{}
	for _, ev := range evs {
		byID[ev.EventID] = ev
	}
	for _, m := range receiveAll(t, q.client, q.url, len(evs)) {
		got, err := jobboard.DecodeEvent([]byte(aws.ToString(m.Body)))
		if err != nil {
			t.Fatalf("body %s: %v", aws.ToString(m.Body), err)
		}
		want, ok := byID[got.EventID]
		if !ok {
			t.Fatalf("unexpected event %s", got.EventID)
		}
		delete(byID, got.EventID)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("event (-want +got):\n%s", diff)
		}
		wantBody, err := jobboard.EncodeEvent(want)
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(m.Body) != string(wantBody) {
			t.Errorf("body = %s, want %s", aws.ToString(m.Body), wantBody)
		}
		attr, ok := m.MessageAttributes[queue.TypeAttribute]
		if !ok || aws.ToString(attr.DataType) != "String" || aws.ToString(attr.StringValue) != jobboard.EventTypeStatusChanged {
			t.Errorf("type attribute = %+v (present %v), want String %q", attr, ok, jobboard.EventTypeStatusChanged)
		}
	}
}

func TestPublishMoreThanTenIsRefused(t *testing.T) {
	t.Parallel()
	q := newQueue(t, 30, 5)
	evs := make([]jobboard.Event, 11)
	for i := range evs {
		evs[i] = newEvent(jobboard.StatusOffer)
	}
	accepted, err := queue.NewPublisher(q.client, q.url).Publish(context.Background(), evs)
	if !errors.Is(err, queue.ErrBatchTooLarge) {
		t.Fatalf("Publish(11) error = %v, want ErrBatchTooLarge", err)
	}
	if accepted != nil {
		t.Errorf("accepted = %v, want none", accepted)
	}
	if n := queueDepth(t, q.client, q.url); n != 0 {
		t.Errorf("queue holds %d messages, want 0", n)
	}
}

func TestPublishNothing(t *testing.T) {
	t.Parallel()
	q := newQueue(t, 30, 5)
	accepted, err := queue.NewPublisher(q.client, q.url).Publish(context.Background(), nil)
	if err != nil || accepted != nil {
		t.Errorf("Publish(nil) = %v, %v; want nil, nil", accepted, err)
	}
}

func TestPublishTenWithAwkwardIDs(t *testing.T) {
	t.Parallel()
	// Ten entries whose ids are not valid batch entry ids as they are, or
	// collide once sanitised, or repeat: all must still go in one batch.
	ids := []string{"a.b", "a_b", "a/b", "same", "same", "", strings.Repeat("x", 100), strings.Repeat("x", 100) + "y", "ünïcode", "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f"}
	evs := make([]jobboard.Event, len(ids))
	for i, id := range ids {
		evs[i] = newEvent(jobboard.StatusHired)
		evs[i].EventID = id
	}
	q := newQueue(t, 30, 5)
	accepted, err := queue.NewPublisher(q.client, q.url).Publish(context.Background(), evs)
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if diff := cmp.Diff(ids, accepted); diff != "" {
		t.Errorf("accepted (-want +got):\n%s", diff)
	}
	receiveAll(t, q.client, q.url, len(ids))
}

func TestPublishReportsOnlyWhatSQSAccepted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := newQueue(t, 30, 5)
	// The smallest maximum message size SQS allows, so that one oversized
	// event fails on its own while the rest of the batch goes through.
	_, err := q.client.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{
		QueueUrl:   aws.String(q.url),
		Attributes: map[string]string{"MaximumMessageSize": "1024"},
	})
	if err != nil {
		t.Fatalf("SetQueueAttributes: %v", err)
	}
	small1, big, small2 := newEvent(jobboard.StatusOffer), newEvent(jobboard.StatusOffer), newEvent(jobboard.StatusOffer)
	big.EventID = strings.Repeat("b", 1100)

	var log lines
	p := queue.NewPublisher(q.client, q.url)
	p.Logger = slog.New(slog.NewTextHandler(&log, nil))
	accepted, err := p.Publish(ctx, []jobboard.Event{small1, big, small2})
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if diff := cmp.Diff([]string{small1.EventID, small2.EventID}, accepted); diff != "" {
		t.Errorf("accepted (-want +got):\n%s", diff)
	}
	got := log.b.String()
	if !strings.Contains(got, "level=WARN") || !strings.Contains(got, "event_id="+big.EventID) || !strings.Contains(got, "code=InvalidParameterValue") {
		t.Errorf("log does not report the refused event:\n%s", got)
	}
	receiveAll(t, q.client, q.url, 2)
}

func TestPublishToAMissingQueueFails(t *testing.T) {
	t.Parallel()
	client := localaws.NewSQSClient(localaws.SQS(t).Endpoint, func(o *sqs.Options) { o.RetryMaxAttempts = 1 })
	url := localaws.SQS(t).Endpoint + "/000000000000/no-such-queue"
	p := queue.NewPublisher(client, url)
	accepted, err := p.Publish(context.Background(), []jobboard.Event{newEvent(jobboard.StatusOffer)})
	if err == nil || accepted != nil {
		t.Fatalf("Publish to a missing queue = %v, %v; want an error and nothing accepted", accepted, err)
	}
}
