// Command worker is the status-email worker Lambda. The SQS event source
// mapping (with ReportBatchItemFailures) invokes it with batches of status
// events; for each, in one database transaction, it claims the event id and
// emails the candidate through SES v2 (see internal/worker).
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset, as under `make dev`) the same
// handler is fed by a local poller that plays the event source mapping
// against STATUS_EVENTS_QUEUE_URL, until SIGINT or SIGTERM.
//
// Environment: DATABASE_URL, or on AWS DATABASE_SECRET_ARN (required);
// MAIL_FROM (required, e.g. "jobboard <jobs@example.com>");
// SES_CONFIGURATION_SET (optional); LOG_LEVEL (debug, info, warn, error;
// default info); STATUS_EVENTS_QUEUE_URL and LOCAL_INVOCATION_TIMEOUT (local
// mode only; the deadline of one local invocation, default 30s, the
// function's Timeout in template.yaml). AWS settings come
// from the SDK's default configuration; AWS_ENDPOINT_URL_SESV2 and
// AWS_ENDPOINT_URL_SQS point it at local stand-ins.
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

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/secret"
	"github.com/jobboard/jobboard/internal/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
}

// The worker's database session: a claim that waits longer than lockTimeout
// behind another worker fails (and is retried) instead of queueing, and a
// sandbox frozen inside a transaction loses its session, and its claim,
// after idleInTx. idleInTx must exceed the longest send (the function's
// timeout).
const (
	lockTimeout = 5 * time.Second
	idleInTx    = 60 * time.Second
)

// localTimeout is the deadline of one local invocation: the worker's
// Timeout in template.yaml. LOCAL_INVOCATION_TIMEOUT overrides it, so that
// the chaos harness can reach the deadline within a short run.
const localTimeout = 30 * time.Second

// invocationTimeout is the local invocation deadline: LOCAL_INVOCATION_TIMEOUT,
// else localTimeout.
func invocationTimeout(getenv func(string) string) (time.Duration, error) {
	v := getenv("LOCAL_INVOCATION_TIMEOUT")
	if v == "" {
		return localTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("LOCAL_INVOCATION_TIMEOUT = %q: want a positive duration such as 30s", v)
	}
	return d, nil
}

// settings is what run reads from the environment.
type settings struct {
	mailFrom         string
	configurationSet string
	logLevel         slog.Level
}

func loadSettings(getenv func(string) string) (settings, error) {
	s := settings{
		mailFrom:         getenv("MAIL_FROM"),
		configurationSet: getenv("SES_CONFIGURATION_SET"),
	}
	var missing []error
	if s.mailFrom == "" {
		missing = append(missing, errors.New("MAIL_FROM is not set"))
	}
	if lvl := getenv("LOG_LEVEL"); lvl != "" {
		if err := s.logLevel.UnmarshalText([]byte(lvl)); err != nil {
			missing = append(missing, fmt.Errorf("LOG_LEVEL: %w", err))
		}
	}
	return s, errors.Join(missing...)
}

// run is main without the process: it wires the handler and hands it to
// the Lambda runtime, which does not return, or outside Lambda to a local
// poller, which returns when ctx ends.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	h, closeDB, err := setup(ctx, getenv, stdout)
	if err != nil {
		return err
	}
	defer closeDB()
	if getenv("AWS_LAMBDA_RUNTIME_API") == "" {
		return pollLocally(ctx, getenv, h, stdout)
	}
	lambda.Start(h.Handle)
	return nil
}

// pollLocally feeds h from the queue at STATUS_EVENTS_QUEUE_URL the way the
// Lambda event source mapping does: batches of up to ten, failures left for
// redelivery, until ctx ends.
func pollLocally(ctx context.Context, getenv func(string) string, h *worker.Handler, stdout io.Writer) error {
	queueURL := getenv("STATUS_EVENTS_QUEUE_URL")
	if queueURL == "" {
		return errors.New("STATUS_EVENTS_QUEUE_URL is not set (needed outside Lambda, to poll the queue)")
	}
	timeout, err := invocationTimeout(getenv)
	if err != nil {
		return err
	}
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	p := &queue.Poller{
		Client:         sqs.NewFromConfig(awsCfg),
		QueueURL:       queueURL,
		Handler:        h.Handle,
		HandlerTimeout: timeout,
		FunctionName:   "worker",
		Logger:         slog.New(slog.NewJSONHandler(stdout, nil)),
	}
	return p.Run(ctx)
}

// setup builds the worker's handler from the environment. closeDB releases
// the database pool.
func setup(ctx context.Context, getenv func(string) string, stdout io.Writer) (h *worker.Handler, closeDB func(), err error) {
	s, err := loadSettings(getenv)
	if err != nil {
		return nil, nil, err
	}
	logger := slog.New(slog.NewJSONHandler(stdout, &slog.HandlerOptions{Level: s.logLevel}))

	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	sender, err := mail.NewSender(sesv2.NewFromConfig(awsCfg), s.mailFrom)
	if err != nil {
		return nil, nil, err
	}
	sender.ConfigurationSet = s.configurationSet

	databaseURL, err := secret.DatabaseURL(ctx, getenv, secret.NewClient(awsCfg))
	if err != nil {
		return nil, nil, err
	}
	// One sandbox handles one batch at a time, record after record: one
	// connection is all it uses, and the event source mapping's
	// MaximumConcurrency then bounds the worker's connections.
	db, err := postgres.Open(ctx, databaseURL, postgres.WorkerSession(lockTimeout, idleInTx),
		func(c *pgxpool.Config) { c.MaxConns = 1 })
	if err != nil {
		return nil, nil, err
	}
	h, err = worker.New(worker.Config{
		Store:   db,
		Mailer:  sender,
		Logger:  logger,
		Metrics: stdout,
	})
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return h, db.Close, nil
}
