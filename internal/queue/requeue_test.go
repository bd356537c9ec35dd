package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/queue"
)

// A requeued message comes back as a new message after its delay, with
// its body and type, and its receive count started again.
func TestRequeueStartsTheReceivesAgain(t *testing.T) {
	t.Parallel()
	q := newQueue(t, 60, 5)
	ctx := context.Background()
	if _, err := queue.NewPublisher(q.client, q.url).Publish(ctx, []jobboard.Event{newEvent(jobboard.StatusOffer)}); err != nil {
		t.Fatal(err)
	}
	got := receiveAll(t, q.client, q.url, 1)
	if len(got) != 1 {
		t.Fatalf("received %d, want 1", len(got))
	}
	first := got[0]
	err := queue.NewRedeliverer(q.client, q.url).Requeue(ctx, []jobboard.Requeue{{
		MessageID: aws.ToString(first.MessageId), Body: aws.ToString(first.Body),
		Attributes: map[string]string{queue.TypeAttribute: jobboard.EventTypeStatusChanged}, After: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(q.url), ReceiptHandle: first.ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.url), MaxNumberOfMessages: 10})
	if err != nil || len(out.Messages) != 0 {
		t.Fatalf("at once: %d messages, %v; want none before the delay", len(out.Messages), err)
	}
	got = receiveAll(t, q.client, q.url, 1)
	if len(got) != 1 {
		t.Fatalf("after the delay: %d messages, want 1", len(got))
	}
	again := got[0]
	if aws.ToString(again.Body) != aws.ToString(first.Body) || aws.ToString(again.MessageId) == aws.ToString(first.MessageId) {
		t.Errorf("requeued %s %q; want a new message with the body %q", aws.ToString(again.MessageId), aws.ToString(again.Body), aws.ToString(first.Body))
	}
	if n := again.Attributes["ApproximateReceiveCount"]; n != "1" {
		t.Errorf("receive count %q, want 1", n)
	}
	if a := again.MessageAttributes[queue.TypeAttribute]; aws.ToString(a.StringValue) != jobboard.EventTypeStatusChanged {
		t.Errorf("type attribute %+v", a)
	}
}
