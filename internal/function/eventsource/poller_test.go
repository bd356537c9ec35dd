package eventsource_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jobboard/jobboard/internal/dev/faultproxy"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/function/eventsource"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/queue"
)

var eventSeq atomic.Int64

// newEvent returns a valid status event with a fresh event_id.
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

// publish sends evs in the wire form the outbox uses.
func publish(t *testing.T, q localaws.TestQueue, evs ...jobboard.Event) {
	t.Helper()
	accepted, err := queue.NewPublisher(q.Client, q.URL).Publish(context.Background(), evs)
	if err != nil || len(accepted) != len(evs) {
		t.Fatalf("Publish = %v, %v", accepted, err)
	}
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

// recorder is a handler that remembers every record it saw and fails the
// ones its fail function picks.
type recorder struct {
	mu      sync.Mutex
	batches [][]events.SQSMessage
	ctxs    []context.Context
	fail    func(events.SQSMessage) bool
	err     error // returned for the whole batch when set
	badID   string
}

func (r *recorder) handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, ev.Records)
	r.ctxs = append(r.ctxs, ctx)
	if r.err != nil {
		return events.SQSEventResponse{}, r.err
	}
	var resp events.SQSEventResponse
	if r.badID != "" {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.badID})
	}
	for _, m := range ev.Records {
		if r.fail != nil && r.fail(m) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: m.MessageId})
		}
	}
	return resp, nil
}

// seen returns every record the handler got, in order.
func (r *recorder) seen() []events.SQSMessage {
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []events.SQSMessage
	for _, b := range r.batches {
		all = append(all, b...)
	}
	return all
}

// pollUntil runs PollOnce until cond holds, failing t after a deadline.
func pollUntil(t *testing.T, p *eventsource.Poller, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached before the deadline")
		}
		if _, _, err := p.PollOnce(context.Background()); err != nil && !errors.Is(err, eventsource.ErrBatchFailed) {
			t.Fatalf("PollOnce: %v", err)
		}
	}
}

func TestPollerBuildsLambdaRecordsAndDeletesSuccesses(t *testing.T) {
	t.Parallel()
	q := localaws.NewTestQueue(t, 30, 5)
	evs := []jobboard.Event{newEvent(jobboard.StatusReviewing), newEvent(jobboard.StatusOffer), newEvent(jobboard.StatusHired)}
	before := time.Now().Add(-time.Second).UnixMilli()
	publish(t, q, evs...)

	rec := &recorder{}
	p := &eventsource.Poller{Client: q.Client, QueueURL: q.URL, Handler: rec.handle, WaitTimeSeconds: 1, HandlerTimeout: time.Minute, FunctionName: "worker"}
	pollUntil(t, p, func() bool { return len(rec.seen()) >= len(evs) })

	arn, err := localaws.QueueARN(context.Background(), q.Client, q.URL)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range rec.seen() {
		ev, err := jobboard.DecodeEvent([]byte(r.Body))
		if err != nil {
			t.Fatalf("record body: %v", err)
		}
		got[ev.EventID] = true
		sum := md5.Sum([]byte(r.Body))
		if r.Md5OfBody != hex.EncodeToString(sum[:]) {
			t.Errorf("md5OfBody = %q, want %x", r.Md5OfBody, sum)
		}
		if r.MessageId == "" || r.ReceiptHandle == "" {
			t.Errorf("record lacks messageId or receiptHandle: %+v", r)
		}
		if r.EventSource != "aws:sqs" || r.EventSourceARN != arn || r.AWSRegion != "us-east-1" {
			t.Errorf("eventSource, ARN, region = %q, %q, %q; want aws:sqs, %q, us-east-1", r.EventSource, r.EventSourceARN, r.AWSRegion, arn)
		}
		if r.Attributes["ApproximateReceiveCount"] != "1" {
			t.Errorf("ApproximateReceiveCount = %q, want 1", r.Attributes["ApproximateReceiveCount"])
		}
		for _, k := range []string{"SentTimestamp", "ApproximateFirstReceiveTimestamp"} {
			ms, err := strconv.ParseInt(r.Attributes[k], 10, 64)
			if err != nil || ms < before || ms > time.Now().UnixMilli()+1000 {
				t.Errorf("%s = %q, want a time of this test in epoch milliseconds", k, r.Attributes[k])
			}
		}
		attr := r.MessageAttributes[queue.TypeAttribute]
		if attr.DataType != "String" || attr.StringValue == nil || *attr.StringValue != jobboard.EventTypeStatusChanged ||
			attr.StringListValues == nil || attr.BinaryListValues == nil {
			t.Errorf("type message attribute = %+v, want Lambda's shape", attr)
		}
	}
	for _, ev := range evs {
		if !got[ev.EventID] {
			t.Errorf("handler never saw event %s", ev.EventID)
		}
	}

	rec.mu.Lock()
	ctx := rec.ctxs[0]
	rec.mu.Unlock()
	lc, ok := lambdacontext.FromContext(ctx)
	if !ok || len(lc.AwsRequestID) != 36 || !strings.HasSuffix(lc.InvokedFunctionArn, ":function:worker") {
		t.Errorf("handler context lambdacontext = %+v, %v", lc, ok)
	}
	if _, ok := ctx.Deadline(); !ok {
		t.Error("handler context has no deadline although HandlerTimeout is set")
	}

	if n := queueDepth(t, q.Client, q.URL); n != 0 {
		t.Errorf("after success the queue holds %d messages, want 0", n)
	}
}

