package queue_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/queue"
)

// A redelivered message comes back after its delay, long before the
// queue's visibility timeout; one not redelivered stays out of sight; a
// stale receipt handle is reported without stopping the others.
func TestRedelivererSetsTheDelay(t *testing.T) {
	t.Parallel()
	q := newQueue(t, 60, 5)
	ctx := context.Background()
	p := queue.NewPublisher(q.client, q.url)
	if _, err := p.Publish(ctx, []jobboard.Event{newEvent(jobboard.StatusOffer), newEvent(jobboard.StatusHired)}); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, q.client, q.url, 2)
	if len(got) != 2 {
		t.Fatalf("received %d, want 2", len(got))
	}
	soon := got[0] // got[1] is not redelivered: it must stay out of sight

	err := queue.NewRedeliverer(q.client, q.url).Redeliver(ctx, []jobboard.Redelivery{
		{MessageID: aws.ToString(soon.MessageId), ReceiptHandle: aws.ToString(soon.ReceiptHandle), After: 1500 * time.Millisecond},
		{MessageID: "stale", ReceiptHandle: "not-a-receipt-handle", After: time.Second},
	})
	if err == nil || !strings.Contains(err.Error(), "stale") {
		t.Errorf("Redeliver with a stale handle = %v, want an error naming it", err)
	}

	start := time.Now()
	var back []string
	for len(back) == 0 && time.Since(start) < 20*time.Second {
		out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			back = append(back, aws.ToString(m.MessageId))
		}
	}
	if !slices.Equal(back, []string{aws.ToString(soon.MessageId)}) {
		t.Fatalf("came back: %v, want only %s", back, aws.ToString(soon.MessageId))
	}
	if took := time.Since(start); took < time.Second {
		t.Errorf("came back after %v, want after its delay of 1.5 s", took)
	}
}
