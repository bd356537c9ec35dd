package sqsbatch_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/sqsbatch"
)

// The tests run real batches: messages sent to a queue of the local SQS
// stand-in and received from it, whose visibility the consumer changes
// through queue.Redeliverer. The queues' visibility timeout is a minute:
// a message seen again within a test came back because the consumer gave
// it its retry delay.
const visibility = 60

// guard bounds every wait of a test, so that a consumer that never does
// what a test waits for fails it instead of hanging it.
const guard = 20 * time.Second

// batchOf sends one message per body to a new queue and receives them, in
// the order of the bodies, as the event source mapping hands them over.
func batchOf(t *testing.T, bodies ...string) (localaws.TestQueue, []events.SQSMessage) {
	t.Helper()
	q := localaws.NewTestQueue(t, visibility, 5)
	ctx := context.Background()
	for start := 0; start < len(bodies); start += 10 {
		in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(q.URL)}
		for i, b := range bodies[start:min(start+10, len(bodies))] {
			in.Entries = append(in.Entries, types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)})
		}
		if out, err := q.Client.SendMessageBatch(ctx, in); err != nil || len(out.Failed) > 0 {
			t.Fatalf("send: %v, %+v", err, out)
		}
	}
	byBody := map[string]events.SQSMessage{}
	deadline := time.Now().Add(guard)
	for len(byBody) < len(bodies) {
		if time.Now().After(deadline) {
			t.Fatalf("received %d of %d messages", len(byBody), len(bodies))
		}
		for _, m := range receive(t, q) {
			byBody[m.Body] = m
		}
	}
	msgs := make([]events.SQSMessage, len(bodies))
	for i, b := range bodies {
		msgs[i] = byBody[b]
	}
	return q, msgs
}

// receive waits up to a second for messages of q and returns them as
// Lambda hands them over.
func receive(t *testing.T, q localaws.TestQueue) []events.SQSMessage {
	t.Helper()
	out, err := q.Client.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
	})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []events.SQSMessage
	for _, m := range out.Messages {
		msgs = append(msgs, events.SQSMessage{MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), Attributes: m.Attributes})
	}
	return msgs
}

// awaitBack receives from q until every message of ids has come back, and
// returns them as received again, by id; it fails t after the guard.
func awaitBack(t *testing.T, q localaws.TestQueue, ids ...string) map[string]events.SQSMessage {
	t.Helper()
	back := map[string]events.SQSMessage{}
	deadline := time.Now().Add(guard)
	for len(back) < len(ids) && time.Now().Before(deadline) {
		for _, m := range receive(t, q) {
			if slices.Contains(ids, m.MessageId) {
				back[m.MessageId] = m
			}
		}
	}
	if len(back) < len(ids) {
		t.Fatalf("of %v, only %d came back within %v", ids, len(back), guard)
	}
	return back
}

// records makes the consumer's records of msgs, the i-th with keys[i] (if
// given) and its body as its value.
func records(msgs []events.SQSMessage, keys ...string) []sqsbatch.Record[string] {
	recs := make([]sqsbatch.Record[string], len(msgs))
	for i, m := range msgs {
		recs[i] = sqsbatch.Record[string]{Message: m, Value: m.Body}
		if i < len(keys) {
			recs[i].Key = keys[i]
		}
	}
	return recs
}

// failedIDs are the message ids of a response's failures.
func failedIDs(resp events.SQSEventResponse) []string {
	var ids []string
	for _, f := range resp.BatchItemFailures {
		ids = append(ids, f.ItemIdentifier)
	}
	return ids
}

func idsOf(msgs ...events.SQSMessage) []string {
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.MessageId)
	}
	return ids
}

// notStarted records what the consumer says of the records it does not
// start; they get the retry delay after.
type notStarted struct {
	after time.Duration
	mu    sync.Mutex
	why   map[string]string // by body
	cause map[string]string // by body: the cause's body, "" for none
}

