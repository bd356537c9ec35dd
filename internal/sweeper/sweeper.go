// Package sweeper is the scheduled janitor of the database: it publishes
// the outbox rows that the API's relay (package outbox) left unpublished
// after a grace period, expires those too old to be published, measures the
// backlogs, and applies the retention.
package sweeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/emf"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// Defaults of Config.
const (
	// DefaultGrace leaves a fresh row to the API's relay, which normally
	// publishes it within milliseconds of the commit.
	DefaultGrace = 30 * time.Second
	// DefaultMaxEvents bounds the events one sweep publishes, so a backlog
	// is worked off over several runs instead of one endless invocation.
	DefaultMaxEvents = 500
	// DefaultDeleteBatch is the rows each retention DELETE removes: small
	// enough that no statement holds its locks for long.
	DefaultDeleteBatch = 1000
)

// publishBatch is how many rows one sweeper transaction locks: one SQS
// SendMessageBatch.
const publishBatch = 10

// Config is what a Sweeper needs. Store and Publisher are required;
// zero values of the rest mean their defaults.
type Config struct {
	Store     jobboard.OutboxStore
	Publisher jobboard.EventPublisher
	// Grace is how long an unpublished row is left to the relay.
	Grace time.Duration
	// Retention is how long claims and published outbox rows are kept
	// (default jobboard.DefaultRetention, at least jobboard.MinRetention).
	// Events older than jobboard.MaxEventAge(Retention) are never
	// published: they are marked expired instead.
	Retention time.Duration
	// MaxEvents bounds the events one sweep publishes.
	MaxEvents int
	// DeleteBatch is the rows per retention DELETE statement.
	DeleteBatch int
	// Logger gets one line per scheduled run (Handle), and an ERROR line per
	// expired event. Nil logs nothing.
	Logger *slog.Logger
	// Metrics receives one CloudWatch Embedded Metric Format line per
	// scheduled run (Handle); in Lambda it is stdout. Nil writes nothing.
	Metrics io.Writer
	// Now is the clock of the metrics' timestamps. Default: time.Now.
	Now func() time.Time
	// IdempotencyKeys, when set, has the stored answers of idempotency keys
	// older than jobboard.IdempotencyKeyTTL deleted on every sweep.
	IdempotencyKeys jobboard.IdempotencyKeyRetention
	// VerificationRequests, when set, has the verification requests older
	// than jobboard.DefaultVerificationPolicy's window deleted on every
	// sweep: they count against no bound any more.
	VerificationRequests jobboard.VerificationRequestRetention
	// PasswordResetRequests, when set, has the password reset requests
	// older than jobboard.DefaultPasswordResetPolicy's window deleted on
	// every sweep, likewise.
	PasswordResetRequests jobboard.PasswordResetRequestRetention
	// LoginFailures, when set, has the failed-login counts whose last
	// failure is older than jobboard.DefaultLoginPolicy.ResetAfter deleted
	// on every sweep: the next failure would start such a count again.
	LoginFailures jobboard.LoginFailureRetention
	// Webhooks, when set, has the webhook delivery log measured on every
	// sweep (metrics WebhookPendingDeliveries,
	// WebhookOldestUnattemptedSeconds, WebhookDisabledEndpoints) and its
	// events older than the retention deleted, with their deliveries.
	Webhooks jobboard.WebhookLogRetention
	// Feedback, when set, has the keys of applied delivery feedback events
	// and the delivery state of emails deleted once older than the
	// retention, as the claims are (see sweepFeedback).
	Feedback jobboard.FeedbackRetention
}

// Sweeper publishes the events the relay missed and applies the retention.
// Two sweepers may run at once: each locks different rows.
type Sweeper struct {
	c Config
}

