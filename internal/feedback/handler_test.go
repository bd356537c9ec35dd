package feedback_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/dev/syncio"
	"github.com/jobboard/jobboard/internal/feedback"
	"github.com/jobboard/jobboard/internal/function/eventsource"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// failingStore injects failures: the feedback events whose id Fail picks
// fail as a database failure would; the rest reach the real store.
type failingStore struct {
	next jobboard.FeedbackStore
	fail func(id string) bool
}

func (s failingStore) ApplyFeedback(ctx context.Context, f jobboard.Feedback) (jobboard.FeedbackResult, error) {
	if s.fail(f.ID) {
		return jobboard.FeedbackResult{}, errors.New("injected: connection refused")
	}
	return s.next.ApplyFeedback(ctx, f)
}

// TestPartialFailuresReachTheDLQ: in one batch, a hard bounce, a copy of
// it, a complaint (delivered twice), a malformed message and an event the
// database keeps failing. The bounce and the complaint suppress once each;
// the malformed message and the failing one are reported back as failed,
// come back, and reach the DLQ after maxReceiveCount, bodies intact.
func TestPartialFailuresReachTheDLQ(t *testing.T) {
	db := pgtest.NewDB(t)
	q := localaws.NewTestQueue(t, 1, 2)
	ctx := context.Background()
	logs := &syncio.Buffer{}
	failing := "Delivery:0100019b-message-0004"
	h, err := feedback.New(feedback.Config{
		Store:   failingStore{next: db, fail: func(id string) bool { return id == failing }},
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
		Metrics: logs,
	})
	if err != nil {
		t.Fatal(err)
	}
	bodies := map[string]string{
		"bounce":    string(readSample(t, "bounce-permanent.json")),
		"bounce2":   string(readSample(t, "sns-envelope-bounce.json")), // the same event in SNS's envelope
		"complaint": string(readSample(t, "complaint.json")),
		"again":     string(readSample(t, "complaint.json")),
		"malformed": `{"eventType":"Bounce","mail":{"messageId":"m"}}`,
		"failing":   string(readSample(t, "delivery.json")),
	}
	var entries []sqsEntry
	for id, body := range bodies {
		entries = append(entries, sqsEntry{id, body})
	}
	sendBatch(t, q.Client, q.URL, entries)

	p := &eventsource.Poller{Client: q.Client, QueueURL: q.URL, Handler: h.Handle, WaitTimeSeconds: 1}
	workertest.Eventually(t, 30*time.Second, "queue drained into the DLQ", func() bool {
		if _, _, err := p.PollOnce(ctx); err != nil {
			t.Logf("poll: %v", err)
		}
		n, err := localaws.QueueDepth(ctx, q.Client, q.URL)
		return err == nil && n == 0
	})

	dead := receiveAll(t, q.Client, q.DLQURL, 2)
	want := map[string]bool{bodies["malformed"]: true, bodies["failing"]: true}
	for _, b := range dead {
		if !want[b] {
			t.Errorf("unexpected body in the DLQ: %.80s", b)
		}
		delete(want, b)
	}
	if len(want) != 0 {
		t.Errorf("%d bodies missing from the DLQ", len(want))
	}

	for addr, reason := range map[string]jobboard.SuppressionReason{
		"candidate@example.org": jobboard.SuppressedByBounce,
		"annoyed@example.org":   jobboard.SuppressedByComplaint,
	} {
		s, found, err := db.Suppression(ctx, addr)
		if err != nil || !found || s.Reason != reason {
			t.Errorf("%s: suppression %+v (found %v, %v), want %s", addr, s, found, err, reason)
		}
	}
	var applied int
	if err := db.Pool.QueryRow(ctx, `SELECT count(*) FROM email_feedback_events`).Scan(&applied); err != nil || applied != 2 {
		t.Errorf("applied events = %d (%v), want 2 (the bounce and the complaint, once each)", applied, err)
	}
	if got := strings.Count(logs.String(), `"outcome":"duplicate"`); got != 2 {
		t.Errorf("%d duplicates logged, want 2\n%s", got, logs)
	}
}

// TestWholeBatchFailsWhenTheDatabaseDoes: every record failing in the
// store fails the invocation, as the worker does, so the function's
// Errors alarm sees an unreachable database.
func TestWholeBatchFailsWhenTheDatabaseDoes(t *testing.T) {
	h, err := feedback.New(feedback.Config{Store: failingStore{fail: func(string) bool { return true }}})
	if err != nil {
		t.Fatal(err)
	}
	batch := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "1", Body: string(readSample(t, "delivery.json"))},
		{MessageId: "2", Body: string(readSample(t, "complaint.json"))},
	}}
	if _, err := h.Handle(context.Background(), batch); err == nil {
		t.Fatal("Handle succeeded with the database failing every record")
	}
}

type sqsEntry struct{ id, body string }

func sendBatch(tb testing.TB, c *sqs.Client, url string, es []sqsEntry) {
	tb.Helper()
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(url)}
	for _, e := range es {
		in.Entries = append(in.Entries, sqsTypesEntry(e))
	}
	out, err := c.SendMessageBatch(context.Background(), in)
	if err != nil || len(out.Failed) > 0 {
		tb.Fatalf("send batch: %v %v", err, out)
	}
}

func receiveAll(tb testing.TB, c *sqs.Client, url string, want int) []string {
	tb.Helper()
	var bodies []string
	workertest.Eventually(tb, 10*time.Second, "DLQ messages", func() bool {
		out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(url), MaxNumberOfMessages: 10, VisibilityTimeout: 60})
		if err != nil {
			tb.Logf("receive: %v", err)
			return false
		}
		for _, m := range out.Messages {
			bodies = append(bodies, aws.ToString(m.Body))
		}
		return len(bodies) >= want
	})
	return bodies
}

func sqsTypesEntry(e sqsEntry) sqstypes.SendMessageBatchRequestEntry {
	return sqstypes.SendMessageBatchRequestEntry{Id: aws.String(e.id), MessageBody: aws.String(e.body)}
}