func (n *notStarted) handle(_ context.Context, r sqsbatch.Record[string], why string, cause *sqsbatch.Record[string]) time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.why == nil {
		n.why, n.cause = map[string]string{}, map[string]string{}
	}
	n.why[r.Value] = why
	if cause != nil {
		n.cause[r.Value] = cause.Value
	}
	return n.after
}

func (n *notStarted) get(body string) (why, cause string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.why[body], n.cause[body]
}

// A failed record's retry delay is set on the queue as soon as that record
// ends, while a sibling of its batch still runs: it comes back after its
// own delay, not after the slowest record of the batch. (A webhook
// delivery whose receiver answered 500 with a retry due in 19.5 s came
// back after 30 s behind a stalled sibling when the delays were set at the
// end of the batch.)
func TestFailedRecordIsRedeliveredWhileASiblingRuns(t *testing.T) {
	t.Parallel()
	q, msgs := batchOf(t, "fails", "stalls")
	failed, stalled := msgs[0], msgs[1]
	release := make(chan struct{})
	ended := make(chan time.Time, 1)
	c := sqsbatch.Config{Concurrency: 2, Redelivery: queue.NewRedeliverer(q.Client, q.URL)}
	h := sqsbatch.Handler[string]{
		Process: func(ctx context.Context, r sqsbatch.Record[string]) sqsbatch.Result {
			if r.Value == "fails" {
				ended <- time.Now()
				return sqsbatch.Result{Failed: true, RetryIn: time.Second, Answered: true}
			}
			select { // the sibling runs until the test has seen the failed record come back
			case <-release:
			case <-ctx.Done():
			}
			return sqsbatch.Result{Answered: true}
		},
		NotStarted: (&notStarted{}).handle,
	}
	type answer struct {
		resp events.SQSEventResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := sqsbatch.Consume(context.Background(), c, records(msgs), h)
		done <- answer{resp, err}
	}()

	back := awaitBack(t, q, failed.MessageId)[failed.MessageId]
	select {
	case a := <-done:
		t.Fatalf("Consume returned (%+v, %v) while its sibling was held", a.resp, a.err)
	default:
	}
	if took := time.Since(<-ended); took < time.Second {
		t.Errorf("the failed record came back %v after it ended, before its retry delay of 1 s", took)
	}
	if got := back.Attributes["ApproximateReceiveCount"]; got != "2" {
		t.Errorf("ApproximateReceiveCount = %q, want 2", got)
	}
	close(release)
	a := <-done
	if a.err != nil || !slices.Equal(failedIDs(a.resp), []string{failed.MessageId}) {
		t.Errorf("Consume = %+v, %v; want only %s failed, not %s", a.resp, a.err, failed.MessageId, stalled.MessageId)
	}
}