func TestPollerRedeliversOnlyFailedRecords(t *testing.T) {
	t.Parallel()
	q := localaws.NewTestQueue(t, 1, 5)
	good, bad := newEvent(jobboard.StatusReviewing), newEvent(jobboard.StatusOffer)
	publish(t, q, good, bad)

	rec := &recorder{fail: func(m events.SQSMessage) bool { return strings.Contains(m.Body, bad.EventID) }}
	p := &eventsource.Poller{Client: q.Client, QueueURL: q.URL, Handler: rec.handle, WaitTimeSeconds: 1}
	countOf := func(id string) []string {
		var counts []string
		for _, r := range rec.seen() {
			if strings.Contains(r.Body, id) {
				counts = append(counts, r.Attributes["ApproximateReceiveCount"])
			}
		}
		return counts
	}
	// Until the bad one comes back for the second time.
	pollUntil(t, p, func() bool { return len(countOf(bad.EventID)) >= 2 })

	if got := countOf(bad.EventID); got[0] != "1" || got[1] != "2" {
		t.Errorf("failed record's receive counts = %v, want [1 2]", got)
	}
	if got := countOf(good.EventID); len(got) != 1 {
		t.Errorf("succeeded record delivered %d times, want once", len(got))
	}
	// The bad one is in flight again; let it succeed and the queue empties.
	rec.mu.Lock()
	rec.fail = nil
	rec.mu.Unlock()
	pollUntil(t, p, func() bool { return len(countOf(bad.EventID)) >= 3 })
	if n := queueDepth(t, q.Client, q.URL); n != 0 {
		t.Errorf("queue holds %d messages, want 0", n)
	}
}

func TestPollerHandlerErrorDeletesNothing(t *testing.T) {
	t.Parallel()
	q := localaws.NewTestQueue(t, 1, 5)
	evs := []jobboard.Event{newEvent(jobboard.StatusReviewing), newEvent(jobboard.StatusInterview)}
	publish(t, q, evs...)

	boom := errors.New("database unreachable")
	rec := &recorder{err: boom}
	var log strings.Builder
	p := &eventsource.Poller{Client: q.Client, QueueURL: q.URL, Handler: rec.handle, WaitTimeSeconds: 1, Logger: slog.New(slog.NewTextHandler(&log, nil))}

	var received, failed int
	var err error
	deadline := time.Now().Add(15 * time.Second)
	for received < len(evs) {
		if time.Now().After(deadline) {
			t.Fatal("the events did not arrive before the deadline")
		}
		var r, f int
		r, f, err = p.PollOnce(context.Background())
		received, failed = received+r, failed+f
		if r > 0 && (!errors.Is(err, eventsource.ErrBatchFailed) || !errors.Is(err, boom)) {
			t.Fatalf("PollOnce error = %v, want ErrBatchFailed wrapping the handler's", err)
		}
	}
	if failed != received {
		t.Errorf("failed = %d, want all %d", failed, received)
	}
	if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), boom.Error()) {
		t.Errorf("handler error not logged:\n%s", log.String())
	}

	// Both come back, with their receive count raised.
	rec.mu.Lock()
	rec.err = nil
	rec.mu.Unlock()
	pollUntil(t, p, func() bool { return len(rec.seen()) >= 2*len(evs) })
	for _, r := range rec.seen()[len(evs):] {
		if r.Attributes["ApproximateReceiveCount"] != "2" {
			t.Errorf("redelivered ApproximateReceiveCount = %q, want 2", r.Attributes["ApproximateReceiveCount"])
		}
	}
	if n := queueDepth(t, q.Client, q.URL); n != 0 {
		t.Errorf("queue holds %d messages, want 0", n)
	}
}

