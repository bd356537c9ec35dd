package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/sqsbatch"
)

// Defaults of Config.
const (
	// DefaultConcurrency is the records of a batch attempted at once: the
	// whole batch of the event source mapping. The time goes to waiting
	// on receivers, not to this function.
	DefaultConcurrency = 10
	// DefaultBackoffBase is the first retry's delay (before jitter); each
	// next one doubles, up to DefaultBackoffMax.
	DefaultBackoffBase = 20 * time.Second
	// DefaultBackoffMax is the longest delay: SQS's longest visibility
	// timeout, 12 hours.
	DefaultBackoffMax = 12 * time.Hour
	// leaseMargin is how long a lease outlives the attempt that took it:
	// the recording after it, and the clocks' difference.
	leaseMargin = 10 * time.Second
	// recordMargin is kept after the attempt for recording it.
	recordMargin = 2 * time.Second
)

// Config is what a Handler needs. Store, Sealer and Client are required.
type Config struct {
	// Store leases deliveries and records attempts (postgres.DB, as the
	// role jobboard_webhooks).
	Store jobboard.WebhookAttemptStore
	// Sealer opens the endpoints' signing secrets.
	Sealer jobboard.SecretSealer
	// Client sends the requests.
	Client *Client
	// AttemptTimeout is the Client's timeout; a record is not started with
	// less time than it (and a margin) left in the invocation. Zero:
	// DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// Redelivery gives failed records their backoff (queue.Redeliverer).
	// Nil: they wait for the queue's visibility timeout.
	Redelivery jobboard.Redeliverer
	// Requeuer sends the deliveries put off (jobboard.TargetDeferred) again
	// as new messages (queue.Redeliverer), so that waiting for a slow slot
	// of their company does not count receives toward the dead-letter
	// queue. Nil: they fail and wait counting a receive.
	Requeuer jobboard.Requeuer
	// Concurrency bounds the records attempted at once. Zero:
	// DefaultConcurrency.
	Concurrency int
	// BackoffBase and BackoffMax shape the retries. Zero: their defaults.
	BackoffBase, BackoffMax time.Duration
	// RetryWindow is how long after its dispatch a delivery is retried.
	// Zero: jobboard.WebhookRetryWindow.
	RetryWindow time.Duration
	// DisableAfter disables an endpoint that has failed every attempt for
	// so long. Zero: jobboard.WebhookDisableAfter.
	DisableAfter time.Duration
	// Logger receives one line per record. Nil: discard.
	Logger *slog.Logger
	// Metrics receives one EMF line per batch. Nil: discard.
	Metrics io.Writer
	// FunctionVersion is the Lambda function version that runs the handler
	// (function.Settings.Version): the metric line carries it as a
	// dimension too, so that a deploy's rollback alarms watch the new
	// version alone. Empty outside Lambda.
	FunctionVersion string
	// Now and Jitter are the clock and the source of jitter in [0, 1).
	Now    func() time.Time
	Jitter func() float64
}

// Handler handles batches of delivery requests. It is safe for concurrent
// use.
type Handler struct {
	c     Config
	batch sqsbatch.Config
}

