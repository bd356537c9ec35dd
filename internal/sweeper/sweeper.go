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
	"maps"
	"slices"
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

// Store is the database as a sweep uses it (a *postgres.DB).
type Store interface {
	jobboard.OutboxStore
	// WebhookBacklog measures the webhook delivery log. Errors: database
	// errors.
	WebhookBacklog(ctx context.Context) (jobboard.WebhookBacklog, error)
	// DeleteExpired applies the retention: it deletes from every kept table
	// the rows older than the table's age, given the claim retention, at
	// most batch rows per statement, and returns how many rows each table
	// lost, by name. A table that fails does not stop the others. Errors:
	// each failed table's, joined.
	DeleteExpired(ctx context.Context, retention time.Duration, batch int) (map[string]int64, error)
}

// Config is what a Sweeper needs. Store and Publisher are required; zero
// values of the rest mean their defaults.
type Config struct {
	Store     Store
	Publisher jobboard.EventPublisher
	// Grace is how long an unpublished row is left to the relay.
	Grace time.Duration
	// Retention is how long claims, and what is kept as long as them, are
	// kept (default jobboard.DefaultRetention, at least
	// jobboard.MinRetention). Events older than
	// jobboard.MaxEventAge(Retention) are never published: they are marked
	// expired instead.
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
	// Webhooks is the webhook delivery log after the sweep.
	Webhooks jobboard.WebhookBacklog `json:"-"`
	// Deleted counts the rows the retention removed, by kept table.
	Deleted map[string]int64 `json:"deleted"`
}

// Sweep publishes the rows left unpublished after the grace period, in
// transactions of ten (SELECT ... FOR UPDATE SKIP LOCKED, SendMessageBatch,
// mark the accepted ones), until none is left, a batch is not wholly
// accepted, or MaxEvents is reached. Rows older than
// jobboard.MaxEventAge(Retention) are not published but marked expired,
// each logged at ERROR: a copy of such an event could outlive its claim.
// Then it measures the outbox's and the webhook delivery log's backlogs,
// and applies the retention (Store.DeleteExpired). Each step runs even when
// an earlier one failed. Errors: any step failed (all of them, joined); the
// report counts what was done regardless.
func (s *Sweeper) Sweep(ctx context.Context) (Report, error) {
	var r Report
	var errs []error
	failed := func(err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
	}
	maxAge := jobboard.MaxEventAge(s.c.Retention)
	for r.Published+r.Failed < s.c.MaxEvents {
		limit := min(publishBatch, s.c.MaxEvents-r.Published-r.Failed)
		locked, published, err := s.c.Store.PublishPending(ctx, s.c.Grace, maxAge, limit, s.c.Publisher.Publish)
		r.Published += published
		r.Failed += locked - published
		failed(err)
		// A short batch means the backlog is done; a refused entry would
		// come back first in the next batch, so leave it for the next run.
		if err != nil || locked < limit || published < locked {
			break
		}
	}

	expired, err := s.c.Store.ExpireUnpublished(ctx, maxAge)
	r.Expired = expired
	failed(err)
	for _, id := range expired {
		s.c.Logger.LogAttrs(ctx, slog.LevelError, "event never published and now too old to be: given up, never emailed",
			slog.String("event_id", id), slog.Duration("max_age", maxAge))
	}
	r.Backlog, err = s.c.Store.Backlog(ctx)
	failed(err)
	r.Webhooks, err = s.c.Store.WebhookBacklog(ctx)
	failed(err)
	r.Deleted, err = s.c.Store.DeleteExpired(ctx, s.c.Retention, s.c.DeleteBatch)
	failed(err)
	return r, errors.Join(errs...)
}

// Handle is the sweeper function's Lambda handler: EventBridge Scheduler
// invokes it with a scheduled event, whose content does not matter. It
// sweeps, writes the metrics line (EventsPublished, OutboxExpired,
// OutboxBacklog, OutboxOldestAgeSeconds, WebhookPendingDeliveries,
// WebhookOldestUnattemptedSeconds, WebhookDisabledEndpoints), logs the
// report (INFO, or ERROR with the error; each kept table's count as
// name_deleted) and returns it; the error, if any, makes the invocation
// count as failed in the Lambda metrics.
func (s *Sweeper) Handle(ctx context.Context, _ events.EventBridgeEvent) (Report, error) {
	r, err := s.Sweep(ctx)
	emf.Write(s.c.Metrics, "sweeper", s.c.Now(),
		emf.Metric{Name: "EventsPublished", Unit: emf.Count, Value: float64(r.Published)},
		emf.Metric{Name: "OutboxExpired", Unit: emf.Count, Value: float64(len(r.Expired))},
		emf.Metric{Name: "OutboxBacklog", Unit: emf.Count, Value: float64(r.Backlog.Count)},
		emf.Metric{Name: "OutboxOldestAgeSeconds", Unit: emf.Seconds, Value: r.Backlog.OldestAge.Seconds()},
		emf.Metric{Name: "WebhookPendingDeliveries", Unit: emf.Count, Value: float64(r.Webhooks.Pending)},
		emf.Metric{Name: "WebhookOldestUnattemptedSeconds", Unit: emf.Seconds, Value: r.Webhooks.OldestUnattempted.Seconds()},
		emf.Metric{Name: "WebhookDisabledEndpoints", Unit: emf.Count, Value: float64(r.Webhooks.DisabledEndpoints)},
	)
	attrs := []slog.Attr{
		slog.Int("published", r.Published),
		slog.Int("failed", r.Failed),
		slog.Int("expired", len(r.Expired)),
		slog.Int64("backlog", r.Backlog.Count),
		slog.Duration("backlog_oldest_age", r.Backlog.OldestAge),
		slog.Int64("webhook_pending", r.Webhooks.Pending),
		slog.Duration("webhook_oldest_unattempted", r.Webhooks.OldestUnattempted),
	}
	for _, table := range slices.Sorted(maps.Keys(r.Deleted)) {
		attrs = append(attrs, slog.Int64(table+"_deleted", r.Deleted[table]))
	}
	if err != nil {
		s.c.Logger.LogAttrs(ctx, slog.LevelError, "sweep failed", append(attrs, slog.String("error", err.Error()))...)
		return r, err
	}
	s.c.Logger.LogAttrs(ctx, slog.LevelInfo, "sweep done", attrs...)
	return r, nil
}