func TestPollerUnknownItemIdentifierFailsTheBatch(t *testing.T) {
	for _, badID := range []string{"no-such-message", " "} {
		t.Run(strconv.Quote(badID), func(t *testing.T) {
			t.Parallel()
			q := localaws.NewTestQueue(t, 1, 5)
			evs := []jobboard.Event{newEvent(jobboard.StatusReviewing), newEvent(jobboard.StatusInterview)}
			publish(t, q, evs...)

			rec := &recorder{badID: badID}
			p := &eventsource.Poller{Client: q.Client, QueueURL: q.URL, Handler: rec.handle, WaitTimeSeconds: 1, MaxMessages: 10}
			deadline := time.Now().Add(15 * time.Second)
			for received := 0; received < len(evs); {
				if time.Now().After(deadline) {
					t.Fatal("the events did not arrive before the deadline")
				}
				r, f, err := p.PollOnce(context.Background())
				received += r
				if r > 0 && (f != r || !errors.Is(err, eventsource.ErrBatchFailed) || !strings.Contains(err.Error(), "itemIdentifier")) {
					t.Fatalf("PollOnce = %d, %d, %v; want all failed with ErrBatchFailed naming the itemIdentifier", r, f, err)
				}
			}
			// Every record comes back, none was deleted.
			rec.mu.Lock()
			rec.badID = ""
			rec.mu.Unlock()
			pollUntil(t, p, func() bool { return len(rec.seen()) >= 2*len(evs) })
			for _, r := range rec.seen()[len(evs):] {
				if r.Attributes["ApproximateReceiveCount"] != "2" {
					t.Errorf("redelivered ApproximateReceiveCount = %q, want 2", r.Attributes["ApproximateReceiveCount"])
				}
			}
		})
	}
}

func TestPollerPoisonMessageReachesTheDLQUnchanged(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const maxReceives = 2
	q := localaws.NewTestQueue(t, 1, maxReceives)
	poison := `{"type":"application.status_changed","application_id":7}` // no event_id
	if _, err := q.Client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(q.URL), MessageBody: aws.String(poison)}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}

	// A handler that, like the worker, fails what it cannot decode.
	rec := &recorder{fail: func(m events.SQSMessage) bool {
		_, err := jobboard.DecodeEvent([]byte(m.Body))
		return errors.Is(err, jobboard.ErrMalformedEvent)
	}}
	p := &eventsource.Poller{Client: q.Client, QueueURL: q.URL, Handler: rec.handle, WaitTimeSeconds: 1}
	var inDLQ []string
	pollUntil(t, p, func() bool {
		out, err := q.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(q.DLQURL), MaxNumberOfMessages: 10})
		if err != nil {
			t.Fatalf("ReceiveMessage from DLQ: %v", err)
		}
		for _, m := range out.Messages {
			inDLQ = append(inDLQ, aws.ToString(m.Body))
		}
		return len(inDLQ) > 0
	})
	if len(inDLQ) != 1 || inDLQ[0] != poison {
		t.Errorf("DLQ holds %q, want exactly the poison body %q", inDLQ, poison)
	}
	if n := len(rec.seen()); n != maxReceives {
		t.Errorf("handler saw the poison message %d times, want maxReceiveCount = %d", n, maxReceives)
	}
	if n := queueDepth(t, q.Client, q.URL); n != 0 {
		t.Errorf("source queue holds %d messages, want 0", n)
	}
}

func TestPollerRunUntilCancelled(t *testing.T) {
	t.Parallel()
	q := localaws.NewTestQueue(t, 30, 5)
	evs := []jobboard.Event{newEvent(jobboard.StatusReviewing), newEvent(jobboard.StatusInterview), newEvent(jobboard.StatusOffer)}

	got := make(chan string, 10)
	handler := func(_ context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		for _, r := range ev.Records {
			got <- r.Body
		}
		return events.SQSEventResponse{}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &eventsource.Poller{Client: q.Client, QueueURL: q.URL, Handler: handler, WaitTimeSeconds: 1, MaxMessages: 2}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	publish(t, q, evs...)
	timeout := time.After(15 * time.Second)
	for range evs {
		select {
		case <-got:
		case <-timeout:
			t.Fatal("Run did not deliver every event")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil after cancel", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if n := queueDepth(t, q.Client, q.URL); n != 0 {
		t.Errorf("queue holds %d messages, want 0", n)
	}
}

func TestPollerConfigurationErrors(t *testing.T) {
	t.Parallel()
	q := localaws.NewTestQueue(t, 30, 5)
	handler := (&recorder{}).handle
	tests := map[string]*eventsource.Poller{
		"no client":      {QueueURL: q.URL, Handler: handler},
		"no queue":       {Client: q.Client, Handler: handler},
		"no handler":     {Client: q.Client, QueueURL: q.URL},
		"batch too big":  {Client: q.Client, QueueURL: q.URL, Handler: handler, MaxMessages: 11},
		"negative batch": {Client: q.Client, QueueURL: q.URL, Handler: handler, MaxMessages: -1},
		"missing queue": {Client: localaws.NewSQSClient(localaws.SQS(t).Endpoint, func(o *sqs.Options) { o.RetryMaxAttempts = 1 }),
			QueueURL: localaws.SQS(t).Endpoint + "/000000000000/no-such-queue", Handler: handler},
	}
	for name, p := range tests {
		if _, _, err := p.PollOnce(context.Background()); err == nil || errors.Is(err, eventsource.ErrBatchFailed) {
			t.Errorf("%s: PollOnce error = %v, want a configuration or SQS error", name, err)
		}
	}
}

func TestPollerHandlerPanicFailsTheBatch(t *testing.T) {
	t.Parallel()
	q := localaws.NewTestQueue(t, 1, 5)
	publish(t, q, newEvent(jobboard.StatusReviewing))
	var calls int
	handler := func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
		calls++
		if calls == 1 {
			panic("nil map")
		}
		return events.SQSEventResponse{}, nil
	}
	p := &eventsource.Poller{Client: q.Client, QueueURL: q.URL, Handler: handler, WaitTimeSeconds: 1}
	deadline := time.Now().Add(15 * time.Second)
	for calls < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the message did not come back before the deadline")
		}
		r, f, err := p.PollOnce(context.Background())
		if calls == 1 && r == 1 && (f != 1 || !errors.Is(err, eventsource.ErrBatchFailed) || !strings.Contains(err.Error(), "nil map")) {
			t.Fatalf("PollOnce after a panic = %d, %d, %v; want the batch failed with the panic's value", r, f, err)
		}
	}
	if n := queueDepth(t, q.Client, q.URL); n != 0 {
		t.Errorf("queue holds %d messages, want 0", n)
	}
}