// The records of one key run one after the other, in batch order, while
// other keys run beside them; a failed record holds back the rest of its
// key, which are not started (their cause is the failed record) and come
// back after the delay NotStarted gives them. Other keys carry on.
func TestRecordsOfAKeyRunInOrder(t *testing.T) {
	t.Parallel()
	bodies := []string{"a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2", "a3"}
	keys := make([]string, len(bodies))
	for i, b := range bodies {
		keys[i] = b[:1]
	}
	q, msgs := batchOf(t, bodies...)
	firsts := make(chan struct{}, 3)
	allFirsts := make(chan struct{})
	var (
		mu       sync.Mutex
		running  = map[string]int{}
		order    = map[string][]string{}
		overlaps []string
	)
	ns := &notStarted{}
	h := sqsbatch.Handler[string]{
		Process: func(ctx context.Context, r sqsbatch.Record[string]) sqsbatch.Result {
			mu.Lock()
			running[r.Key]++
			if running[r.Key] > 1 {
				overlaps = append(overlaps, r.Value)
			}
			order[r.Key] = append(order[r.Key], r.Value)
			mu.Unlock()
			if r.Value[1] == '0' {
				// The first record of each key waits for the other keys'
				// first records: the three keys run at once.
				firsts <- struct{}{}
				select {
				case <-allFirsts:
				case <-time.After(guard):
					t.Errorf("%s: the three keys never ran at once", r.Value)
				}
			}
			mu.Lock()
			running[r.Key]--
			mu.Unlock()
			return sqsbatch.Result{Failed: r.Value == "a1", Answered: true}
		},
		NotStarted: ns.handle,
	}
	go func() {
		for range 3 {
			<-firsts
		}
		close(allFirsts)
	}()
	c := sqsbatch.Config{Concurrency: 3, Redelivery: queue.NewRedeliverer(q.Client, q.URL)}
	resp, err := sqsbatch.Consume(context.Background(), c, records(msgs, keys...), h)
	if err != nil {
		t.Fatal(err)
	}
	if want := idsOf(msgs[3], msgs[6], msgs[9]); !slices.Equal(failedIDs(resp), want) {
		t.Errorf("failed %v, want a1, a2, a3 %v", failedIDs(resp), want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Errorf("records ran beside an earlier record of their key: %v", overlaps)
	}
	for k, want := range map[string][]string{"a": {"a0", "a1"}, "b": {"b0", "b1", "b2"}, "c": {"c0", "c1", "c2"}} {
		if !slices.Equal(order[k], want) {
			t.Errorf("key %s ran %v, want %v", k, order[k], want)
		}
	}
	for _, body := range []string{"a2", "a3"} {
		if why, cause := ns.get(body); !strings.Contains(why, "same key") || cause != "a1" {
			t.Errorf("%s not started because %q, cause %q; want held back by a1", body, why, cause)
		}
	}
	awaitBack(t, q, idsOf(msgs[3], msgs[6], msgs[9])...) // after a retry delay of zero
}

// No more records run at once than Concurrency allows, and as many do;
// zero runs one at a time.
func TestConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	_, msgs := batchOf(t, "0", "1", "2", "3", "4", "5", "6")
	for _, tc := range []struct{ concurrency, want int }{{3, 3}, {0, 1}, {20, len(msgs)}} {
		t.Run(strconv.Itoa(tc.concurrency), func(t *testing.T) {
			var mu sync.Mutex
			running, most := 0, 0
			started, release := make(chan struct{}, len(msgs)), make(chan struct{})
			h := sqsbatch.Handler[string]{
				Process: func(ctx context.Context, r sqsbatch.Record[string]) sqsbatch.Result {
					mu.Lock()
					running++
					most = max(most, running)
					mu.Unlock()
					started <- struct{}{}
					<-release // once as many as allowed have started
					mu.Lock()
					running--
					mu.Unlock()
					return sqsbatch.Result{Answered: true}
				},
				NotStarted: (&notStarted{}).handle,
			}
			done := make(chan error, 1)
			go func() {
				resp, err := sqsbatch.Consume(context.Background(), sqsbatch.Config{Concurrency: tc.concurrency}, records(msgs), h)
				if err == nil && len(resp.BatchItemFailures) != 0 {
					err = fmt.Errorf("failures %v", resp.BatchItemFailures)
				}
				done <- err
			}()
			for i := range tc.want {
				select {
				case <-started:
				case <-time.After(guard):
					t.Fatalf("%d records started at once, want %d", i, tc.want)
				}
			}
			close(release)
			if err := <-done; err != nil {
				t.Error(err)
			}
			if most != tc.want {
				t.Errorf("at most %d records at once, want %d", most, tc.want)
			}
		})
	}
}

