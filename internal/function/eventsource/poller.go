// Package eventsource plays the part of the Lambda SQS event source mapping
// outside Lambda: Poller receives batches from a queue, hands them to a
// Lambda SQS handler as Lambda would, and deletes what the handler did not
// report as failed. The local mode of the functions that Lambda feeds from
// a queue (the worker's and the webhook function's, in `make dev` and
// `make chaos`) and the tests of the pipeline use it; on AWS, Lambda itself
// polls. It ships in those binaries, so it lives with what the mains share,
// not among the stand-ins of the dev tree.
package eventsource

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// ErrBatchFailed is matched by the PollOnce error when the handler failed
// the whole batch: it returned an error, or a batchItemFailures entry that
// names no record of the batch (Lambda treats that as a failed batch too).
// Nothing was deleted; every message comes back after its visibility timeout.
var ErrBatchFailed = errors.New("handler failed the whole batch")

// maxBatch is the most messages one ReceiveMessage returns.
const maxBatch = 10

// deleteTimeout bounds the delete after a batch, which ignores cancellation.
const deleteTimeout = 10 * time.Second

// Handler is a Lambda SQS handler with partial batch responses, such as the
// worker's.
type Handler func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)

// Poller plays the part of the Lambda SQS event source mapping (with
// ReportBatchItemFailures) for local runs and tests: it receives up to ten
// messages, hands them to Handler as an events.SQSEvent built the way Lambda
// builds it, deletes the records that succeeded and leaves the failed ones
// for redelivery after the visibility timeout (and so, after the queue's
// maxReceiveCount, for the DLQ).
//
// Set the fields before the first poll and do not change them afterwards. A
// Poller may run PollOnce from several goroutines.
type Poller struct {
	Client   *sqs.Client
	QueueURL string
	Handler  Handler
	// MaxMessages is the batch size, 1 to 10; zero means 10.
	MaxMessages int32
	// WaitTimeSeconds is the long-poll wait of each receive, 1 to 20; zero
	// means 20, as Lambda polls; negative means a short poll.
	WaitTimeSeconds int32
	// VisibilityTimeout, in seconds, overrides the queue's for the received
	// messages; zero keeps the queue's.
	VisibilityTimeout int32
	// HandlerTimeout, if set, gives each invocation a deadline, as Lambda's
	// function timeout does. Zero means no deadline.
	HandlerTimeout time.Duration
	// FunctionName names the pretend function in the invocation's
	// lambdacontext; empty means "local-worker".
	FunctionName string
	// Logger gets one line per batch; nil logs nothing.
	Logger *slog.Logger

	arnMu sync.Mutex
	arn   string
}

