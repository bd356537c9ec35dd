// Command worker is the status-email worker Lambda. The SQS event source
// mapping (with ReportBatchItemFailures) invokes it with batches of events;
// for each it claims the event id with a lease, emails the candidate through
// SES v2 with no transaction open, and records the outcome (see
// internal/worker).
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset, as under `make dev`) the same
// handler is fed by a local poller that plays the event source mapping
// against STATUS_EVENTS_QUEUE_URL, until SIGINT or SIGTERM.
//
// Environment: DATABASE_URL, or on AWS DATABASE_SECRET_ARN (required, with
// the optional DATABASE_HOST and DATABASE_SSLROOTCERT, see internal/secret);
// MAIL_FROM (required, e.g. "jobboard <jobs@example.com>");
// STATUS_EVENTS_QUEUE_URL (required: failed records get their backoff
// there, and the local mode polls it); ACCOUNT_EMAILS_QUEUE_URL (the
// verification and password reset emails' queue, consumed beside it, so
// that they never wait behind status emails; optional); SES_CONFIGURATION_SET (optional);
// VERIFY_EMAIL_URL (the front-end page that a verification link opens; the
// link adds token=<token> to its query; required in Lambda, default
// http://localhost:3000/verify-email elsewhere); ACCOUNT_RECOVERY_URL (the
// same for the password reset link; default
// http://localhost:3000/reset-password outside Lambda);
// RETENTION_DAYS (default 30, at least 15; as the sweeper's);
// WORKER_CONCURRENCY (records of a batch handled at once, default 10);
// SES_MAX_SEND_RATE (emails per second that every worker instance together
// sends at most; unset: the account's MaxSendRate, from SES's GetAccount,
// asked every 5 minutes);
// LOCAL_INVOCATION_TIMEOUT (local mode only: the deadline of one local
// invocation, 5s to 15m, default 30s, the function's Timeout in
// template.yaml);
// DATABASE_QUERY_EXEC_MODE (as the API's); LOG_LEVEL (debug, info, warn,
// error; default info). AWS settings come from
// the environment (internal/function, internal/awsenv);
// AWS_ENDPOINT_URL_SESV2 and AWS_ENDPOINT_URL_SQS point the clients at local
// stand-ins.
package main

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jobboard/jobboard/functions/worker/settings"
	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/function/eventsource"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/queue"
	"github.com/jobboard/jobboard/internal/secret"
	"github.com/jobboard/jobboard/internal/worker"
)

func main() { function.Main("worker", run) }

// run is main without the process, which the tests call: the settings,
// then the wiring (see function.Run).
var run = function.Run(settings.Load, wire)

// The worker's database session: a claim that waits longer than lockTimeout
// behind another worker fails (and is retried) instead of queueing, and a
// session idle inside a transaction for longer than idleInTx is ended. The
// worker's statements are single and short (no transaction is held across
// an email), so both can be short.
const (
	lockTimeout = 5 * time.Second
	idleInTx    = 10 * time.Second
)

// poolSize is the worker's database connections per sandbox. A connection
// is held only for a statement (about a millisecond) per step, so two serve
// a whole batch of concurrent records, whose time goes to SES.
const poolSize = 2

// wire builds the worker from its settings; stdout takes its log and
// metric lines. Outside Lambda a poller per queue plays its event source
// mapping: batches of up to ten from ACCOUNT_EMAILS_QUEUE_URL and from
// STATUS_EVENTS_QUEUE_URL, failures left for redelivery.
func wire(ctx context.Context, s settings.Settings, stdout io.Writer) (*function.Wiring, error) {
	logger := s.Logger(stdout)
	ses := sesv2.NewFromConfig(s.AWS)
	sender, err := mail.NewSender(ses, s.MailFrom)
	if err != nil {
		return nil, err
	}
	sender.ConfigurationSet = s.ConfigurationSet
	sqsClient := sqs.NewFromConfig(s.AWS)

	// The event source mapping's MaximumConcurrency times poolSize bounds
	// the worker's connections. application_name tells its sessions apart.
	db, err := database.Open(ctx, s.DB, secret.NewClient(s.AWS),
		postgres.WorkerSession(lockTimeout, idleInTx),
		database.Pool(poolSize, "jobboard-worker"))
	if err != nil {
		return nil, err
	}
	// One handler per queue: each gives its failed records their backoff,
	// and puts its deferred records back, on its own queue. They share the
	// database, and so the send schedule.
	rate := mail.NewSendRate(ses, s.MaxSendRate)
	var status *worker.Handler
	accounts := map[string]*worker.Handler{}
	var pollers []*eventsource.Poller
	for _, url := range []string{s.AccountQueueURL, s.QueueURL} {
		if url == "" {
			continue
		}
		redeliverer := queue.NewRedeliverer(sqsClient, url)
		h, err := worker.New(worker.Config{
			Store: db,
			// Read before each send: no email to an address that bounced or complained.
			Suppressions: db,
			Mailer:       sender,
			Redelivery:   redeliverer,
			// Every send takes a slot at the account's rate, shared by
			// every instance through the database.
			Schedule:    db,
			Rate:        rate,
			Requeuer:    redeliverer,
			Concurrency: s.Concurrency,
			Retention:   s.Retention,
			Logger:      logger,
			Metrics:     stdout,
			// The metric line's version dimension, for the deploy's
			// rollback alarms; empty outside Lambda.
			FunctionVersion: s.Version,

			VerifyEmailURL:   s.VerifyEmailURL,
			PasswordResetURL: s.PasswordResetURL,
		})
		if err != nil {
			db.Close()
			return nil, err
		}
		if url == s.QueueURL {
			status = h
		} else {
			accounts[url] = h
		}
		pollers = append(pollers, &eventsource.Poller{
			Client:         sqsClient,
			QueueURL:       url,
			Handler:        h.Handle,
			HandlerTimeout: s.LocalTimeout,
			FunctionName:   "worker",
			Logger:         logger,
		})
	}
	// Each poller runs until ctx ends (eventsource.Poller.Run).
	local := func(ctx context.Context) error {
		var wg sync.WaitGroup
		for _, p := range pollers {
			wg.Go(func() { _ = p.Run(ctx) })
		}
		wg.Wait()
		return nil
	}
	return &function.Wiring{Handler: worker.ByQueue(status, accounts), Local: local, Close: db.Close}, nil
}