// New returns a Sweeper. It returns an error when Store or Publisher is
// missing or a setting is negative.
func New(c Config) (*Sweeper, error) {
	if c.Store == nil || c.Publisher == nil {
		return nil, errors.New("sweeper: Store and Publisher are required")
	}
	if c.Grace < 0 || c.Retention < 0 || c.MaxEvents < 0 || c.DeleteBatch < 0 {
		return nil, errors.New("sweeper: settings must not be negative")
	}
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.Retention == 0 {
		c.Retention = jobboard.DefaultRetention
	}
	if err := jobboard.CheckRetention(c.Retention); err != nil {
		return nil, fmt.Errorf("sweeper: %w", err)
	}
	if c.MaxEvents == 0 {
		c.MaxEvents = DefaultMaxEvents
	}
	if c.DeleteBatch == 0 {
		c.DeleteBatch = DefaultDeleteBatch
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
	return &Sweeper{c: c}, nil
}

// Report is what one sweep did.
type Report struct {
	// Published counts the events the queue accepted.
	Published int `json:"published"`
	// Failed counts the events locked for publishing that the queue did not
	// accept; they stay unpublished for the next sweep.
	Failed int `json:"failed"`
	// Expired lists the events given up on: unpublished for longer than
	// they may be published.
	Expired []string `json:"expired,omitempty"`
	// Backlog is what stayed unpublished after the sweep: events that did
	// not reach the queue. An old backlog is an outage of the queue.
	Backlog jobboard.OutboxBacklog `json:"-"`
	// ProcessedEventsDeleted and OutboxDeleted count the rows the retention
	// removed.
	ProcessedEventsDeleted int64 `json:"processed_events_deleted"`
	OutboxDeleted          int64 `json:"outbox_deleted"`
	// IdempotencyKeysDeleted counts the stored answers of expired
	// idempotency keys that the retention removed.
	IdempotencyKeysDeleted int64 `json:"idempotency_keys_deleted"`
	// LoginFailuresDeleted counts the failed-login counts the retention
	// removed.
	LoginFailuresDeleted int64 `json:"login_failures_deleted"`
	// VerificationRequestsDeleted counts the verification requests the
	// retention removed.
	VerificationRequestsDeleted int64 `json:"verification_requests_deleted"`
	// PasswordResetRequestsDeleted counts the password reset requests the
	// retention removed.
	PasswordResetRequestsDeleted int64 `json:"password_reset_requests_deleted"`
	// Webhooks is the webhook delivery log after the sweep, and
	// WebhookEventsDeleted the events the retention removed.
	Webhooks             jobboard.WebhookBacklog `json:"-"`
	WebhookEventsDeleted int64                   `json:"webhook_events_deleted"`
	// FeedbackEventsDeleted counts the keys of applied feedback events,
	// and EmailDeliveriesDeleted the emails' delivery states, that the
	// retention removed.
	FeedbackEventsDeleted  int64 `json:"feedback_events_deleted"`
	EmailDeliveriesDeleted int64 `json:"email_deliveries_deleted"`
}

// Sweep publishes the rows left unpublished after the grace period, in
// transactions of ten (SELECT ... FOR UPDATE SKIP LOCKED, SendMessageBatch,
// mark the accepted ones), until none is left, a batch is not wholly
// accepted, or MaxEvents is reached. Rows older than
// jobboard.MaxEventAge(Retention) are not published but marked expired,
// each logged at ERROR: a copy of such an event could outlive its claim.
// Then it measures the backlog, and deletes claims and published or expired
// outbox rows older than the retention, and (with LoginFailures) old
// failed-login counts, in small batches. Each step runs
// even when an earlier one failed. Errors: any step failed (all of them,
// joined); the report counts what was done regardless.
func (s *Sweeper) Sweep(ctx context.Context) (Report, error) {
	var r Report
	var errs []error
	maxAge := jobboard.MaxEventAge(s.c.Retention)
	for r.Published+r.Failed < s.c.MaxEvents {
		limit := min(publishBatch, s.c.MaxEvents-r.Published-r.Failed)
		locked, published, err := s.c.Store.PublishPending(ctx, s.c.Grace, maxAge, limit, s.c.Publisher.Publish)
		r.Published += published
		r.Failed += locked - published
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
			break
		}
		// A short batch means the backlog is done; a refused entry would
		// come back first in the next batch, so leave it for the next run.
		if locked < limit || published < locked {
			break
		}
	}

	expired, err := s.c.Store.ExpireUnpublished(ctx, maxAge)
	r.Expired = expired
	if err != nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}
	for _, id := range expired {
		s.c.Logger.LogAttrs(ctx, slog.LevelError, "event never published and now too old to be: given up, never emailed",
			slog.String("event_id", id), slog.Duration("max_age", maxAge))
	}
	if r.Backlog, err = s.c.Store.Backlog(ctx); err != nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}

	n, err := s.c.Store.DeleteProcessedEvents(ctx, s.c.Retention, s.c.DeleteBatch)
	r.ProcessedEventsDeleted = n
	if err != nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}
	n, err = s.c.Store.DeleteFinishedOutbox(ctx, s.c.Retention, s.c.DeleteBatch)
	r.OutboxDeleted = n
	if err != nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}

	// The answers of idempotency keys live for jobboard.IdempotencyKeyTTL,
	// and failed-login counts for the login policy's reset period, whatever
	// the retention.
	if s.c.IdempotencyKeys != nil {
		n, err = s.c.IdempotencyKeys.DeleteExpiredIdempotencyKeys(ctx, jobboard.IdempotencyKeyTTL, s.c.DeleteBatch)
		r.IdempotencyKeysDeleted = n
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
	}
	if s.c.LoginFailures != nil {
		n, err = s.c.LoginFailures.DeleteOldLoginFailures(ctx, jobboard.DefaultLoginPolicy.ResetAfter, s.c.DeleteBatch)
		r.LoginFailuresDeleted = n
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
	}
	if s.c.VerificationRequests != nil {
		n, err = s.c.VerificationRequests.DeleteOldVerificationRequests(ctx, jobboard.DefaultVerificationPolicy.Window, s.c.DeleteBatch)
		r.VerificationRequestsDeleted = n
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
	}
	if s.c.PasswordResetRequests != nil {
		n, err = s.c.PasswordResetRequests.DeleteOldPasswordResetRequests(ctx, jobboard.DefaultPasswordResetPolicy.Window, s.c.DeleteBatch)
		r.PasswordResetRequestsDeleted = n
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
	}
	if s.c.Webhooks != nil {
		errs = append(errs, s.sweepWebhooks(ctx, &r)...)
	}
	if s.c.Feedback != nil {
		errs = append(errs, s.sweepFeedback(ctx, &r)...)
	}
	return r, errors.Join(errs...)
}

