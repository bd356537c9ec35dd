// Command sweeper is the outbox sweeper Lambda, invoked on a schedule by
// EventBridge. It publishes the status events that the API's relay did not
// (still unpublished after a grace period) and deletes the claims and
// published outbox rows older than the retention (see internal/outbox).
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset, as under `make dev`) it
// sweeps every SWEEP_INTERVAL (default 1m) until SIGINT or SIGTERM.
//
// Environment: DATABASE_URL, or on AWS DATABASE_SECRET_ARN (required, with
// the optional DATABASE_HOST and DATABASE_SSLROOTCERT, see internal/secret);
// STATUS_EVENTS_QUEUE_URL (required); RETENTION_DAYS (default 30, at least
// 15);
// LOG_LEVEL (debug, info, warn, error; default info); SWEEP_INTERVAL (local
// mode only); SWEEP_GRACE (how long a fresh row is left to the API's relay,
// default 30s; the chaos harness shortens it). AWS settings come from the
// environment (internal/awsenv); AWS_ENDPOINT_URL_SQS points the client at
// a local stand-in.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/awsenv"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/outbox"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/secret"
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
	queueURL  string
	retention time.Duration
	grace     time.Duration
	logLevel  slog.Level
}

func loadSettings(getenv func(string) string) (settings, error) {
	s := settings{
		queueURL: getenv("STATUS_EVENTS_QUEUE_URL"),
	}
	var problems []error
	if s.queueURL == "" {
		problems = append(problems, errors.New("STATUS_EVENTS_QUEUE_URL is not set"))
	}
	var err error
	if s.retention, err = jobboard.ParseRetentionDays(getenv("RETENTION_DAYS")); err != nil {
		problems = append(problems, fmt.Errorf("RETENTION_DAYS: %w", err))
	}
	if v := getenv("SWEEP_GRACE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			problems = append(problems, fmt.Errorf("SWEEP_GRACE = %q: want a positive duration such as 30s", v))
		}
		s.grace = d
	}
	if lvl := getenv("LOG_LEVEL"); lvl != "" {
		if err := s.logLevel.UnmarshalText([]byte(lvl)); err != nil {
			problems = append(problems, fmt.Errorf("LOG_LEVEL: %w", err))
		}
	}
	return s, errors.Join(problems...)
}

// defaultSweepInterval is how often the local mode sweeps: the schedule of
// template.yaml.
const defaultSweepInterval = time.Minute

// run is main without the process: it wires the sweeper and hands it to the
// Lambda runtime, which does not return, or outside Lambda sweeps on a
// timer until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unknown command %q: the sweeper takes none", args[1])
	}
	sw, closeDB, err := setup(ctx, getenv, stdout)
	if err != nil {
		return err
	}
	defer closeDB()
	if getenv("AWS_LAMBDA_RUNTIME_API") == "" {
		return sweepLocally(ctx, getenv, sw)
	}
	lambda.Start(sw.Handle)
	return nil
}

// sweepLocally sweeps at once and then every SWEEP_INTERVAL until ctx ends.
// A failed sweep is logged by the sweeper and tried again next time, as the
// schedule would.
func sweepLocally(ctx context.Context, getenv func(string) string, sw *outbox.Sweeper) error {
	interval := defaultSweepInterval
	if v := getenv("SWEEP_INTERVAL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("SWEEP_INTERVAL = %q: want a positive duration such as 30s", v)
		}
		interval = d
	}
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

// setup builds the sweeper from the environment. closeDB releases the
// database pool.
func setup(ctx context.Context, getenv func(string) string, stdout io.Writer) (sw *outbox.Sweeper, closeDB func(), err error) {
	s, err := loadSettings(getenv)
	if err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: s.logLevel}))
	awsCfg := awsenv.Load(getenv)
	publisher := queue.NewPublisher(sqs.NewFromConfig(awsCfg), s.queueURL)
	publisher.Logger = logger

	// The sweeper works in one transaction or statement at a time.
	databaseURL, creds, err := secret.Database(ctx, getenv, secret.NewClient(awsCfg))
	if err != nil {
		return nil, nil, err
	}
	options := []func(*pgxpool.Config){func(c *pgxpool.Config) { c.MaxConns = 1 }}
	if creds != nil { // a rotated password reaches new connections
		options = append(options, postgres.WithCredentials(creds))
	}
	db, err := postgres.Open(ctx, databaseURL, options...)
	if err != nil {
		return nil, nil, err
	}
	sw, err = outbox.NewSweeper(outbox.SweeperConfig{
		Store:                db,
		Publisher:            publisher,
		Retention:            s.retention,
		Grace:                s.grace,
		Logger:               logger,
		Metrics:              stdout,
		IdempotencyKeys:      db,
		LoginFailures:        db,
		VerificationRequests: db,
	})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return sw, db.Close, nil
}
