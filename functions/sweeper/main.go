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
// outbox row goes to one of them); RETENTION_DAYS (the claims' retention,
// default 30, at least 15); DATABASE_QUERY_EXEC_MODE (as the API's);
// LOG_LEVEL (debug, info, warn, error; default info); SWEEP_INTERVAL (local
// mode only); SWEEP_GRACE (how long a fresh row is left to the API's relay,
// default 30s; the chaos harness shortens it). AWS settings come from the
// environment (internal/function, internal/awsenv); AWS_ENDPOINT_URL_SQS
// points the client at a local stand-in.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/secret"
	"github.com/jobboard/jobboard/internal/sweeper"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sweeper:", err)
		os.Exit(1)
	}
}

// settings is what run reads from the environment.
type settings struct {
	function.Settings
	queueURL string
	// webhookQueueURL receives the webhook deliveries of the outbox.
	webhookQueueURL string
	retention       time.Duration
	grace           time.Duration
	// interval is the local mode's time between sweeps.
	interval time.Duration
	// db names the database and how statements are sent.
	db database.Settings
}

// loadSettings reads the settings; the error names every variable that is
// missing or malformed.
func loadSettings(getenv func(string) string) (settings, error) {
	shared, err := function.Load(getenv)
	s := settings{
		Settings:        shared,
		queueURL:        getenv("STATUS_EVENTS_QUEUE_URL"),
		webhookQueueURL: getenv("WEBHOOK_EVENTS_QUEUE_URL"),
		interval:        defaultSweepInterval,
	}
	problems := []error{err}
	if s.queueURL == "" {
		problems = append(problems, errors.New("STATUS_EVENTS_QUEUE_URL is not set"))
	}
	if s.webhookQueueURL == "" {
		problems = append(problems, errors.New("WEBHOOK_EVENTS_QUEUE_URL is not set"))
	}
	if s.retention, err = jobboard.ParseRetentionDays(getenv("RETENTION_DAYS")); err != nil {
		problems = append(problems, fmt.Errorf("RETENTION_DAYS: %w", err))
	}
	if s.grace, err = function.ParseDuration("SWEEP_GRACE", getenv("SWEEP_GRACE"), s.grace, time.Nanosecond, 0); err != nil {
		problems = append(problems, err)
	}
	if s.db, err = database.LoadSettings(getenv, ""); err != nil {
		problems = append(problems, err)
	}
	// Only the local mode sweeps on a timer; in Lambda the schedule does.
	if !s.Lambda {
		if s.interval, err = function.ParseDuration("SWEEP_INTERVAL", getenv("SWEEP_INTERVAL"), s.interval, time.Nanosecond, 0); err != nil {
			problems = append(problems, err)
		}
	}
	return s, errors.Join(problems...)
}

// defaultSweepInterval is how often the local mode sweeps: the schedule of
// template.yaml.
const defaultSweepInterval = time.Minute

// run is main without the process: it reads the settings, wires the
// sweeper and hands it to the Lambda runtime, which does not return, or
// outside Lambda sweeps on a timer until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unknown command %q: the sweeper takes none", args[1])
	}
	s, err := loadSettings(getenv)
	if err != nil {
		return err
	}
	w, err := wire(ctx, s, getenv, stdout)
	if err != nil {
		return err
	}
	return w.Run(ctx, s.Settings)
}

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

// wire builds the sweeper from its settings; getenv names the database (see
// secret.Database), stdout takes its log and metric lines. Outside Lambda
// it sweeps every interval (sweepLocally).
func wire(ctx context.Context, s settings, getenv func(string) string, stdout io.Writer) (*function.Wiring, error) {
	logger := s.Logger(stdout)
	client := sqs.NewFromConfig(s.AWS)
	status := queue.NewPublisher(client, s.queueURL)
	status.Logger = logger
	webhooks := queue.NewPublisher(client, s.webhookQueueURL)
	webhooks.Logger = logger
	publisher := queue.Router{Status: status, Webhooks: webhooks, Logger: logger}

	// The sweeper works in one transaction or statement at a time.
	db, err := database.Open(ctx, s.db, getenv, secret.NewClient(s.AWS), func(c *pgxpool.Config) { c.MaxConns = 1 })
	if err != nil {
		return nil, err
	}
	sw, err := sweeper.New(sweeper.Config{
		Store:     db,
		Publisher: publisher,
		Retention: s.retention,
		Grace:     s.grace,
		Logger:    logger,
		Metrics:   stdout,
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &function.Wiring{
		Handler: sw.Handle,
		Local:   func(ctx context.Context) error { return sweepLocally(ctx, s.interval, sw) },
		Close:   db.Close,
	}, nil
}
