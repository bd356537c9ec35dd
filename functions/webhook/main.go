// Command webhook is the webhook delivery Lambda. The SQS event source
// mapping of the webhook queue (with ReportBatchItemFailures) invokes it
// with batches of webhook.delivery_requested events; for each it leases
// the delivery, signs the event's payload with the endpoint's secrets and
// POSTs it through a client that reaches public addresses only, records the
// attempt, and backs a failed delivery off through ChangeMessageVisibility
// (see internal/webhook).
//
// Its database access is the role jobboard_webhooks (migration 008): it
// sets that role for its sessions, so its statements read and write only
// the webhook tables' columns it needs, whatever user logs in (give it a
// login of its own for a hard boundary; docs/deploying.md). Of AWS it calls
// its queue (ChangeMessageVisibility) and Secrets Manager for its secrets.
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset, as under `make dev`) the
// same handler is fed by a local poller that plays the event source mapping
// against WEBHOOK_EVENTS_QUEUE_URL, until SIGINT or SIGTERM.
//
// Environment: DATABASE_URL, or on AWS DATABASE_SECRET_ARN (required, with
// the optional DATABASE_HOST and DATABASE_SSLROOTCERT, see internal/secret)
// or WEBHOOK_DATABASE_SECRET_ARN (a login of its own, when set);
// DATABASE_ROLE (the session role, default jobboard_webhooks);
// DATABASE_QUERY_EXEC_MODE (as the API's);
// WEBHOOK_EVENTS_QUEUE_URL (required); WEBHOOK_SEALING_KEY, or on AWS
// WEBHOOK_SEALING_KEY_SECRET_ARN (required: the key that opens the signing
// secrets, the API's); WEBHOOK_ALLOW_INSECURE (local development only:
// http, any port, loopback; refused inside Lambda); WEBHOOK_CONCURRENCY (records attempted at
// once, default 10); WEBHOOK_ATTEMPT_TIMEOUT (default 10s);
// WEBHOOK_BACKOFF_BASE and WEBHOOK_BACKOFF_MAX (defaults 20s and 12h; the
// chaos run shortens them); LOCAL_INVOCATION_TIMEOUT (local mode only, 5s
// to 15m, default 30s, the function's Timeout in template.yaml); LOG_LEVEL.
// AWS settings come from the environment (internal/function,
// internal/awsenv); AWS_ENDPOINT_URL_SQS points the client at a local
// stand-in.
package main

import (
	"context"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jobboard/jobboard/functions/webhook/settings"
	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/function/eventsource"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/secret"
	"github.com/jobboard/jobboard/internal/webhook"
)

func main() { function.Main("webhook", run) }

// run is main without the process, which the tests call: the settings,
// then the wiring (see function.Run).
var run = function.Run(settings.Load, wire)

// The database session, as the worker's: a statement that waits longer than
// lockTimeout for a lock fails (and is retried), and a session idle inside
// a transaction longer than idleInTx is ended. poolSize connections serve a
// whole batch: each record holds one for two short statements, around an
// HTTP attempt that holds none.
const (
	lockTimeout = 5 * time.Second
	idleInTx    = 10 * time.Second
	poolSize    = 2
)

// wire builds the handler from its settings: it looks up the sealing key
// and the database's secret (see package secret); stdout takes its log and
// metric lines. Outside Lambda a poller plays the event source mapping.
func wire(ctx context.Context, s settings.Settings, stdout io.Writer) (*function.Wiring, error) {
	logger := s.Logger(stdout)
	secrets := secret.NewClient(s.AWS)
	sealer, err := secret.WebhookSealer(ctx, s.SealingKey, secrets)
	if err != nil {
		return nil, err
	}
	db, err := database.Open(ctx, s.DB, secrets,
		postgres.WorkerSession(lockTimeout, idleInTx),
		postgres.SessionRole(s.Role),
		database.Pool(poolSize, "jobboard-webhooks"))
	if err != nil {
		return nil, err
	}
	sqsClient := sqs.NewFromConfig(s.AWS)
	redelivery := queue.NewRedeliverer(sqsClient, s.QueueURL)
	h, err := webhook.New(webhook.Config{
		Store:           db,
		Sealer:          sealer,
		Client:          webhook.NewClient(webhook.ClientConfig{AllowInsecure: s.AllowInsecure, Timeout: s.AttemptTimeout}),
		AttemptTimeout:  s.AttemptTimeout,
		Redelivery:      redelivery,
		Requeuer:        redelivery,
		Concurrency:     s.Concurrency,
		BackoffBase:     s.BackoffBase,
		BackoffMax:      s.BackoffMax,
		Logger:          logger,
		Metrics:         stdout,
		FunctionVersion: s.Version,
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	poller := &eventsource.Poller{
		Client:         sqsClient,
		QueueURL:       s.QueueURL,
		Handler:        h.Handle,
		HandlerTimeout: s.LocalTimeout,
		FunctionName:   "webhook",
		Logger:         logger,
	}
	return &function.Wiring{Handler: h.Handle, Local: poller.Run, Close: db.Close}, nil
}
