package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/worker"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// Each batch goes to the handler of the queue it came from, and any
// other to the status queue's.
func TestByQueueHandsEachBatchToItsQueuesHandler(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	accountURL, _, err := localaws.CreateQueueWithDLQ(context.Background(), e.SQS, "account-"+strings.ReplaceAll(t.Name(), "/", "-"), 30, 5)
	if err != nil {
		t.Fatal(err)
	}
	status := &workertest.FlakyMailer{Next: e.Sender}
	account := &workertest.FlakyMailer{Next: e.Sender}
	handle := worker.ByQueue(e.Handler(t, status), map[string]*worker.Handler{accountURL: e.Handler(t, account)})
	arn := func(url string) string {
		return "arn:aws:sqs:us-east-1:000000000000:" + url[strings.LastIndex(url, "/")+1:]
	}
	batch := func(url string) events.SQSEvent {
		return events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m", Body: workertest.Body(t, e.NewApp(t).Event()), EventSourceARN: arn(url)}}}
	}
	for _, q := range []struct {
		url    string
		mailer *workertest.FlakyMailer
	}{{accountURL, account}, {e.QueueURL, status}} {
		if resp, err := handle(context.Background(), batch(q.url)); err != nil || len(resp.BatchItemFailures) != 0 {
			t.Fatalf("batch from %s: %+v, %v", q.url, resp, err)
		}
		if _, sent := q.mailer.Calls(); sent != 1 {
			t.Errorf("batch from %s: its handler sent %d, want 1", q.url, sent)
		}
	}
	if resp, err := handle(context.Background(), batch(e.QueueURL+"-other")); err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch from another queue: %+v, %v", resp, err)
	}
	if _, sent := status.Calls(); sent != 2 {
		t.Errorf("batch from another queue: the status handler sent %d in all, want 2", sent)
	}
}