// PollOnce receives one batch and processes it. It returns how many
// messages it received and how many of them were left for redelivery.
// Errors: receiving or deleting failed; the handler failed the whole batch
// by returning an error, panicking or naming an unknown record (matches
// ErrBatchFailed; failed equals received). A batch with nothing in
// it returns 0, 0, nil.
func (p *Poller) PollOnce(ctx context.Context) (received, failed int, err error) {
	if p.Client == nil || p.QueueURL == "" || p.Handler == nil {
		return 0, 0, errors.New("poll: Poller needs Client, QueueURL and Handler")
	}
	maxMessages := p.MaxMessages
	switch {
	case maxMessages == 0:
		maxMessages = maxBatch
	case maxMessages < 1 || maxMessages > maxBatch:
		return 0, 0, fmt.Errorf("poll: MaxMessages %d is not between 1 and %d", maxMessages, maxBatch)
	}
	wait := p.WaitTimeSeconds
	switch {
	case wait == 0:
		wait = 20
	case wait < 0:
		wait = 0
	}
	arn, err := p.queueARN(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("poll: %w", err)
	}

	out, err := p.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(p.QueueURL),
		MaxNumberOfMessages:         maxMessages,
		WaitTimeSeconds:             wait,
		VisibilityTimeout:           p.VisibilityTimeout,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	}, receiveOnce)
	if err != nil {
		return 0, 0, fmt.Errorf("poll %s: receive (the messages it may have made invisible come back after their visibility timeout): %w",
			p.QueueURL, err)
	}
	if len(out.Messages) == 0 {
		return 0, 0, nil
	}
	event := events.SQSEvent{Records: make([]events.SQSMessage, len(out.Messages))}
	region := p.Client.Options().Region
	for i, m := range out.Messages {
		event.Records[i] = lambdaRecord(m, arn, region)
	}
	received = len(event.Records)

	resp, herr := p.invoke(ctx, event)
	if herr != nil {
		p.log(ctx, slog.LevelError, "handler failed the batch; nothing deleted", received, received, herr)
		return received, received, fmt.Errorf("poll %s: %w: %w", p.QueueURL, ErrBatchFailed, herr)
	}
	failedIDs := make(map[string]bool, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		if !hasRecord(event.Records, f.ItemIdentifier) {
			err := fmt.Errorf("poll %s: %w: itemIdentifier %q names no record of the batch", p.QueueURL, ErrBatchFailed, f.ItemIdentifier)
			p.log(ctx, slog.LevelError, "invalid batch response; nothing deleted", received, received, err)
			return received, received, err
		}
		failedIDs[f.ItemIdentifier] = true
	}

	var done []types.DeleteMessageBatchRequestEntry
	for i, r := range event.Records {
		if !failedIDs[r.MessageId] {
			done = append(done, types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r.ReceiptHandle)})
		}
	}
	failed = received - len(done)
	if len(done) > 0 {
		// The handler has done its work: delete even if ctx was cancelled
		// meanwhile (shutdown), or the records would all be redelivered.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		defer cancel()
		if err := p.delete(dctx, done); err != nil {
			p.log(ctx, slog.LevelError, "delete failed", received, failed, err)
			return received, failed, err
		}
	}
	p.log(ctx, slog.LevelInfo, "batch processed", received, failed, nil)
	return received, failed, nil
}

// receiveOnce sends a ReceiveMessage once, over a request body of its own.
//
// A receive is not idempotent: one whose answer is lost after the queue
// served it has made its messages invisible, and a retry receives the next
// ones in their place, so that the first stay hidden for the whole
// visibility timeout (200 s in template.yaml) with nothing in the logs. So
// the SDK's retries are off; the retry is Run's next poll, after an error
// that says what happened.
//
// And the answer must not be lost by the client itself. smithy-go closes
// a request's body as soon as the response headers are in, while
// net/http's write loop may still be making its last read of that body
// (the check that nothing follows Content-Length); the read fails, the
// write loop closes the connection, and reading the response body fails
// with "use of closed network connection" — an answer lost after the
// queue served it, and an error the SDK's retryer retries. Under the race detector one poller lost a receive in 4
// of 30 drains of 1,000 messages (TestOnePollerDrainsAThousandMessages);
// sending a copy of the body that no one else closes, 0 of 30.
func receiveOnce(o *sqs.Options) {
	o.Retryer = aws.NopRetryer{}
	o.HTTPClient = ownRequestBody{o.HTTPClient}
}

// ownRequestBody hands the transport a copy of the request body (SQS
// requests are small JSON documents), so that closing the original cannot
// break the request's write while its response is read.
type ownRequestBody struct{ next sqs.HTTPClient }

func (c ownRequestBody) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, fmt.Errorf("read request body: %w", err)
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	}
	return c.next.Do(req)
}

// Run polls until ctx is done, then returns nil. Errors from receiving or
// deleting are logged and retried after a pause; a failed batch is logged
// and polling goes on, as Lambda's would.
func (p *Poller) Run(ctx context.Context) error {
	const pause = time.Second
	for ctx.Err() == nil {
		_, _, err := p.PollOnce(ctx)
		if err == nil || errors.Is(err, ErrBatchFailed) || ctx.Err() != nil {
			continue
		}
		if p.Logger != nil {
			p.Logger.LogAttrs(ctx, slog.LevelWarn, "poll failed; retrying", slog.String("queue_url", p.QueueURL), slog.Any("error", err))
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	return nil
}

// invoke calls the handler the way the Lambda runtime would: with a
// lambdacontext and, if HandlerTimeout is set, a deadline; a panic fails the
// batch.
func (p *Poller) invoke(ctx context.Context, event events.SQSEvent) (events.SQSEventResponse, error) {
	name := p.FunctionName
	if name == "" {
		name = "local-worker"
	}
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID:       requestID(),
		InvokedFunctionArn: "arn:aws:lambda:" + p.Client.Options().Region + ":000000000000:function:" + name,
	})
	if p.HandlerTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.HandlerTimeout)
		defer cancel()
	}
	return callHandler(ctx, p.Handler, event)
}