// sweepFeedback applies the retention to what delivery feedback leaves.
//
// The keys of applied events are what makes a copy of an event change
// nothing; a copy that arrives after its key is gone is applied again (a
// bounce lifted by a verification link would come back). A copy lives in
// the feedback queue at most its MessageRetentionPeriod (4 days), and in
// its dead-letter queue at most 14 days from its first enqueue: the claim
// retention (at least jobboard.MinRetention, 15 days; 30 by default)
// outlasts both. Only a copy that failed ten receives, was redriven from
// the DLQ (a new retention period) and failed again could outlive its
// key; unlike a status event, a feedback event has no age past which it
// is refused (docs/design.md, "Delivery feedback").
//
// An email's delivery state is shown in the application's history beside
// the worker's outcome, which comes from its claim: kept as long as the
// claim, the two say the same thing; kept longer, the state would outlive
// the claim it completes. A late event (a bounce hours after the send)
// comes within days, well inside the retention.
func (s *Sweeper) sweepFeedback(ctx context.Context, r *Report) []error {
	var errs []error
	var err error
	if r.FeedbackEventsDeleted, err = s.c.Feedback.DeleteOldFeedbackEvents(ctx, s.c.Retention, s.c.DeleteBatch); err != nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}
	if r.EmailDeliveriesDeleted, err = s.c.Feedback.DeleteOldEmailDeliveries(ctx, s.c.Retention, s.c.DeleteBatch); err != nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}
	return errs
}

