// Command feedback is the delivery feedback Lambda. SES publishes the
// events of every email sent through the stack's configuration set to an
// SNS topic, which delivers them (raw) to the feedback queue; the queue's
// event source mapping (with ReportBatchItemFailures) invokes this
// function with batches of them. For each it records the email's delivery
// state and, for a hard bounce or a complaint, puts the address on the
// suppression list, once per SES event (see internal/feedback).
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset, as under `make dev`) the
// same handler is fed by a local poller that plays the event source
// mapping against FEEDBACK_QUEUE_URL, until SIGINT or SIGTERM.
//
// Environment: DATABASE_URL, or on AWS DATABASE_SECRET_ARN (required, with
// the optional DATABASE_HOST and DATABASE_SSLROOTCERT, see internal/secret);
// FEEDBACK_QUEUE_URL (required outside Lambda: the queue the local mode
// polls); DATABASE_QUERY_EXEC_MODE (as the API's); LOCAL_INVOCATION_TIMEOUT
// (local mode only, 5s to 15m, default 30s, the function's Timeout in
// template.yaml);
// LOG_LEVEL. AWS settings come from the environment (internal/function,
// internal/awsenv); AWS_ENDPOINT_URL_SQS points the client at a stand-in.
package main

import (
	"context"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jobboard/jobboard/functions/feedback/settings"
	"github.com/jobboard/jobboard/internal/feedback"
	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/function/eventsource"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/secret"
)

func main() { function.Main("feedback", run) }

// run is main without the process, which the tests call: the settings,
// then the wiring (see function.Run).
var run = function.Run(settings.Load, wire)

// The database session, as the worker's. One connection serves a batch:
// its records are applied one after the other, one short statement each.
const (
	lockTimeout = 5 * time.Second
	idleInTx    = 10 * time.Second
	poolSize    = 1
)

// wire builds the handler from its settings; stdout takes its log and
// metric lines. Outside Lambda a local poller plays the event source
// mapping.
func wire(ctx context.Context, s settings.Settings, stdout io.Writer) (*function.Wiring, error) {
	logger := s.Logger(stdout)
	db, err := database.Open(ctx, s.DB, secret.NewClient(s.AWS),
		postgres.WorkerSession(lockTimeout, idleInTx),
		database.Pool(poolSize, "jobboard-feedback"))
	if err != nil {
		return nil, err
	}
	h, err := feedback.New(feedback.Config{Store: db, Logger: logger, Metrics: stdout, FunctionVersion: s.Version})
	if err != nil {
		db.Close()
		return nil, err
	}
	poller := &eventsource.Poller{
		Client:         sqs.NewFromConfig(s.AWS),
		QueueURL:       s.QueueURL,
		Handler:        h.Handle,
		HandlerTimeout: s.LocalTimeout,
		FunctionName:   "feedback",
		Logger:         logger,
	}
	return &function.Wiring{Handler: h.Handle, Local: poller.Run, Close: db.Close}, nil
}
