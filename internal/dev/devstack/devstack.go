// Package devstack runs the whole job board on one machine, for `make dev`:
// the SQS and SES stand-ins, the queue and dead-letter queue that
// template.yaml declares, and the three function binaries in their local
// modes (the API serving HTTP, the worker polling the queue the way the
// Lambda event source mapping does, the sweeper on a timer). It seeds a small
// demo through the public API (or, over a database that has it, reads it
// back as it is) and prints what to try.
//
// The binaries are the same programs that run in Lambda: each one serves
// locally when AWS_LAMBDA_RUNTIME_API is not set.
//
// A running stack describes itself in a state file (State); the tools of
// the local loop work against it: Invocation runs one function under
// aws-lambda-rie with a sample event (FillEvent) and the stack's
// environment (`make invoke`), and Poison watches a malformed message reach
// the dead-letter queue (`make poison`).
package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jobboard/jobboard/internal/dev/apiclient"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/dev/localhost"
	"github.com/jobboard/jobboard/internal/postgres/schema"
)

// Config says where things run. Zero ports pick free ones.
type Config struct {
	// ServerURL names a PostgreSQL server; the stack uses (and creates) the
	// database Database on it.
	ServerURL string
	Database  string
	// BinDir holds the api, worker and sweeper binaries built for this host.
	BinDir  string
	APIPort int
	SQSPort int
	SESPort int
	// Queue is the main queue's configuration, as template.yaml declares it.
	Queue QueueSettings
	// SweepInterval is how often the local sweeper runs.
	SweepInterval time.Duration
	// LogFile, if set, receives the logs of the api, worker and sweeper
	// (created, or emptied first), so that a person's terminal shows only
	// the banner; otherwise they go to Out.
	LogFile string
	// Out receives the children's logs when LogFile is empty.
	Out io.Writer
	// StateFile, if set, is where the running stack's State is written
	// (and removed from when the stack stops), for `make invoke` and `make
	// poison`.
	StateFile string
}

// QueueSettings are the attributes of the status-events queue.
type QueueSettings struct {
	Name              string
	VisibilityTimeout int
	MaxReceiveCount   int
}

// Stack describes a running stack.
type Stack struct {
	APIURL      string
	SQSEndpoint string
	SESEndpoint string
	QueueURL    string
	DLQURL      string
	// Database is the database's name; StateFile where the state is;
	// LogFile where the processes' logs are (empty: Config.Out).
	Database  string
	StateFile string
	LogFile   string
	// PID is the process that runs the stack: stopping it stops everything.
	PID  int
	Demo Demo
	// Env is the functions' environment, NAME=value.
	Env []string
}

// State is what the stack tells other tools through the state file.
func (st Stack) State() State {
	env := make(map[string]string, len(st.Env))
	for _, kv := range st.Env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	return State{
		APIURL:         st.APIURL,
		SQSEndpoint:    st.SQSEndpoint,
		SESEndpoint:    st.SESEndpoint,
		QueueURL:       st.QueueURL,
		DLQURL:         st.DLQURL,
		Env:            env,
		EmployerEmail:  st.Demo.EmployerEmail,
		CandidateEmail: st.Demo.CandidateEmail,
		Password:       st.Demo.Password,
		PID:            st.PID,
	}
}

// VerifyEmailURL and PasswordResetURL are the pages that local
// verification and password reset links open: a front end developed
// against the stack.
const (
	VerifyEmailURL   = "http://localhost:3000/verify-email"
	PasswordResetURL = "http://localhost:3000/reset-password"
)

// MailFrom is the sender address of the local stack's emails.
const MailFrom = "jobs@jobboard.localhost"

// The ports `make dev` uses unless told otherwise (PORT, SQS_PORT,
// SES_PORT); the README's first ten minutes name the API's and SES's.
const (
	DefaultAPIPort = 8080
	DefaultSQSPort = 4566
	DefaultSESPort = 8005
)

