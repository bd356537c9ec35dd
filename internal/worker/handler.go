// Package worker is the status-email worker: the handler that the SQS event
// source mapping invokes with a batch of status events. For each record, in
// one database transaction, it claims the event id, loads the application
// and emails the candidate; a normal return commits, an error rolls the
// claim back. Only the records that failed are reported back, so SQS
// redelivers them and deletes the rest.
//
// What happens in each case is the outcome table of DESIGN.md; the tests of
// this package act it out against PostgreSQL and the local stand-ins for
// SQS and SES.
package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Defaults for Config's margins.
const (
	// DefaultStartMargin: a record is not started with less time than this
	// left before the Lambda deadline. It covers one claim, one send and a
	// commit.
	DefaultStartMargin = 5 * time.Second
	// DefaultSendMargin: the email send must give up this long before the
	// deadline, leaving time to roll back and report the failure.
	DefaultSendMargin = 2 * time.Second
)

// returnMargin is kept free at the end of an invocation for the database to
// give up and for the response to be returned.
const returnMargin = 250 * time.Millisecond

// Config is what a Handler needs. Store and Mailer are required.
type Config struct {
	// Store claims events and loads applications (postgres.DB).
	Store jobboard.EventStore
	// Mailer sends the status emails (mail.Sender).
	Mailer jobboard.Mailer
	// Logger receives one JSON line per record. Default: discard.
	Logger *slog.Logger
	// Metrics receives one CloudWatch Embedded Metric Format line per batch;
	// in Lambda it is stdout, like the logs. Default: discard.
	Metrics io.Writer
	// StartMargin and SendMargin bound the work against the Lambda deadline;
	// zero means DefaultStartMargin and DefaultSendMargin.
	StartMargin time.Duration
	SendMargin  time.Duration
	// Now is the clock the deadline is compared with. Default: time.Now.
	Now func() time.Time
}

// Handler handles batches of status events. It is safe for concurrent use.
type Handler struct {
	store       jobboard.EventStore
	mailer      jobboard.Mailer
	log         *slog.Logger
	metrics     io.Writer
	startMargin time.Duration
	sendMargin  time.Duration
	now         func() time.Time
}