// New returns a Handler. Errors: a required dependency is missing or a
// setting is out of range.
func New(c Config) (*Handler, error) {
	if c.Store == nil || c.Sealer == nil || c.Client == nil {
		return nil, errors.New("webhook: Store, Sealer and Client are required")
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&c.AttemptTimeout, DefaultAttemptTimeout}, {&c.BackoffBase, min(DefaultBackoffBase, c.BackoffMax)},
		{&c.RetryWindow, jobboard.WebhookRetryWindow}, {&c.DisableAfter, jobboard.WebhookDisableAfter},
	} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 {
			return nil, errors.New("webhook: durations must not be negative")
		}
	}
	if c.BackoffMax < 0 || c.BackoffMax > DefaultBackoffMax || c.BackoffBase > c.BackoffMax {
		return nil, fmt.Errorf("webhook: backoff %v to %v: want base ≤ max ≤ %v", c.BackoffBase, c.BackoffMax, DefaultBackoffMax)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Concurrency < 0 {
		return nil, fmt.Errorf("webhook: concurrency %d must be positive", c.Concurrency)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = io.Discard
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Jitter == nil {
		c.Jitter = rand.Float64
	}
	// A record is not started without the time for its attempt and the
	// recording after it.
	batch := sqsbatch.Config{StartMargin: c.AttemptTimeout + recordMargin + time.Second, Concurrency: c.Concurrency,
		Redelivery: c.Redelivery, Requeuer: c.Requeuer, Logger: c.Logger, Now: c.Now}
	return &Handler{c: c, batch: batch}, nil
}

// Outcomes of a record, as logged ("outcome") and counted.
const (
	outcomeDelivered  = "delivered"
	outcomeRetry      = "retry"
	outcomeExhausted  = "retries_exhausted"
	outcomeGone       = "gone"
	outcomeMalformed  = "malformed"
	outcomeStoreError = "store_error"
	outcomeUnsealable = "secret_unavailable"
	outcomeNotStarted = "not_started"
	outcomeLeaseLost  = "lease_lost"
	outcomeDeferred   = jobboard.TargetDeferred
)

// result is what became of one record.
type result struct {
	outcome string
	// failed records are reported in batchItemFailures and come back after
	// delay.
	failed bool
	delay  time.Duration
	// attempted: an HTTP attempt was made.
	attempted bool
	// disabled: the endpoint was disabled by this record.
	disabled bool
	// deferred: put off, sent again after delay (sqsbatch.Result.Requeue).
	deferred  bool
	storeErr  error
	answered  bool // the database answered
	statusErr bool // an attempt that failed at the receiver
	// cause is what our logs say of an attempt without an answer, where
	// the delivery log says less (attemptError).
	cause string
}

// Handle attempts the deliveries of a batch, up to Concurrency at once,
// and reports the ones to retry, each with its backoff. It returns an
// error, failing the whole batch, only when the database failed for every
// record (an outage, not a bad record).
func (h *Handler) Handle(ctx context.Context, batch events.SQSEvent) (events.SQSEventResponse, error) {
	recs := make([]sqsbatch.Record[*delivery], len(batch.Records))
	for i, m := range batch.Records {
		d := &delivery{}
		d.ev, d.err = jobboard.DecodeEvent([]byte(m.Body))
		if d.err == nil && d.ev.Type != jobboard.EventTypeWebhookDelivery {
			d.err = fmt.Errorf("no handler for event type %q", d.ev.Type)
		}
		recs[i] = sqsbatch.Record[*delivery]{Message: m, Value: d}
	}
	resp, err := sqsbatch.Consume(ctx, h.batch, recs, sqsbatch.Handler[*delivery]{Process: h.handleRecord, NotStarted: h.notStarted})
	h.writeMetrics(recs)
	return resp, err
}

// delivery is one record of the batch, decoded, and what became of it.
type delivery struct {
	ev  jobboard.Event
	err error
	res result
}

// logger returns the logger of a record's lines.
func (h *Handler) logger(r sqsbatch.Record[*delivery]) *slog.Logger {
	return h.c.Logger.With(slog.String("message_id", r.Message.MessageId), slog.Int64("delivery_id", r.Value.ev.DeliveryID),
		slog.Int64("generation", r.Value.ev.Generation), slog.Int("receive_count", r.Receives()))
}

// notStarted logs a record that is not started: it is retried in a second.
func (h *Handler) notStarted(ctx context.Context, r sqsbatch.Record[*delivery], why string, _ *sqsbatch.Record[*delivery]) time.Duration {
	h.logger(r).LogAttrs(ctx, slog.LevelWarn, "record not started: "+why, slog.String("outcome", outcomeNotStarted))
	r.Value.res = result{outcome: outcomeNotStarted, failed: true, delay: time.Second}
	return r.Value.res.delay
}

// handleRecord processes a record for the consumer.
func (h *Handler) handleRecord(ctx context.Context, r sqsbatch.Record[*delivery]) sqsbatch.Result {
	res := h.process(ctx, r)
	r.Value.res = res
	return sqsbatch.Result{Failed: res.failed, RetryIn: res.delay, Answered: res.answered, StoreErr: res.storeErr, Requeue: res.deferred}
}

// process handles one record and logs one line about it.
func (h *Handler) process(ctx context.Context, r sqsbatch.Record[*delivery]) result {
	n, ev, log := r.Receives(), r.Value.ev, h.logger(r)
	if r.Value.err != nil {
		log.LogAttrs(ctx, slog.LevelError, "malformed message; it goes to the dead-letter queue",
			slog.String("outcome", outcomeMalformed), slog.String("error", r.Value.err.Error()))
		return result{outcome: outcomeMalformed, failed: true}
	}

	t, err := h.c.Store.BeginWebhookAttempt(ctx, ev.DeliveryID, ev.Generation, h.c.AttemptTimeout+recordMargin+leaseMargin)
	if err != nil {
		log.LogAttrs(ctx, slog.LevelError, "database failed; nothing attempted, will retry",
			slog.String("outcome", outcomeStoreError), slog.String("error", err.Error()))
		return result{outcome: outcomeStoreError, failed: true, delay: h.backoff(n), storeErr: err}
	}
	log = log.With(slog.String("event_id", t.Event.ID), slog.Int64("endpoint_id", t.EndpointID))
	switch t.Outcome {
	case "":
	case jobboard.TargetBusy:
		log.LogAttrs(ctx, slog.LevelWarn, "another attempt holds the delivery; will retry after its lease",
			slog.String("outcome", t.Outcome), slog.Duration("busy_for", t.BusyFor))
		return result{outcome: t.Outcome, failed: true, answered: true, delay: t.BusyFor + time.Second}
	case jobboard.TargetDeferred:
		// Its company's slow slots are taken: an attempt now would hold
		// an invocation that other companies' deliveries need. It waits
		// about an attempt's time for a slot to free.
		delay := h.c.AttemptTimeout/2 + time.Duration(h.c.Jitter()*float64(h.c.AttemptTimeout/2))
		log.LogAttrs(ctx, slog.LevelInfo, "the endpoint is slow and its company's slow slots are taken; put off",
			slog.String("outcome", t.Outcome), slog.Duration("retry_in", delay))
		return result{outcome: t.Outcome, deferred: true, answered: true, delay: delay}
	default:
		log.LogAttrs(ctx, slog.LevelInfo, "nothing to attempt", slog.String("outcome", t.Outcome))
		return result{outcome: t.Outcome, answered: true}
	}

	keys, err := h.keys(t)
	if err != nil {
		// A sealing key this function lacks (a misconfiguration): nothing
		// to attempt until it is fixed; the lease runs out.
		log.LogAttrs(ctx, slog.LevelError, "cannot open the endpoint's signing secret; will retry",
			slog.String("outcome", outcomeUnsealable), slog.String("error", err.Error()))
		return result{outcome: outcomeUnsealable, failed: true, answered: true, delay: h.backoff(n)}
	}
	rec, res := h.attempt(ctx, t, keys)
	return h.record(ctx, log, t, rec, res)
}

// keys opens the endpoint's signing secrets: the current one, and the
// previous one while it still signs.
func (h *Handler) keys(t jobboard.WebhookTarget) ([][]byte, error) {
	var keys [][]byte
	for _, sealed := range [][]byte{t.Secret, t.PreviousSecret} {
		if sealed == nil {
			continue
		}
		secret, err := h.c.Sealer.Open(sealed, jobboard.WebhookSecretContext(t.CompanyID))
		if err != nil {
			return nil, err
		}
		key, err := jobboard.WebhookSecretKey(string(secret))
		if err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// attempt makes the HTTP attempt and decides the delivery's next state.
func (h *Handler) attempt(ctx context.Context, t jobboard.WebhookTarget, keys [][]byte) (jobboard.WebhookAttemptRecord, result) {
	body := t.Event.Payload()
	at := h.c.Now()
	resp, err := h.c.Client.Send(ctx, Request{URL: t.URL, ID: t.Event.ID, Timestamp: at, Body: body, Signature: Sign(t.Event.ID, at, body, keys...)})
	latency := h.c.Now().Sub(at)
	rec := jobboard.WebhookAttemptRecord{
		DeliveryID: t.DeliveryID, Generation: t.Generation, Token: t.Token, Trigger: t.Trigger, EndpointID: t.EndpointID,
		Attempt:      jobboard.WebhookAttempt{AttemptedAt: at, LatencyMS: latency.Milliseconds()},
		DisableAfter: h.c.DisableAfter,
		Slow:         latency >= jobboard.WebhookSlowAttempt,
	}
	res := result{attempted: true}
	if err != nil {
		rec.Attempt.Error, res.cause = attemptError(err, h.c.AttemptTimeout)
	} else {
		code := resp.StatusCode
		rec.Attempt.StatusCode = &code
		rec.Attempt.ResponseBody, rec.Attempt.ResponseTruncated = logged(resp.Body, resp.Truncated)
	}
	switch {
	case err == nil && resp.StatusCode >= 200 && resp.StatusCode <= 299:
		rec.State, res.outcome = jobboard.DeliveryDelivered, outcomeDelivered
	case err == nil && resp.StatusCode == http.StatusGone:
		rec.State, rec.FailureReason, rec.Gone, res.outcome = jobboard.DeliveryFailed, jobboard.FailureGone, true, outcomeGone
	case h.c.Now().Sub(t.DispatchedAt) >= h.c.RetryWindow:
		rec.State, rec.FailureReason, res.outcome = jobboard.DeliveryFailed, jobboard.FailureExpired, outcomeExhausted
	default:
		// The attempts of the dispatch, not the message's receives: a
		// delivery put off comes back as a new message.
		delay := h.backoff(t.Attempts + 1)
		if err == nil && resp.RetryAfter > delay {
			delay = min(resp.RetryAfter, h.c.BackoffMax)
		}
		next := h.c.Now().Add(delay)
		rec.State, rec.NextAttemptAt, res.outcome = jobboard.DeliveryPending, &next, outcomeRetry
		res.failed, res.delay = true, delay
	}
	res.statusErr = res.outcome != outcomeDelivered
	return rec, res
}

// record writes the attempt down, retrying a database blip within the
// invocation. A delivery whose attempt cannot be recorded is retried: its
// receiver may get it once more, under the same webhook-id, rather than
// never again.
func (h *Handler) record(ctx context.Context, log *slog.Logger, t jobboard.WebhookTarget, rec jobboard.WebhookAttemptRecord, res result) result {
	var out jobboard.WebhookAttemptOutcome
	rctx, cancel := context.WithTimeout(ctx, recordMargin)
	defer cancel()
	err := sqsbatch.Retry(rctx, func() error {
		var err error
		out, err = h.c.Store.FinishWebhookAttempt(rctx, rec)
		return err
	})
	attrs := []slog.Attr{slog.String("outcome", res.outcome), slog.Int("attempts", t.Attempts+1),
		slog.Int64("latency_ms", rec.Attempt.LatencyMS), slog.String("trigger", t.Trigger)}
	if rec.Attempt.StatusCode != nil {
		attrs = append(attrs, slog.Int("status_code", *rec.Attempt.StatusCode))
	}
	if rec.Attempt.Error != "" {
		attrs = append(attrs, slog.String("error", rec.Attempt.Error))
	}
	if res.cause != rec.Attempt.Error {
		attrs = append(attrs, slog.String("cause", res.cause))
	}
	if res.failed {
		attrs = append(attrs, slog.Duration("retry_in", res.delay))
	}
	if err != nil {
		log.LogAttrs(ctx, slog.LevelError, "attempt made, but it could not be recorded; will retry (the receiver may get it again)",
			append(attrs, slog.String("store_error", err.Error()))...)
		return result{outcome: outcomeStoreError, failed: true, delay: time.Second, attempted: true, storeErr: err}
	}
	res.answered = true
	res.disabled = out.Disabled
	if out.Disabled {
		attrs = append(attrs, slog.String("disabled", out.DisabledReason))
		log.LogAttrs(ctx, slog.LevelWarn, "endpoint disabled; its company's members are emailed", attrs...)
	}
	if out.LeaseLost {
		// A replay started a newer dispatch meanwhile (its message
		// carries on), or the lease ran out: this message is done.
		log.LogAttrs(ctx, slog.LevelWarn, "attempt logged, but the delivery had moved on", append(attrs, slog.String("outcome", outcomeLeaseLost))...)
		return result{outcome: outcomeLeaseLost, attempted: true, answered: true, statusErr: res.statusErr}
	}
	level := slog.LevelInfo
	if res.outcome != outcomeDelivered {
		level = slog.LevelWarn
	}
	log.LogAttrs(ctx, level, "attempt "+res.outcome, attrs...)
	return res
}

// attemptError describes an attempt without an answer, without the URL:
// shown is what the company's delivery log says, cause what our logs say.
// They differ for ErrDestination alone, whose details are ours.
func attemptError(err error, timeout time.Duration) (shown, cause string) {
	switch {
	case errors.Is(err, ErrDestination):
		return ErrDestination.Error(), printable(urlError(err).Error(), jobboard.MaxLoggedResponse)
	case errors.Is(err, ErrURLNotAllowed):
		shown = err.Error()
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		shown = "no answer within " + timeout.String()
	default:
		shown = printable(urlError(err).Error(), jobboard.MaxLoggedResponse)
	}
	return shown, shown
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// logged returns the start of a body as the log keeps it: at most
// jobboard.MaxLoggedResponse bytes of valid UTF-8 without NUL.
func logged(body []byte, truncated bool) (string, bool) {
	if len(body) > jobboard.MaxLoggedResponse {
		body, truncated = body[:jobboard.MaxLoggedResponse], true
	}
	return printable(string(body), jobboard.MaxLoggedResponse), truncated
}

func printable(s string, limit int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	for len(s) > limit {
		_, size := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-size]
	}
	return s
}

// backoff is the delay before the next attempt of a delivery that failed
// its n-th attempt (or receive): BackoffBase doubling per attempt up to
// BackoffMax, with equal jitter (half the step plus a random part of the
// other half), so that the retries of one outage spread out.
func (h *Handler) backoff(attempts int) time.Duration {
	step := h.c.BackoffMax
	if n := attempts - 1; n < 40 {
		step = min(h.c.BackoffMax, h.c.BackoffBase<<max(n, 0))
		if step <= 0 { // overflow
			step = h.c.BackoffMax
		}
	}
	return step/2 + time.Duration(h.c.Jitter()*float64(step/2))
}