// callHandler turns a panic in the handler into an error, as the Lambda
// runtime reports a panicking invocation as failed.
func callHandler(ctx context.Context, h Handler, event events.SQSEvent) (resp events.SQSEventResponse, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("handler panicked: %v", v)
		}
	}()
	return h(ctx, event)
}

func (p *Poller) delete(ctx context.Context, entries []types.DeleteMessageBatchRequestEntry) error {
	out, err := p.Client.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(p.QueueURL), Entries: entries})
	if err != nil {
		return fmt.Errorf("poll %s: delete %d messages: %w", p.QueueURL, len(entries), err)
	}
	if len(out.Failed) > 0 {
		f := out.Failed[0]
		return fmt.Errorf("poll %s: delete: %d of %d entries failed, first: %s %s",
			p.QueueURL, len(out.Failed), len(entries), aws.ToString(f.Code), aws.ToString(f.Message))
	}
	return nil
}

// queueARN returns the queue's ARN, the records' eventSourceARN, asking SQS
// once.
func (p *Poller) queueARN(ctx context.Context) (string, error) {
	p.arnMu.Lock()
	defer p.arnMu.Unlock()
	if p.arn != "" {
		return p.arn, nil
	}
	out, err := p.Client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(p.QueueURL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("get ARN of %s: %w", p.QueueURL, err)
	}
	p.arn = out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if p.arn == "" {
		return "", fmt.Errorf("get ARN of %s: no QueueArn attribute", p.QueueURL)
	}
	return p.arn, nil
}

func (p *Poller) log(ctx context.Context, level slog.Level, msg string, received, failed int, err error) {
	if p.Logger == nil {
		return
	}
	attrs := []slog.Attr{slog.String("queue_url", p.QueueURL), slog.Int("received", received), slog.Int("failed", failed)}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	p.Logger.LogAttrs(ctx, level, msg, attrs...)
}

func hasRecord(records []events.SQSMessage, messageID string) bool {
	for _, r := range records {
		if r.MessageId == messageID {
			return true
		}
	}
	return false
}

// lambdaRecord builds the record Lambda would put in an events.SQSEvent for
// message m. Lambda sends empty lists (not null) for the list values of a
// message attribute, and so does this.
func lambdaRecord(m types.Message, queueARN, region string) events.SQSMessage {
	attrs := make(map[string]events.SQSMessageAttribute, len(m.MessageAttributes))
	for name, v := range m.MessageAttributes {
		a := events.SQSMessageAttribute{
			StringValue:      v.StringValue,
			BinaryValue:      v.BinaryValue,
			StringListValues: v.StringListValues,
			BinaryListValues: v.BinaryListValues,
			DataType:         aws.ToString(v.DataType),
		}
		if a.StringListValues == nil {
			a.StringListValues = []string{}
		}
		if a.BinaryListValues == nil {
			a.BinaryListValues = [][]byte{}
		}
		attrs[name] = a
	}
	system := make(map[string]string, len(m.Attributes))
	for k, v := range m.Attributes {
		system[k] = v
	}
	return events.SQSMessage{
		MessageId:              aws.ToString(m.MessageId),
		ReceiptHandle:          aws.ToString(m.ReceiptHandle),
		Body:                   aws.ToString(m.Body),
		Md5OfBody:              aws.ToString(m.MD5OfBody),
		Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
		Attributes:             system,
		MessageAttributes:      attrs,
		EventSourceARN:         queueARN,
		EventSource:            "aws:sqs",
		AWSRegion:              region,
	}
}

// requestID returns a random UUID (version 4), the shape of a Lambda
// request id.
func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