// New returns a Handler. It returns an error when a required dependency is
// missing or the margins are inconsistent.
func New(c Config) (*Handler, error) {
	if c.Store == nil || c.Mailer == nil {
		return nil, errors.New("worker: Store and Mailer are required")
	}
	h := &Handler{
		store: c.Store, mailer: c.Mailer,
		log: c.Logger, metrics: c.Metrics,
		startMargin: c.StartMargin, sendMargin: c.SendMargin, now: c.Now,
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.metrics == nil {
		h.metrics = io.Discard
	}
	if h.startMargin == 0 {
		h.startMargin = DefaultStartMargin
	}
	if h.sendMargin == 0 {
		h.sendMargin = DefaultSendMargin
	}
	if h.sendMargin >= h.startMargin {
		return nil, fmt.Errorf("worker: send margin %v must be shorter than start margin %v", h.sendMargin, h.startMargin)
	}
	if h.now == nil {
		h.now = time.Now
	}
	return h, nil
}

// Outcomes of a record beyond the store's jobboard.EventOutcome values, as
// they appear in the "outcome" field of the logs.
const (
	outcomeMalformed  = "malformed"
	outcomeSendFailed = "send_failed"
	outcomeThrottled  = "throttled"
	outcomeBusy       = "busy"
	outcomeStoreError = "store_error"
	outcomeNotStarted = "not_started"
)

// Handle processes a batch and reports the records that failed, which SQS
// will deliver again. Records run one after another, in order, so the same
// event twice in one batch is claimed by the first and skipped by the second.
//
// It returns an error, failing the whole batch, only when not one record
// reached the database because the database failed (it is unreachable, for
// instance): that is an outage, not a bad record.
func (h *Handler) Handle(ctx context.Context, batch events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	var (
		m          metrics
		stop       string // why the rest of the batch is not started, once set
		answered   int    // records the database gave an answer about
		storeError error  // the first failure of the database itself
	)
	defer func() { m.write(h.metrics, h.now()) }()

	for _, rec := range batch.Records {
		if stop == "" {
			stop = h.tooLate(ctx)
		}
		if stop != "" {
			ev, _ := jobboard.DecodeEvent([]byte(rec.Body)) // for the log line's ids only
			h.logRecord(ctx, slog.LevelWarn, "record not started: "+stop, rec.MessageId, ev, outcomeNotStarted)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			continue
		}
		r := h.process(ctx, rec, &m)
		if r.failed {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
		if r.answered {
			answered++
		}
		if r.storeErr != nil && storeError == nil {
			storeError = r.storeErr
		}
		if r.stopBatch != "" {
			stop = r.stopBatch
		}
	}
	if answered == 0 && storeError != nil {
		return events.SQSEventResponse{}, fmt.Errorf("no record of the batch could be processed: %w", storeError)
	}
	return resp, nil
}

// tooLate says why no new record should start, or "".
func (h *Handler) tooLate(ctx context.Context) string {
	if err := ctx.Err(); err != nil {
		return "invocation cancelled"
	}
	if deadline, ok := ctx.Deadline(); ok && deadline.Sub(h.now()) < h.startMargin {
		return "the Lambda deadline is near"
	}
	return ""
}

// result is what became of one record.
type result struct {
	failed    bool   // report it in batchItemFailures
	answered  bool   // the database answered (even if the record failed)
	storeErr  error  // the database itself failed
	stopBatch string // do not start the rest of the batch, and why
}

// process handles one record and logs one line about it.
func (h *Handler) process(ctx context.Context, rec events.SQSMessage, m *metrics) result {
	ev, err := jobboard.DecodeEvent([]byte(rec.Body))
	if err == nil && ev.Type != jobboard.EventTypeStatusChanged {
		err = fmt.Errorf("unknown event type %q", ev.Type)
	}
	if err != nil {
		m.malformed++
		h.logRecord(ctx, slog.LevelError, "malformed message; it will reach the dead-letter queue", rec.MessageId, ev, outcomeMalformed,
			slog.String("error", err.Error()))
		return result{failed: true}
	}

	dbCtx, sendCtx, cancel := h.contexts(ctx)
	defer cancel()
	var (
		providerID string
		sendErr    error
	)
	outcome, err := h.store.ProcessStatusEvent(dbCtx, ev, ev.PayloadHash(), func(_ context.Context, d jobboard.ApplicationDetails) error {
		providerID, sendErr = h.mailer.SendStatusEmail(sendCtx, statusEmail(ev, d))
		return sendErr
	})

	switch {
	case err == nil:
		return h.done(ctx, rec, ev, outcome, providerID, sendErr, m)
	case sendErr != nil && errors.Is(err, sendErr):
		m.sendFailures++
		if errors.Is(sendErr, jobboard.ErrMailThrottled) {
			h.logRecord(ctx, slog.LevelWarn, "mail service throttled; claim rolled back, the rest of the batch is not started",
				rec.MessageId, ev, outcomeThrottled, slog.String("error", sendErr.Error()))
			return result{failed: true, answered: true, stopBatch: "the mail service throttled an earlier record"}
		}
		h.logRecord(ctx, slog.LevelWarn, "send failed; claim rolled back, will retry", rec.MessageId, ev, outcomeSendFailed,
			slog.String("error", sendErr.Error()))
		return result{failed: true, answered: true}
	case errors.Is(err, jobboard.ErrEventBusy):
		h.logRecord(ctx, slog.LevelWarn, "another worker holds the claim; will retry", rec.MessageId, ev, outcomeBusy,
			slog.String("error", err.Error()))
		return result{failed: true, answered: true}
	default:
		msg := "database failed; claim rolled back, will retry"
		if providerID != "" {
			// The one window the design cannot close: the email left, the
			// claim did not commit, so a redelivery sends it again.
			msg = "email sent but the claim did not commit; a redelivery will send it again"
		}
		h.logRecord(ctx, slog.LevelError, msg, rec.MessageId, ev, outcomeStoreError,
			slog.String("error", err.Error()), slog.String("ses_message_id", providerID))
		// The next records would most likely meet the same failure, each
		// after its own connect timeout: leave them for redelivery.
		return result{failed: true, storeErr: err, stopBatch: "the database failed on an earlier record"}
	}
}

// done logs and counts a record whose transaction committed.
func (h *Handler) done(ctx context.Context, rec events.SQSMessage, ev jobboard.Event,
	outcome jobboard.EventOutcome, providerID string, sendErr error, m *metrics,
) result {
	o := string(outcome)
	switch outcome {
	case jobboard.OutcomeSent:
		m.sent++
		h.logRecord(ctx, slog.LevelInfo, "status email sent", rec.MessageId, ev, o, slog.String("ses_message_id", providerID))
	case jobboard.OutcomeDuplicate:
		// Expected with at-least-once delivery: INFO, not a warning.
		m.duplicates++
		h.logRecord(ctx, slog.LevelInfo, "event already processed; duplicate skipped", rec.MessageId, ev, o)
	case jobboard.OutcomePayloadMismatch:
		m.duplicates++
		h.logRecord(ctx, slog.LevelError, "same event_id, different payload; not emailed", rec.MessageId, ev, o)
	case jobboard.OutcomeApplicationMissing:
		h.logRecord(ctx, slog.LevelWarn, "application no longer exists; skipped", rec.MessageId, ev, o)
	case jobboard.OutcomeRejected:
		m.sendFailures++
		attrs := []slog.Attr{}
		if sendErr != nil {
			attrs = append(attrs, slog.String("error", sendErr.Error()))
		}
		h.logRecord(ctx, slog.LevelWarn, "mail service rejected the email permanently; not retried", rec.MessageId, ev, o, attrs...)
	default:
		h.logRecord(ctx, slog.LevelInfo, "event processed", rec.MessageId, ev, o)
	}
	return result{answered: true}
}

// contexts returns the context of the database work, which must end in
// time to return the response, and the context of the send, which must end
// in time to roll back as well.
func (h *Handler) contexts(ctx context.Context) (dbCtx, sendCtx context.Context, cancel func()) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return ctx, ctx, func() {}
	}
	dbCtx, cancelDB := context.WithDeadline(ctx, deadline.Add(-returnMargin))
	sendCtx, cancelSend := context.WithDeadline(dbCtx, deadline.Add(-h.sendMargin))
	return dbCtx, sendCtx, func() { cancelSend(); cancelDB() }
}

// statusEmail is what the candidate is told: the event's change, about the
// application as it is now.
func statusEmail(ev jobboard.Event, d jobboard.ApplicationDetails) jobboard.StatusEmail {
	return jobboard.StatusEmail{
		EventID:       ev.EventID,
		To:            d.CandidateEmail,
		CandidateName: d.CandidateName,
		JobTitle:      d.JobTitle,
		CompanyName:   d.CompanyName,
		ApplicationID: d.ApplicationID,
		OldStatus:     ev.OldStatus,
		NewStatus:     ev.NewStatus,
	}
}

// logRecord writes the one line about a record. Every line carries the same
// four fields, empty when unknown (a malformed message has no event id), so
// that a query over the logs can rely on them.
func (h *Handler) logRecord(ctx context.Context, level slog.Level, msg, messageID string,
	ev jobboard.Event, outcome string, extra ...slog.Attr,
) {
	attrs := append([]slog.Attr{
		slog.String("event_id", ev.EventID),
		slog.String("message_id", messageID),
		slog.Int64("application_id", ev.ApplicationID),
		slog.String("outcome", outcome),
	}, extra...)
	h.log.LogAttrs(ctx, level, msg, attrs...)
}