// sweepWebhooks measures the webhook delivery log and applies the
// retention to it.
func (s *Sweeper) sweepWebhooks(ctx context.Context, r *Report) []error {
	var errs []error
	var err error
	if r.Webhooks, err = s.c.Webhooks.WebhookBacklog(ctx); err != nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}
	if r.WebhookEventsDeleted, err = s.c.Webhooks.DeleteOldWebhookEvents(ctx, s.c.Retention, s.c.DeleteBatch); err != nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}
	return errs
}

// Handle is the sweeper function's Lambda handler: EventBridge Scheduler
// invokes it with a scheduled event, whose content does not matter. It
// sweeps, writes the metrics line (EventsPublished, OutboxExpired,
// OutboxBacklog, OutboxOldestAgeSeconds), logs the report (INFO, or ERROR
// with the error) and returns it; the error, if any, makes the invocation
// count as failed in the Lambda metrics.
func (s *Sweeper) Handle(ctx context.Context, _ events.EventBridgeEvent) (Report, error) {
	r, err := s.Sweep(ctx)
	metrics := []emf.Metric{
		{Name: "EventsPublished", Unit: emf.Count, Value: float64(r.Published)},
		{Name: "OutboxExpired", Unit: emf.Count, Value: float64(len(r.Expired))},
		{Name: "OutboxBacklog", Unit: emf.Count, Value: float64(r.Backlog.Count)},
		{Name: "OutboxOldestAgeSeconds", Unit: emf.Seconds, Value: r.Backlog.OldestAge.Seconds()},
	}
	if s.c.Webhooks != nil {
		metrics = append(metrics,
			emf.Metric{Name: "WebhookPendingDeliveries", Unit: emf.Count, Value: float64(r.Webhooks.Pending)},
			emf.Metric{Name: "WebhookOldestUnattemptedSeconds", Unit: emf.Seconds, Value: r.Webhooks.OldestUnattempted.Seconds()},
			emf.Metric{Name: "WebhookDisabledEndpoints", Unit: emf.Count, Value: float64(r.Webhooks.DisabledEndpoints)},
		)
	}
	emf.Write(s.c.Metrics, "sweeper", s.c.Now(), metrics...)
	attrs := []slog.Attr{
		slog.Int("published", r.Published),
		slog.Int("failed", r.Failed),
		slog.Int("expired", len(r.Expired)),
		slog.Int64("backlog", r.Backlog.Count),
		slog.Duration("backlog_oldest_age", r.Backlog.OldestAge),
		slog.Int64("processed_events_deleted", r.ProcessedEventsDeleted),
		slog.Int64("outbox_deleted", r.OutboxDeleted),
		slog.Int64("idempotency_keys_deleted", r.IdempotencyKeysDeleted),
		slog.Int64("login_failures_deleted", r.LoginFailuresDeleted),
		slog.Int64("verification_requests_deleted", r.VerificationRequestsDeleted),
	}
	if s.c.Webhooks != nil {
		attrs = append(attrs, slog.Int64("webhook_pending", r.Webhooks.Pending),
			slog.Duration("webhook_oldest_unattempted", r.Webhooks.OldestUnattempted),
			slog.Int64("webhook_events_deleted", r.WebhookEventsDeleted))
	}
	if s.c.Feedback != nil {
		attrs = append(attrs, slog.Int64("feedback_events_deleted", r.FeedbackEventsDeleted),
			slog.Int64("email_deliveries_deleted", r.EmailDeliveriesDeleted))
	}
	if err != nil {
		s.c.Logger.LogAttrs(ctx, slog.LevelError, "sweep failed", append(attrs, slog.String("error", err.Error()))...)
		return r, err
	}
	s.c.Logger.LogAttrs(ctx, slog.LevelInfo, "sweep done", attrs...)
	return r, nil
}