// An invocation without a deadline gets Timeout; no record starts within
// StartMargin of the deadline, or once the invocation is cancelled: those
// fail without a cause and come back after NotStarted's delay.
func TestDeadline(t *testing.T) {
	t.Parallel()

	t.Run("default", func(t *testing.T) {
		t.Parallel()
		_, msgs := batchOf(t, "x")
		var deadline time.Time
		h := sqsbatch.Handler[string]{
			Process: func(ctx context.Context, r sqsbatch.Record[string]) sqsbatch.Result {
				deadline, _ = ctx.Deadline()
				return sqsbatch.Result{}
			},
			NotStarted: (&notStarted{}).handle,
		}
		for _, tc := range []struct {
			timeout, want time.Duration
		}{{0, sqsbatch.DefaultTimeout}, {42 * time.Second, 42 * time.Second}} {
			before := time.Now()
			if _, err := sqsbatch.Consume(context.Background(), sqsbatch.Config{Timeout: tc.timeout}, records(msgs), h); err != nil {
				t.Fatal(err)
			}
			if deadline.Before(before.Add(tc.want)) || deadline.After(time.Now().Add(tc.want)) {
				t.Errorf("Timeout %v: deadline in %v, want %v", tc.timeout, deadline.Sub(before), tc.want)
			}
		}
	})

	t.Run("start margin", func(t *testing.T) {
		t.Parallel()
		q, msgs := batchOf(t, "first", "second", "third")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		deadline, _ := ctx.Deadline()
		// A clock that the first record moves to 4 s before the deadline,
		// as if it had taken its time; the start margin is 5 s.
		var mu sync.Mutex
		now := deadline.Add(-30 * time.Second)
		ns := &notStarted{}
		h := sqsbatch.Handler[string]{
			Process: func(ctx context.Context, r sqsbatch.Record[string]) sqsbatch.Result {
				mu.Lock()
				defer mu.Unlock()
				now = deadline.Add(-4 * time.Second)
				return sqsbatch.Result{Answered: true}
			},
			NotStarted: ns.handle,
		}
		c := sqsbatch.Config{StartMargin: 5 * time.Second, Redelivery: queue.NewRedeliverer(q.Client, q.URL),
			Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
		resp, err := sqsbatch.Consume(ctx, c, records(msgs), h)
		if err != nil || !slices.Equal(failedIDs(resp), idsOf(msgs[1:]...)) {
			t.Fatalf("Consume = %+v, %v; want the two not started failed", resp, err)
		}
		for _, m := range msgs[1:] {
			if why, cause := ns.get(m.Body); !strings.Contains(why, "deadline") || cause != "" {
				t.Errorf("%s not started because %q, cause %q; want the deadline, no cause", m.Body, why, cause)
			}
		}
		awaitBack(t, q, idsOf(msgs[1:]...)...)
	})

	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		_, msgs := batchOf(t, "x", "y")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ns := &notStarted{}
		h := sqsbatch.Handler[string]{
			Process: func(context.Context, sqsbatch.Record[string]) sqsbatch.Result {
				t.Error("a record started in a cancelled invocation")
				return sqsbatch.Result{}
			},
			NotStarted: ns.handle,
		}
		resp, err := sqsbatch.Consume(ctx, sqsbatch.Config{}, records(msgs), h)
		if err != nil || !slices.Equal(failedIDs(resp), idsOf(msgs...)) {
			t.Errorf("Consume = %+v, %v; want both failed", resp, err)
		}
		if why, _ := ns.get("x"); !strings.Contains(why, "cancelled") {
			t.Errorf("not started because %q, want the cancellation", why)
		}
	})
}

// A record's Stop starts no further record of the batch, whatever its
// key: they fail, with the stopping record as their cause.
func TestStopStartsNoMoreRecords(t *testing.T) {
	t.Parallel()
	_, msgs := batchOf(t, "ok", "throttled", "x", "y")
	ns := &notStarted{}
	var started []string
	h := sqsbatch.Handler[string]{
		Process: func(ctx context.Context, r sqsbatch.Record[string]) sqsbatch.Result {
			started = append(started, r.Value)
			if r.Value == "throttled" {
				return sqsbatch.Result{Failed: true, Answered: true, Stop: "throttled"}
			}
			return sqsbatch.Result{Answered: true}
		},
		NotStarted: ns.handle,
	}
	resp, err := sqsbatch.Consume(context.Background(), sqsbatch.Config{}, records(msgs, "", "", "k", ""), h)
	if err != nil || !slices.Equal(failedIDs(resp), idsOf(msgs[1:]...)) {
		t.Fatalf("Consume = %+v, %v", resp, err)
	}
	if !slices.Equal(started, []string{"ok", "throttled"}) {
		t.Errorf("started %v, want ok and throttled", started)
	}
	for _, body := range []string{"x", "y"} {
		if why, cause := ns.get(body); why != "throttled" || cause != "throttled" {
			t.Errorf("%s not started because %q, cause %q; want the stop", body, why, cause)
		}
	}
}