// Run starts the stack, calls ready once everything answers and the demo is
// seeded, and runs until ctx is done; then it stops everything it started.
// Errors: anything that kept the stack from starting, or a child that exited
// on its own.
func Run(ctx context.Context, cfg Config, ready func(Stack)) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	dbURL, err := ensureDatabase(ctx, cfg.ServerURL, cfg.Database)
	if err != nil {
		return err
	}
	if err := schema.Migrate(ctx, dbURL); err != nil {
		return err
	}
	sqsSrv, err := localaws.StartSQS(ctx, localaws.WithPort(cfg.SQSPort))
	if err != nil {
		return fmt.Errorf("start SQS stand-in: %w", err)
	}
	defer sqsSrv.Close()
	sesSrv, err := localaws.StartSES(ctx, localaws.WithPort(cfg.SESPort))
	if err != nil {
		return fmt.Errorf("start SES stand-in: %w", err)
	}
	defer sesSrv.Close()

	queueURL, dlqURL, err := localaws.CreateQueueWithDLQ(ctx, localaws.NewSQSClient(sqsSrv.Endpoint),
		cfg.Queue.Name, cfg.Queue.VisibilityTimeout, cfg.Queue.MaxReceiveCount)
	if err != nil {
		return err
	}
	// The webhook deliveries' queue, as template.yaml's (maxReceiveCount
	// 30), with the delivery function's Timeout as visibility.
	webhookQueueURL, _, err := localaws.CreateQueueWithDLQ(ctx, localaws.NewSQSClient(sqsSrv.Endpoint),
		cfg.Queue.Name+"-webhooks", 30, 30)
	if err != nil {
		return err
	}

	// SES's delivery feedback, as template.yaml's queue (maxReceiveCount
	// 10), fed by the emitter below in place of SES, SNS and the
	// configuration set: emails to the mailbox simulator's bounce@ and
	// complaint@ addresses bounce and complain.
	feedbackQueueURL, _, err := localaws.CreateQueueWithDLQ(ctx, localaws.NewSQSClient(sqsSrv.Endpoint),
		cfg.Queue.Name+"-feedback", 30, 10)
	if err != nil {
		return err
	}
	emitter := &localaws.FeedbackEmitter{SESEndpoint: sesSrv.Endpoint, SQS: localaws.NewSQSClient(sqsSrv.Endpoint), QueueURL: feedbackQueueURL}
	go func() { _ = emitter.Run(ctx) }()

	apiPort := cfg.APIPort
	if apiPort == 0 {
		ports, err := localhost.FreePorts(ctx, 1)
		if err != nil {
			return err
		}
		apiPort = ports[0]
	}
	st := Stack{
		APIURL:      "http://127.0.0.1:" + strconv.Itoa(apiPort),
		SQSEndpoint: sqsSrv.Endpoint,
		SESEndpoint: sesSrv.Endpoint,
		QueueURL:    queueURL,
		DLQURL:      dlqURL,
		Database:    cfg.Database,
		StateFile:   cfg.StateFile,
		LogFile:     cfg.LogFile,
		PID:         os.Getpid(),
	}
	st.Env = []string{
		"DATABASE_URL=" + dbURL,
		"JWT_SECRET=" + randomSecret(),
		"STATUS_EVENTS_QUEUE_URL=" + queueURL,
		"WEBHOOK_EVENTS_QUEUE_URL=" + webhookQueueURL,
		"FEEDBACK_QUEUE_URL=" + feedbackQueueURL,
		// One sealing key for the API, which seals the endpoints' secrets,
		// and the delivery function, which opens them; local endpoints
		// (http on localhost) are allowed.
		"WEBHOOK_SEALING_KEY=" + randomSecret(),
		"WEBHOOK_ALLOW_INSECURE=true",
		"MAIL_FROM=" + MailFrom,
		// The front end a verification or reset link opens; set here too
		// (the worker's local defaults are the same) so that `make invoke`
		// runs the worker in its Lambda mode, where they are required.
		"VERIFY_EMAIL_URL=" + VerifyEmailURL,
		"ACCOUNT_RECOVERY_URL=" + PasswordResetURL,
		// Every request's access line, and the worker's claims, are at
		// DEBUG: locally there is no HTTP API access log to read instead.
		"LOG_LEVEL=DEBUG",
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=local",
		"AWS_SECRET_ACCESS_KEY=local",
		"AWS_ENDPOINT_URL_SQS=" + sqsSrv.Endpoint,
		"AWS_ENDPOINT_URL_SESV2=" + sesSrv.Endpoint,
		"PORT=" + strconv.Itoa(apiPort),
		"SWEEP_INTERVAL=" + cfg.SweepInterval.String(),
	}

	logs := cfg.Out
	if cfg.LogFile != "" {
		f, err := createLogFile(cfg.LogFile)
		if err != nil {
			return err
		}
		defer f.Close()
		logs = f
	}
	// The others wait for the API: the demo is seeded through it.
	children := newGroup(logs, cancel)
	defer children.stop()
	if err := children.start(ctx, "api", filepath.Join(cfg.BinDir, "api"), st.Env); err != nil {
		return err
	}
	if err := (&apiclient.Client{BaseURL: st.APIURL}).WaitReady(ctx); err != nil {
		return fmt.Errorf("api: %w", err)
	}
	for _, name := range []string{"worker", "sweeper", "webhook", "feedback"} {
		if err := children.start(ctx, name, filepath.Join(cfg.BinDir, name), st.Env); err != nil {
			return err
		}
	}
	if st.Demo, err = seedDemo(ctx, st.APIURL, st.SESEndpoint); err != nil {
		return fmt.Errorf("seed demo: %w", err)
	}
	if cfg.StateFile != "" {
		if err := writeState(cfg.StateFile, st.State()); err != nil {
			return err
		}
		defer os.Remove(cfg.StateFile)
	}
	ready(st)
	<-ctx.Done()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		if cfg.LogFile != "" {
			return fmt.Errorf("%w (the processes' logs are in %s)", err, cfg.LogFile)
		}
		return err
	}
	return nil
}

// createLogFile creates (or empties) the file at path, and its folder.
func createLogFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create the log file: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create the log file: %w", err)
	}
	return f, nil
}

// randomSecret is the local stack's JWT key: new on every start, so tokens
// from an earlier run stop working, as they would after a key rotation.
func randomSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics on a broken source)
	return hex.EncodeToString(b)
}
