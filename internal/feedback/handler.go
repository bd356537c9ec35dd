package feedback

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/emf"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/sqsbatch"
)

// Config is what a Handler needs. Store is required.
type Config struct {
	Store jobboard.FeedbackStore
	// Logger receives one JSON line per record. Nil: discard.
	Logger *slog.Logger
	// Metrics receives one CloudWatch Embedded Metric Format line per
	// batch. Nil: discard.
	Metrics io.Writer
	// FunctionVersion is the metric line's version dimension (empty
	// outside Lambda).
	FunctionVersion string
	// Now is the clock of the metric line and the deadline. Default:
	// time.Now.
	Now func() time.Time
}

// Handler applies batches of feedback records. It is safe for concurrent
// use.
type Handler struct {
	c     Config
	batch sqsbatch.Config
}

// startMargin: a record is not started with less time than this left
// before the deadline, time enough for its one short statement.
const startMargin = time.Second

// New returns a Handler. Errors: a missing Store.
func New(c Config) (*Handler, error) {
	if c.Store == nil {
		return nil, errors.New("feedback: Store is required")
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
	// One record at a time, on the one connection of the function's pool.
	return &Handler{c: c, batch: sqsbatch.Config{StartMargin: startMargin, Concurrency: 1, Logger: c.Logger, Now: c.Now}}, nil
}

// The metrics of a batch, every one on every line.
const (
	metricApplied     = "FeedbackApplied"
	metricDuplicates  = "FeedbackDuplicates"
	metricSuppressed  = "AddressesSuppressed"
	metricBounces     = "HardBounces"
	metricSoftBounces = "SoftBounces"
	metricComplaints  = "Complaints"
	metricMalformed   = "FeedbackMalformed"
	metricStoreErrors = "FeedbackStoreErrors"
)

var metricNames = []string{metricApplied, metricDuplicates, metricSuppressed, metricBounces,
	metricSoftBounces, metricComplaints, metricMalformed, metricStoreErrors}

// Handle applies each record of the batch, one after the other (one short
// statement each), and reports the records that failed: malformed ones
// (they reach the DLQ after maxReceiveCount, intact) and those the
// database could not take (retried). When no record reached the database
// because it failed, the whole batch fails.
func (h *Handler) Handle(ctx context.Context, batch events.SQSEvent) (events.SQSEventResponse, error) {
	recs := make([]sqsbatch.Record[*record], len(batch.Records))
	for i, m := range batch.Records {
		r := &record{}
		r.f, r.err = Decode([]byte(m.Body))
		recs[i] = sqsbatch.Record[*record]{Message: m, Value: r}
	}
	resp, err := sqsbatch.Consume(ctx, h.batch, recs, sqsbatch.Handler[*record]{Process: h.apply, NotStarted: h.notStarted})
	counts := map[string]int{}
	for _, r := range recs {
		for name, n := range r.Value.counts {
			counts[name] += n
		}
	}
	ms := make([]emf.Metric, len(metricNames))
	for i, name := range metricNames {
		ms[i] = emf.Metric{Name: name, Unit: emf.Count, Value: float64(counts[name])}
	}
	emf.WriteByVersion(h.c.Metrics, "feedback", h.c.FunctionVersion, h.c.Now(), ms...)
	return resp, err
}

// record is one message of the batch, decoded, and the metrics it adds to.
type record struct {
	f      jobboard.Feedback
	err    error
	counts map[string]int
}

// notStarted logs a record that the deadline left no time for; it comes
// back after the visibility timeout.
func (h *Handler) notStarted(ctx context.Context, r sqsbatch.Record[*record], why string, _ *sqsbatch.Record[*record]) time.Duration {
	h.c.Logger.LogAttrs(ctx, slog.LevelWarn, "record not started: "+why,
		slog.String("message_id", r.Message.MessageId), slog.String("feedback_id", r.Value.f.ID), slog.String("outcome", "not_started"))
	return 0
}

// apply applies one record and logs one line about it.
func (h *Handler) apply(ctx context.Context, rec sqsbatch.Record[*record]) sqsbatch.Result {
	msg, f, r := rec.Message, rec.Value.f, rec.Value
	r.counts = map[string]int{}
	if r.err != nil {
		r.counts[metricMalformed]++
		h.c.Logger.LogAttrs(ctx, slog.LevelError, "malformed SES event; it goes to the dead-letter queue",
			slog.String("message_id", msg.MessageId), slog.String("outcome", "malformed"), slog.String("error", r.err.Error()))
		return sqsbatch.Result{Failed: true}
	}
	attrs := []slog.Attr{
		slog.String("message_id", msg.MessageId), slog.String("feedback_id", f.ID),
		slog.String("kind", string(f.Kind)), slog.String("ses_message_id", f.MessageID),
		slog.String("event_id", f.EventID),
	}
	if f.Kind == jobboard.FeedbackIgnored {
		h.c.Logger.LogAttrs(ctx, slog.LevelDebug, "SES event of a type not acted on", append(attrs, slog.String("outcome", "ignored"))...)
		return sqsbatch.Result{}
	}
	res, err := h.c.Store.ApplyFeedback(ctx, f)
	if err != nil {
		r.counts[metricStoreErrors]++
		h.c.Logger.LogAttrs(ctx, slog.LevelError, "database failed; feedback not applied, will retry",
			append(attrs, slog.String("outcome", "store_error"), slog.String("error", err.Error()))...)
		return sqsbatch.Result{Failed: true, StoreErr: err}
	}
	if res.Duplicate {
		r.counts[metricDuplicates]++
		h.c.Logger.LogAttrs(ctx, slog.LevelInfo, "feedback applied already; duplicate skipped",
			append(attrs, slog.String("outcome", "duplicate"))...)
		return sqsbatch.Result{Answered: true}
	}
	r.counts[metricApplied]++
	r.counts[metricSuppressed] += len(res.Suppressed)
	switch f.Kind {
	case jobboard.FeedbackBounced:
		r.counts[metricBounces]++
	case jobboard.FeedbackSoftBounced:
		r.counts[metricSoftBounces]++
	case jobboard.FeedbackComplained:
		r.counts[metricComplaints]++
	}
	level := slog.LevelInfo
	if len(res.Suppressed) > 0 {
		// An address lost: worth a look in the logs, not an alarm each.
		level = slog.LevelWarn
		attrs = append(attrs, slog.Int("suppressed", len(res.Suppressed)))
	}
	h.c.Logger.LogAttrs(ctx, level, "feedback applied", append(attrs, slog.String("outcome", "applied"), slog.String("detail", f.Detail))...)
	return sqsbatch.Result{Answered: true}
}
