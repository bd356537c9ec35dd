package queue_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// testQueue is a queue and its DLQ on the shared SQS stand-in.
type testQueue struct {
	client   *sqs.Client
	url, dlq string
}

// newQueue creates a queue of its own for the test (visibility timeout in
// seconds, maxReceiveCount before the DLQ).
func newQueue(t *testing.T, visibility, maxReceives int) testQueue {
	t.Helper()
	q := localaws.NewTestQueue(t, visibility, maxReceives)
	return testQueue{client: q.Client, url: q.URL, dlq: q.DLQURL}
}

var eventSeq atomic.Int64

// newEvent returns a valid event with a fresh event_id.
func newEvent(newStatus jobboard.ApplicationStatus) jobboard.Event {
	n := eventSeq.Add(1)
	return jobboard.Event{
		Type:          jobboard.EventTypeStatusChanged,
		EventID:       fmt.Sprintf("00000000-0000-4000-8000-%012d", n),
		OccurredAt:    time.Date(2026, 12, 2, 10, 0, 0, int(n)*1000, time.UTC),
		ApplicationID: n,
		OldStatus:     jobboard.StatusSubmitted,
		NewStatus:     newStatus,
	}
}

// receiveAll receives from url until want messages arrived or the deadline
// passes, deleting nothing (they stay in flight for the visibility timeout).
func receiveAll(t *testing.T, client *sqs.Client, url string, want int) []types.Message {
	t.Helper()
	var got []types.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		out, err := client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl:                    aws.String(url),
			MaxNumberOfMessages:         10,
			WaitTimeSeconds:             1,
			MessageAttributeNames:       []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if err != nil {
			t.Fatalf("ReceiveMessage: %v", err)
		}
		got = append(got, out.Messages...)
	}
	if len(got) != want {
		t.Fatalf("received %d messages from %s, want %d", len(got), url, want)
	}
	return got
}

// queueDepth returns the messages of the queue, visible, in flight or
// delayed.
func queueDepth(t *testing.T, client *sqs.Client, url string) int {
	t.Helper()
	n, err := localaws.QueueDepth(context.Background(), client, url)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lines collects slog output for assertions.
type lines struct {
	b strings.Builder
}

func (l *lines) Write(p []byte) (int, error) { return l.b.Write(p) }
