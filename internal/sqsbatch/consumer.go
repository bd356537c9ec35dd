// Package sqsbatch consumes the batches that an SQS event source mapping
// (with ReportBatchItemFailures) hands a Lambda function. The status-email
// worker, the webhook delivery and the SES feedback functions each plug
// their record logic into it (a Handler); it owns what they share:
//
//   - the invocation's deadline, with a default when the context has none;
//   - the start margin: no record starts with less time than it left;
//   - bounded concurrency, the records of one ordering key one after the
//     other in batch order, and once one of them fails the rest of that key
//     not started;
//   - a record's Stop, after which no record of the batch starts;
//   - the answer to Lambda: the failed records in BatchItemFailures, or the
//     whole batch failed when no record reached the database because the
//     database failed (an outage, not a bad record);
//   - a record put off (Result.Requeue) sent again as a new message after
//     its delay, so that waiting does not count a receive toward the
//     dead-letter queue;
//   - the redelivery of each failed record after its own retry delay, set
//     on the queue as soon as that record ends, so that a slow sibling does
//     not hold it back until the batch ends; but not before some record of
//     the batch has had an answer from the database, since a batch that
//     fails whole leaves its records to the queue's visibility timeout,
//     which rides out an outage longer than short delays would.
package sqsbatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// DefaultTimeout is the deadline of an invocation whose context has none
// (tests, tools): the Timeout of the queue consumers in template.yaml.
const DefaultTimeout = 30 * time.Second

// returnMargin is kept free at the end of an invocation for a redelivery
// call to give up and for the response to be returned.
const returnMargin = 250 * time.Millisecond

// Record is one message of a batch with what its handler read from it.
type Record[T any] struct {
	Message events.SQSMessage
	// Key orders the records: those with the same non-empty Key run one
	// after the other, in batch order, and once one fails the rest are not
	// started. Records without a Key run in any order.
	Key string
	// Value is what the handler read from the message.
	Value T
}

// Receives is how often SQS has delivered the message, this time included
// (its ApproximateReceiveCount attribute); 1 if unknown.
func (r Record[T]) Receives() int {
	n, err := strconv.Atoi(r.Message.Attributes["ApproximateReceiveCount"])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Result is what became of one record.
type Result struct {
	// Failed records are reported in BatchItemFailures and delivered again
	// after RetryIn.
	Failed  bool
	RetryIn time.Duration
	// Answered: the database answered (even if the record failed).
	// StoreErr: the database itself failed.
	Answered bool
	StoreErr error
	// Stop, when set, says why no further record of the batch should
	// start: the next ones would most likely fail the same way.
	Stop string
	// Requeue puts the record off without counting a receive: its message
	// is sent again as a new one, delivered after RetryIn, and this one is
	// done. When it cannot be sent (or Config.Requeuer is nil) the record
	// fails with RetryIn instead.
	Requeue bool
}

// Handler is one function's record logic; both functions are required.
type Handler[T any] struct {
	// Process handles a record; ctx carries the invocation's deadline.
	Process func(ctx context.Context, r Record[T]) Result
	// NotStarted is told of a record that is not started, and why: cause
	// is the record whose failure held it back or stopped the batch, nil
	// when time ran out. The record fails; NotStarted returns its retry
	// delay (and logs it).
	NotStarted func(ctx context.Context, r Record[T], why string, cause *Record[T]) time.Duration
}

// Config is how batches are consumed. The zero value runs one record at a
// time, without redelivery, until the context's deadline.
type Config struct {
	// Timeout is the deadline of an invocation whose context has none.
	// Zero: DefaultTimeout.
	Timeout time.Duration
	// StartMargin: no record starts with less time than this left before
	// the deadline.
	StartMargin time.Duration
	// Concurrency bounds the records handled at once. Zero: one.
	Concurrency int
	// Redelivery, if set, makes each failed record visible again after its
	// RetryIn (queue.Redeliverer); otherwise it waits for the queue's
	// visibility timeout.
	Redelivery jobboard.Redeliverer
	// Requeuer, if set, sends the records put off (Result.Requeue) again
	// (queue.Redeliverer).
	Requeuer jobboard.Requeuer
	// Logger receives a line when a retry delay cannot be set. Nil:
	// discard.
	Logger *slog.Logger
	// Now is the clock the deadline is compared with. Nil: time.Now.
	Now func() time.Time
}

// Consume runs recs through h as c says and returns the answer for
// Lambda. It returns an error, failing the whole batch, only when no record
// reached the database because the database failed (it is unreachable, for
// instance).
func Consume[T any](ctx context.Context, c Config, recs []Record[T], h Handler[T]) (events.SQSEventResponse, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cmp.Or(c.Timeout, DefaultTimeout))
		defer cancel()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	b := &batch[T]{c: c, h: h, recs: recs, results: make([]Result, len(recs))}
	var wg sync.WaitGroup
	groups := make(chan []int)
	for range min(max(c.Concurrency, 1), len(recs)) {
		wg.Go(func() {
			for g := range groups {
				b.runGroup(ctx, g)
			}
		})
	}
	for _, g := range groupByKey(recs) {
		groups <- g
	}
	close(groups)
	wg.Wait()
	resp, err := b.answer()
	if err == nil {
		b.redeliver(ctx, b.held) // no record had an answer, and none needed one
	}
	return resp, err
}

// batch is the state of one Consume call that its goroutines share.
type batch[T any] struct {
	c       Config
	h       Handler[T]
	recs    []Record[T]
	results []Result

	mu        sync.Mutex
	stop      string                // why no new record starts, once set
	stoppedBy *Record[T]            // the record whose Stop it is
	answered  bool                  // a record has had an answer from the database
	held      []jobboard.Redelivery // the delays that wait for an answer
}