// recordingRedeliverer passes the retry delays on to the queue and keeps
// the message ids it was given, call by call.
type recordingRedeliverer struct {
	next  jobboard.Redeliverer
	mu    sync.Mutex
	calls [][]string
}

func (r *recordingRedeliverer) Redeliver(ctx context.Context, rs []jobboard.Redelivery) error {
	r.mu.Lock()
	var ids []string
	for _, d := range rs {
		ids = append(ids, d.MessageID)
	}
	r.calls = append(r.calls, ids)
	r.mu.Unlock()
	return r.next.Redeliver(ctx, rs)
}

// ids are the message ids given a delay so far, in order.
func (r *recordingRedeliverer) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Concat(r.calls...)
}

// The answer lists the failed records in batch order; the whole batch
// fails only when the database failed and no record got an answer from it,
// and then no record gets its retry delay: the batch comes back after the
// visibility timeout.
func TestAnswer(t *testing.T) {
	t.Parallel()
	q, msgs := batchOf(t, "ok", "failed", "down", "malformed")
	down := errors.New("injected: connection refused")
	results := map[string]sqsbatch.Result{
		"ok":        {Answered: true},
		"failed":    {Failed: true, RetryIn: time.Minute, Answered: true},
		"down":      {Failed: true, RetryIn: time.Minute, StoreErr: down},
		"malformed": {Failed: true, RetryIn: time.Minute},
	}
	h := sqsbatch.Handler[string]{
		Process:    func(_ context.Context, r sqsbatch.Record[string]) sqsbatch.Result { return results[r.Value] },
		NotStarted: (&notStarted{}).handle,
	}
	for _, tc := range []struct {
		name    string
		msgs    []events.SQSMessage
		failed  []string
		wantErr bool
	}{
		{"mixed", msgs, idsOf(msgs[1:]...), false},
		{"database down for the one that needed it", []events.SQSMessage{msgs[2], msgs[3]}, nil, true},
		{"database down, one answered", []events.SQSMessage{msgs[2], msgs[1]}, idsOf(msgs[2], msgs[1]), false},
		{"malformed only", []events.SQSMessage{msgs[3]}, idsOf(msgs[3]), false},
		{"empty", nil, nil, false},
	} {
		redelivery := &recordingRedeliverer{next: queue.NewRedeliverer(q.Client, q.URL)}
		c := sqsbatch.Config{Concurrency: 4, Redelivery: redelivery}
		resp, err := sqsbatch.Consume(context.Background(), c, records(tc.msgs), h)
		if tc.wantErr {
			if !errors.Is(err, down) || len(resp.BatchItemFailures) != 0 || len(redelivery.ids()) != 0 {
				t.Errorf("%s: Consume = %+v, %v, delays set for %v; want the batch failed with the database's error, no delay set",
					tc.name, resp, err, redelivery.ids())
			}
			continue
		}
		if err != nil || resp.BatchItemFailures == nil || !slices.Equal(failedIDs(resp), tc.failed) {
			t.Errorf("%s: Consume = %+v, %v; want failures %v", tc.name, resp, err, tc.failed)
		}
		if got := redelivery.ids(); len(got) != len(tc.failed) || !sameSet(got, tc.failed) {
			t.Errorf("%s: delays set for %v, want %v", tc.name, got, tc.failed)
		}
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// While no record of the batch has had an answer from the database, a
// failed record's delay waits: the batch may yet fail whole. The first
// answer sets it.
func TestDelaysWaitForAnAnswer(t *testing.T) {
	t.Parallel()
	q, msgs := batchOf(t, "malformed", "ok")
	redelivery := &recordingRedeliverer{next: queue.NewRedeliverer(q.Client, q.URL)}
	h := sqsbatch.Handler[string]{
		Process: func(_ context.Context, r sqsbatch.Record[string]) sqsbatch.Result {
			if r.Value == "malformed" {
				return sqsbatch.Result{Failed: true}
			}
			if got := redelivery.ids(); len(got) != 0 {
				t.Errorf("delays set for %v before any record had an answer", got)
			}
			return sqsbatch.Result{Answered: true}
		},
		NotStarted: (&notStarted{}).handle,
	}
	resp, err := sqsbatch.Consume(context.Background(), sqsbatch.Config{Redelivery: redelivery}, records(msgs), h)
	if err != nil || !slices.Equal(failedIDs(resp), idsOf(msgs[0])) {
		t.Fatalf("Consume = %+v, %v", resp, err)
	}
	if got := redelivery.ids(); !slices.Equal(got, idsOf(msgs[0])) {
		t.Errorf("delays set for %v, want the malformed record's", got)
	}
	awaitBack(t, q, msgs[0].MessageId) // a retry delay of zero
}

// A retry delay the queue refuses (a stale receipt handle) is logged; the
// record is still reported failed, so it comes back after the visibility
// timeout.
func TestRefusedRedeliveryIsLogged(t *testing.T) {
	t.Parallel()
	q, msgs := batchOf(t, "x")
	msgs[0].ReceiptHandle = "not-a-receipt-handle"
	var logs bytes.Buffer
	c := sqsbatch.Config{Redelivery: queue.NewRedeliverer(q.Client, q.URL), Logger: slog.New(slog.NewJSONHandler(&logs, nil))}
	h := sqsbatch.Handler[string]{
		Process: func(context.Context, sqsbatch.Record[string]) sqsbatch.Result {
			return sqsbatch.Result{Failed: true, RetryIn: time.Second, Answered: true}
		},
		NotStarted: (&notStarted{}).handle,
	}
	resp, err := sqsbatch.Consume(context.Background(), c, records(msgs), h)
	if err != nil || !slices.Equal(failedIDs(resp), idsOf(msgs...)) {
		t.Errorf("Consume = %+v, %v", resp, err)
	}
	if line := logs.String(); !strings.Contains(line, `"level":"WARN"`) || !strings.Contains(line, msgs[0].MessageId) {
		t.Errorf("log = %s; want a WARN line with the message id", line)
	}
}

// Receives reads ApproximateReceiveCount, 1 when it is missing or wrong.
func TestReceives(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]int{"4": 4, "": 1, "0": 1, "x": 1} {
		r := sqsbatch.Record[string]{Message: events.SQSMessage{Attributes: map[string]string{"ApproximateReceiveCount": v}}}
		if got := r.Receives(); got != want {
			t.Errorf("Receives with %q = %d, want %d", v, got, want)
		}
	}
}

// Retry calls again until the call succeeds; a lost lease or the end of
// ctx ends it with the last error.
func TestRetry(t *testing.T) {
	t.Parallel()
	calls := 0
	if err := sqsbatch.Retry(context.Background(), func() error {
		if calls++; calls < 3 {
			return errors.New("injected: terminating connection")
		}
		return nil
	}); err != nil || calls != 3 {
		t.Errorf("Retry = %v after %d calls; want success on the third", err, calls)
	}

	calls = 0
	lost := fmt.Errorf("finish claim: %w", jobboard.ErrLeaseLost)
	if err := sqsbatch.Retry(context.Background(), func() error { calls++; return lost }); !errors.Is(err, jobboard.ErrLeaseLost) || calls != 1 {
		t.Errorf("Retry = %v after %d calls; want the lost lease at once", err, calls)
	}

	calls = 0
	ctx, cancel := context.WithCancel(context.Background())
	failing := errors.New("injected: connection refused")
	if err := sqsbatch.Retry(ctx, func() error {
		if calls++; calls == 2 {
			cancel()
		}
		return failing
	}); !errors.Is(err, failing) || calls != 2 {
		t.Errorf("Retry = %v after %d calls; want the last error once ctx ended", err, calls)
	}
}

// A record put off (Result.Requeue) comes back as a new message, delivered
// after its delay, with its body and String attributes and a receive count
// of 1: waiting counted no receive toward the dead-letter queue; the
// message received is done (not failed, so Lambda deletes it). Without a
// Requeuer, or when the send fails, the record fails with the delay
// instead, its receives counting.
func TestRequeuedRecordComesBackAsANewMessage(t *testing.T) {
	t.Parallel()
	q, msgs := batchOf(t, "put off", "fails to be put off")
	ctx := context.Background()
	typ := "webhook.delivery_requested"
	msgs[0].MessageAttributes = map[string]events.SQSMessageAttribute{"type": {DataType: "String", StringValue: &typ}}
	ended := time.Now()
	h := sqsbatch.Handler[string]{
		Process: func(context.Context, sqsbatch.Record[string]) sqsbatch.Result {
			return sqsbatch.Result{Requeue: true, RetryIn: time.Second, Answered: true}
		},
		NotStarted: (&notStarted{}).handle,
	}
	redelivery := queue.NewRedeliverer(q.Client, q.URL)
	c := sqsbatch.Config{Concurrency: 2, Redelivery: redelivery, Requeuer: onlyFor{"put off", redelivery}}
	resp, err := sqsbatch.Consume(ctx, c, records(msgs), h)
	if err != nil || !slices.Equal(failedIDs(resp), []string{msgs[1].MessageId}) {
		t.Fatalf("Consume = %+v, %v; want only %s failed", resp, err, msgs[1].MessageId)
	}

	// Back: the new message, and the one that failed to be put off.
	back := map[string]types.Message{}
	deadline := time.Now().Add(guard)
	for len(back) < 2 && time.Now().Before(deadline) {
		out, err := q.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(q.URL), MaxNumberOfMessages: 10, WaitTimeSeconds: 1, MessageAttributeNames: []string{"All"},
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameApproximateReceiveCount},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range out.Messages {
			back[aws.ToString(m.Body)] = m
		}
	}
	if took := time.Since(ended); took < time.Second {
		t.Errorf("they came back %v after they ended, before their delay of 1 s", took)
	}
	again, ok := back["put off"]
	switch {
	case !ok:
		t.Error("the record put off did not come back")
	case aws.ToString(again.MessageId) == msgs[0].MessageId:
		t.Errorf("it came back as the same message %s; want a new one", msgs[0].MessageId)
	case again.Attributes["ApproximateReceiveCount"] != "1" || aws.ToString(again.MessageAttributes["type"].StringValue) != typ:
		t.Errorf("it came back with receive count %q and attributes %v; want 1 and its type", again.Attributes["ApproximateReceiveCount"], again.MessageAttributes)
	}
	failed, ok := back["fails to be put off"]
	if !ok || aws.ToString(failed.MessageId) != msgs[1].MessageId || failed.Attributes["ApproximateReceiveCount"] != "2" {
		t.Errorf("the record that could not be put off came back as %+v; want message %s, its second receive", failed, msgs[1].MessageId)
	}
}

// onlyFor requeues the messages with body, and refuses the others.
type onlyFor struct {
	body string
	next jobboard.Requeuer
}

func (o onlyFor) Requeue(ctx context.Context, rs []jobboard.Requeue) error {
	for _, r := range rs {
		if r.Body != o.body {
			return errors.New("refused")
		}
	}
	return o.next.Requeue(ctx, rs)
}
