package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Defaults of SweeperConfig.
const (
	// DefaultGrace leaves a fresh row to the API's relay, which normally
	// publishes it within milliseconds of the commit.
	DefaultGrace = 30 * time.Second
	// DefaultRetention is as long as SQS can keep a message (14 days): a
	// claim older than that can no longer meet a redelivery.
	DefaultRetention = 14 * 24 * time.Hour
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

// SweeperConfig is what a Sweeper needs. Store and Publisher are required;
// zero values of the rest mean their defaults.
type SweeperConfig struct {
	Store     jobboard.OutboxStore
	Publisher jobboard.EventPublisher
	// Grace is how long an unpublished row is left to the relay.
	Grace time.Duration
	// Retention is how long claims and published outbox rows are kept.
	Retention time.Duration
	// MaxEvents bounds the events one sweep publishes.
	MaxEvents int
	// DeleteBatch is the rows per retention DELETE statement.
	DeleteBatch int
	// Logger gets one line per scheduled run (Handle). Nil logs nothing.
	Logger *slog.Logger
}

// Sweeper publishes the events the relay missed and applies the retention.
// Two sweepers may run at once: each locks different rows.
type Sweeper struct {
	c SweeperConfig
}

// NewSweeper returns a Sweeper. It returns an error when Store or Publisher
// is missing or a setting is negative.
func NewSweeper(c SweeperConfig) (*Sweeper, error) {
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
		c.Retention = DefaultRetention
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
	return &Sweeper{c: c}, nil
}

// Report is what one sweep did.
type Report struct {
	// Published counts the events the queue accepted.
	Published int `json:"published"`
	// Failed counts the events locked for publishing that the queue did not
	// accept; they stay unpublished for the next sweep.
	Failed int `json:"failed"`
	// ProcessedEventsDeleted and OutboxDeleted count the rows the retention
	// removed.
	ProcessedEventsDeleted int64 `json:"processed_events_deleted"`
	OutboxDeleted          int64 `json:"outbox_deleted"`
	// IdempotencyKeysDeleted counts the stored answers of expired
	// idempotency keys that the retention removed.
	IdempotencyKeysDeleted int64 `json:"idempotency_keys_deleted"`
}

// Sweep publishes the rows left unpublished after the grace period, in
// transactions of ten (SELECT ... FOR UPDATE SKIP LOCKED, SendMessageBatch,
// mark the accepted ones), until none is left, a batch is not wholly
// accepted, or MaxEvents is reached. Then it deletes claims and published
// outbox rows older than the retention, in small batches. The retention runs
// even when publishing failed. Errors: publishing or deleting failed (all
// of them, joined); the report counts what was done regardless.
func (s *Sweeper) Sweep(ctx context.Context) (Report, error) {
	var r Report
	var errs []error
	for r.Published+r.Failed < s.c.MaxEvents {
		limit := min(publishBatch, s.c.MaxEvents-r.Published-r.Failed)
		locked, published, err := s.c.Store.PublishPending(ctx, s.c.Grace, limit, s.c.Publisher.Publish)
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

	n, err := s.c.Store.DeleteProcessedEvents(ctx, s.c.Retention, s.c.DeleteBatch)
	r.ProcessedEventsDeleted = n
	if err != nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}
	n, err = s.c.Store.DeletePublishedOutbox(ctx, s.c.Retention, s.c.DeleteBatch)
	r.OutboxDeleted = n
	if err != nil {
		errs = append(errs, fmt.Errorf("sweep: %w", err))
	}

	// The answers of idempotency keys live for jobboard.IdempotencyKeyTTL,
	// whatever the retention; a store that keeps them says so by having
	// the method.
	if keys, ok := s.c.Store.(jobboard.IdempotencyKeyRetention); ok {
		n, err = keys.DeleteExpiredIdempotencyKeys(ctx, jobboard.IdempotencyKeyTTL, s.c.DeleteBatch)
		r.IdempotencyKeysDeleted = n
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep: %w", err))
		}
	}
	return r, errors.Join(errs...)
}

// Handle is the sweeper function's Lambda handler: EventBridge Scheduler
// invokes it with a scheduled event, whose content does not matter. It
// sweeps, logs the report (INFO, or ERROR with the error) and returns it;
// the error, if any, makes the invocation count as failed in the Lambda
// metrics.
func (s *Sweeper) Handle(ctx context.Context, _ events.EventBridgeEvent) (Report, error) {
	r, err := s.Sweep(ctx)
	attrs := []slog.Attr{
		slog.Int("published", r.Published),
		slog.Int("failed", r.Failed),
		slog.Int64("processed_events_deleted", r.ProcessedEventsDeleted),
		slog.Int64("outbox_deleted", r.OutboxDeleted),
	}
	if err != nil {
		s.c.Logger.LogAttrs(ctx, slog.LevelError, "sweep failed", append(attrs, slog.String("error", err.Error()))...)
		return r, err
	}
	s.c.Logger.LogAttrs(ctx, slog.LevelInfo, "sweep done", attrs...)
	return r, nil
}