// runGroup runs the records of one key in order. After a failure the rest
// of the group is not started.
func (b *batch[T]) runGroup(ctx context.Context, group []int) {
	var heldBy *Record[T]
	for _, i := range group {
		r := &b.recs[i]
		why, cause := b.stopped(ctx)
		if why == "" && heldBy != nil {
			why, cause = "an earlier record with the same key failed", heldBy
		}
		var res Result
		if why != "" {
			res = Result{Failed: true, RetryIn: b.h.NotStarted(ctx, *r, why, cause)}
		} else if res = b.h.Process(ctx, *r); res.Stop != "" {
			b.stopAll(res.Stop, r)
		}
		if res.Requeue && !res.Failed {
			res.Failed = !b.requeue(ctx, r, res.RetryIn)
		}
		b.results[i] = res
		if res.Failed && heldBy == nil {
			heldBy = r
		}
		b.redeliver(ctx, b.ended(r, res))
	}
}

// ended notes a record's result and returns the redeliveries due now: the
// record's own if it failed, and those held back, once a record has had
// an answer from the database.
func (b *batch[T]) ended(r *Record[T], res Result) []jobboard.Redelivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	if res.Failed {
		b.held = append(b.held, jobboard.Redelivery{MessageID: r.Message.MessageId, ReceiptHandle: r.Message.ReceiptHandle, After: res.RetryIn})
	}
	b.answered = b.answered || res.Answered
	if !b.answered {
		return nil
	}
	due := b.held
	b.held = nil
	return due
}

// stopped says why no new record should start, and the record that
// caused it, or "".
func (b *batch[T]) stopped(ctx context.Context) (string, *Record[T]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop != "" {
		return b.stop, b.stoppedBy
	}
	if ctx.Err() != nil {
		return "the invocation was cancelled", nil
	}
	if deadline, _ := ctx.Deadline(); deadline.Sub(b.c.Now()) < b.c.StartMargin {
		return "the Lambda deadline is near", nil
	}
	return "", nil
}

func (b *batch[T]) stopAll(reason string, by *Record[T]) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stop == "" {
		b.stop, b.stoppedBy = reason, by
	}
}

// redeliver gives failed records their retry delays, in the time left
// (even if ctx is cancelled). A failure costs only time: the records come
// back after the visibility timeout instead.
func (b *batch[T]) redeliver(ctx context.Context, rs []jobboard.Redelivery) {
	if b.c.Redelivery == nil || len(rs) == 0 {
		return
	}
	deadline, _ := ctx.Deadline()
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(-returnMargin))
	defer cancel()
	if err := b.c.Redelivery.Redeliver(rctx, rs); err != nil {
		ids := make([]string, len(rs))
		for i, d := range rs {
			ids[i] = d.MessageID
		}
		b.c.Logger.LogAttrs(ctx, slog.LevelWarn, "could not set the retry delays; those records wait for the visibility timeout",
			slog.Any("message_ids", ids), slog.String("error", err.Error()))
	}
}

// requeue sends r's message again after delay, in the time left (even if
// ctx is cancelled), and reports whether it was sent. A failure is logged:
// the record fails instead, and waits its delay counting a receive.
func (b *batch[T]) requeue(ctx context.Context, r *Record[T], delay time.Duration) bool {
	if b.c.Requeuer == nil {
		return false
	}
	q := jobboard.Requeue{MessageID: r.Message.MessageId, Body: r.Message.Body, After: delay}
	for name, a := range r.Message.MessageAttributes {
		if a.DataType == "String" && a.StringValue != nil {
			if q.Attributes == nil {
				q.Attributes = map[string]string{}
			}
			q.Attributes[name] = *a.StringValue
		}
	}
	deadline, _ := ctx.Deadline()
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline.Add(-returnMargin))
	defer cancel()
	if err := b.c.Requeuer.Requeue(rctx, []jobboard.Requeue{q}); err != nil {
		b.c.Logger.LogAttrs(ctx, slog.LevelWarn, "could not send a record put off again; it fails and waits counting a receive",
			slog.String("message_id", r.Message.MessageId), slog.String("error", err.Error()))
		return false
	}
	return true
}

// answer is the response to Lambda: the failed records, or an error when
// the database failed every record that reached for it and none got an
// answer.
func (b *batch[T]) answer() (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	answered, storeErr := false, error(nil)
	for i, res := range b.results {
		answered = answered || res.Answered
		if storeErr == nil {
			storeErr = res.StoreErr
		}
		if res.Failed {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: b.recs[i].Message.MessageId})
		}
	}
	if !answered && storeErr != nil {
		return events.SQSEventResponse{}, fmt.Errorf("no record of the batch reached the database: %w", storeErr)
	}
	return resp, nil
}

// groupByKey returns the indexes of the records, grouped so that the
// records of one key form one group, in batch order; a record without a key
// is a group of its own.
func groupByKey[T any](recs []Record[T]) [][]int {
	var groups [][]int
	byKey := map[string]int{}
	for i, r := range recs {
		if r.Key == "" {
			groups = append(groups, []int{i})
			continue
		}
		if g, ok := byKey[r.Key]; ok {
			groups[g] = append(groups[g], i)
			continue
		}
		byKey[r.Key] = len(groups)
		groups = append(groups, []int{i})
	}
	return groups
}

// Retry calls op until it succeeds, reports jobboard.ErrLeaseLost (which no
// retry mends), or ctx ends, with a short growing pause: a blip of the
// database (a failover, a terminated session) costs a new connection, which
// the pool makes on the next call. A record's logic retries its statements
// with it within the invocation's time.
func Retry(ctx context.Context, op func() error) error {
	pause := 50 * time.Millisecond
	for {
		err := op()
		if err == nil || errors.Is(err, jobboard.ErrLeaseLost) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}