// A receive whose answer is lost after the queue served it (the
// connection reset once the stand-in answered) is sent once and reported:
// its messages are in flight until their visibility timeout, and the SDK
// must not hide that by receiving the next ones in the same call.
func TestPollerReportsALostReceiveInsteadOfRetryingIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := localaws.NewTestQueue(t, 200, 3)
	for range 20 {
		publish(t, q, newEvent(jobboard.StatusReviewing))
	}
	proxy, err := faultproxy.Start(ctx, localaws.SQS(t).Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	var receives atomic.Int64
	proxy.SetRule(func(r *http.Request, _ []byte) faultproxy.Fault {
		if r.Header.Get("X-Amz-Target") == "AmazonSQS.ReceiveMessage" && receives.Add(1) == 1 {
			return faultproxy.ResetAfter
		}
		return faultproxy.Pass
	})
	rec := &recorder{}
	p := &eventsource.Poller{Client: localaws.NewSQSClient(proxy.URL), QueueURL: q.URL, Handler: rec.handle, WaitTimeSeconds: 1}

	received, _, err := p.PollOnce(ctx)
	if err == nil || received != 0 || len(rec.seen()) != 0 {
		t.Fatalf("PollOnce with the receive's answer lost = %d, %v (handler saw %d); want an error and nothing handled",
			received, err, len(rec.seen()))
	}
	if n := receives.Load(); n != 1 {
		t.Errorf("%d ReceiveMessage calls reached the proxy, want 1 (no retry inside the SDK)", n)
	}
	if visible, inFlight := counts(t, q); visible != 10 || inFlight != 10 {
		t.Errorf("visible %d, in flight %d; want 10 and the lost answer's 10", visible, inFlight)
	}
	if received, failed, err := p.PollOnce(ctx); err != nil || received != 10 || failed != 0 {
		t.Errorf("the next poll = %d, %d, %v; want the other 10", received, failed, err)
	}
}

// The finding of issue 18: one poller on a fresh queue of 1,000 messages
// handles them all; none is left in flight for the visibility timeout.
func TestOnePollerDrainsAThousandMessages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	q := localaws.NewTestQueue(t, 200, 3)
	for range 100 {
		evs := make([]jobboard.Event, 10)
		for i := range evs {
			evs[i] = newEvent(jobboard.StatusReviewing)
		}
		publish(t, q, evs...)
	}
	rec := &recorder{}
	p := &eventsource.Poller{Client: q.Client, QueueURL: q.URL, Handler: rec.handle, WaitTimeSeconds: 1}
	for len(rec.seen()) < 1000 {
		received, _, err := p.PollOnce(ctx)
		if err != nil || received == 0 {
			visible, inFlight := counts(t, q)
			t.Fatalf("after %d handled: poll = %d, %v; the queue holds %d visible, %d in flight", len(rec.seen()), received, err, visible, inFlight)
		}
	}
	if visible, inFlight := counts(t, q); visible != 0 || inFlight != 0 {
		t.Errorf("visible %d, in flight %d; want none", visible, inFlight)
	}
}

// counts returns the queue's visible and in-flight messages.
func counts(t *testing.T, q localaws.TestQueue) (visible, inFlight int) {
	t.Helper()
	out, err := q.Client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(q.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages, types.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)])
	inFlight, _ = strconv.Atoi(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible, inFlight
}
