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
	// Now is the clock of the metric line. Default: time.Now.
	Now func() time.Time
}

// Handler applies batches of feedback records. It is safe for concurrent
// use.
type Handler struct{ c Config }

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
	return &Handler{c: c}, nil
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
// database could not take (retried). When the database fails every
// record, the whole batch fails.
func (h *Handler) Handle(ctx context.Context, batch events.SQSEvent) (events.SQSEventResponse, error) {
	var (
		resp      events.SQSEventResponse
		counts    = map[string]int{}
		storeErrs []error
	)
	for _, msg := range batch.Records {
		f, err := Decode([]byte(msg.Body))
		if err != nil {
			counts[metricMalformed]++
			h.c.Logger.LogAttrs(ctx, slog.LevelError, "malformed SES event; it goes to the dead-letter queue",
				slog.String("message_id", msg.MessageId), slog.String("outcome", "malformed"), slog.String("error", err.Error()))
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			continue
		}
		attrs := []slog.Attr{
			slog.String("message_id", msg.MessageId), slog.String("feedback_id", f.ID),
			slog.String("kind", string(f.Kind)), slog.String("ses_message_id", f.MessageID),
			slog.String("event_id", f.EventID),
		}
		if f.Kind == jobboard.FeedbackIgnored {
			h.c.Logger.LogAttrs(ctx, slog.LevelDebug, "SES event of a type not acted on", append(attrs, slog.String("outcome", "ignored"))...)
			continue
		}
		res, err := h.c.Store.ApplyFeedback(ctx, f)
		if err != nil {
			counts[metricStoreErrors]++
			storeErrs = append(storeErrs, err)
			h.c.Logger.LogAttrs(ctx, slog.LevelError, "database failed; feedback not applied, will retry",
				append(attrs, slog.String("outcome", "store_error"), slog.String("error", err.Error()))...)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: msg.MessageId})
			continue
		}
		if res.Duplicate {
			counts[metricDuplicates]++
			h.c.Logger.LogAttrs(ctx, slog.LevelInfo, "feedback applied already; duplicate skipped",
				append(attrs, slog.String("outcome", "duplicate"))...)
			continue
		}
		counts[metricApplied]++
		counts[metricSuppressed] += len(res.Suppressed)
		switch f.Kind {
		case jobboard.FeedbackBounced:
			counts[metricBounces]++
		case jobboard.FeedbackSoftBounced:
			counts[metricSoftBounces]++
		case jobboard.FeedbackComplained:
			counts[metricComplaints]++
		}
		level := slog.LevelInfo
		if len(res.Suppressed) > 0 {
			// An address lost: worth a look in the logs, not an alarm each.
			level = slog.LevelWarn
			attrs = append(attrs, slog.Int("suppressed", len(res.Suppressed)))
		}
		h.c.Logger.LogAttrs(ctx, level, "feedback applied", append(attrs, slog.String("outcome", "applied"), slog.String("detail", f.Detail))...)
	}
	ms := make([]emf.Metric, len(metricNames))
	for i, name := range metricNames {
		ms[i] = emf.Metric{Name: name, Unit: emf.Count, Value: float64(counts[name])}
	}
	emf.WriteByVersion(h.c.Metrics, "feedback", h.c.FunctionVersion, h.c.Now(), ms...)
	if len(batch.Records) > 0 && len(storeErrs) == len(batch.Records) {
		// Nothing reached the database: fail the batch as a whole (the
		// function's Errors metric and alarm see it).
		return events.SQSEventResponse{}, errors.Join(storeErrs...)
	}
	return resp, nil
}
