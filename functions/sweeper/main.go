// Command sweeper is the sweeper Lambda (internal/sweeper), invoked on a
// schedule by EventBridge. It publishes the outbox rows that the API's
// relay did not (still unpublished after a grace period) and applies the
// retention: every kept table loses its rows older than its age
// (docs/design.md, "Retention").
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset, as under `make dev`) it
// sweeps every SWEEP_INTERVAL (default 1m) until SIGINT or SIGTERM.
//
// Environment: DATABASE_URL, or on AWS DATABASE_SECRET_ARN (required, with
// the optional DATABASE_HOST and DATABASE_SSLROOTCERT, see internal/secret);
// STATUS_EVENTS_QUEUE_URL and WEBHOOK_EVENTS_QUEUE_URL (required: every
// outbox row goes to one of them); ACCOUNT_EMAILS_QUEUE_URL (the
// verification and password reset emails' queue; unset: the status events
// queue takes them); RETENTION_DAYS (the claims' retention,
// default 30, at least 15); DATABASE_QUERY_EXEC_MODE (as the API's);
// LOG_LEVEL (debug, info, warn, error; default info); SWEEP_INTERVAL (local
// mode only); SWEEP_GRACE (how long a fresh row is left to the API's relay,
// default 30s; the chaos harness shortens it). AWS settings come from the
// environment (internal/function, internal/awsenv); AWS_ENDPOINT_URL_SQS
// points the client at a local stand-in.
package main

import (
	"context"
	"io"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/functions/sweeper/settings"
	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/secret"
	"github.com/jobboard/jobboard/internal/sweeper"
)

func main() { function.Main("sweeper", run) }

// run is main without the process, which the tests call: the settings,
// then the wiring (see function.Run).
var run = function.Run(settings.Load, wire)

// sweepLocally sweeps at once and then every interval until ctx ends. A
// failed sweep is logged by the sweeper and tried again next time, as the
// schedule would.
func sweepLocally(ctx context.Context, interval time.Duration, sw *sweeper.Sweeper) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		_, _ = sw.Handle(ctx, events.EventBridgeEvent{}) // logs its report, or its error
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// wire builds the sweeper from its settings; stdout takes its log and
// metric lines. Outside Lambda it sweeps every interval (sweepLocally).
func wire(ctx context.Context, s settings.Settings, stdout io.Writer) (*function.Wiring, error) {
	logger := s.Logger(stdout)
	client := sqs.NewFromConfig(s.AWS)
	status := queue.NewPublisher(client, s.QueueURL)
	status.Logger = logger
	webhooks := queue.NewPublisher(client, s.WebhookQueueURL)
	webhooks.Logger = logger
	publisher := queue.Router{Status: status, Webhooks: webhooks, Logger: logger}
	if s.AccountQueueURL != "" {
		account := queue.NewPublisher(client, s.AccountQueueURL)
		account.Logger = logger
		publisher.Account = account
	}

	// The sweeper works in one transaction or statement at a time.
	db, err := database.Open(ctx, s.DB, secret.NewClient(s.AWS), func(c *pgxpool.Config) { c.MaxConns = 1 })
	if err != nil {
		return nil, err
	}
	sw, err := sweeper.New(sweeper.Config{
		Store:     db,
		Publisher: publisher,
		Retention: s.Retention,
		Grace:     s.Grace,
		Logger:    logger,
		Metrics:   stdout,
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &function.Wiring{
		Handler: sw.Handle,
		Local:   func(ctx context.Context) error { return sweepLocally(ctx, s.Interval, sw) },
		Close:   db.Close,
	}, nil
}
