package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jobboard/jobboard/internal/dev/apiclient"
	"github.com/jobboard/jobboard/internal/dev/faultproxy"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/dev/localhost"
	"github.com/jobboard/jobboard/internal/dev/quota"
)

// mailFrom is the sender of the run's emails.
const mailFrom = "jobs@chaos.jobboard.localhost"

// stack is everything a run starts. close stops all of it, on every path.
type stack struct {
	cfg Config

	dbName, dbURL string
	db            *db

	sqsServer, sesServer *localaws.Server
	sqsProxy, sesProxy   *faultproxy.Proxy
	// sesQuota is SES's sending quota between sesProxy and the stand-in,
	// when Config.SendRate asks for one.
	sesQuota         *quota.Proxy
	sqs              *sqs.Client // straight to the stand-in, never through the proxy
	queueURL, dlqURL string
	// webhookQueueURL is the webhook deliveries' queue (webhook_run.go); the
	// sweeper needs it in every run.
	webhookQueueURL string
	// feedbackQueueURL is SES's delivery feedback, which emitter fills from
	// the SES stand-in's store (in place of SES, SNS and the configuration
	// set) and the feedback function reads.
	feedbackQueueURL, feedbackDLQURL string
	emitter                          *localaws.FeedbackEmitter
	stopEmitter                      context.CancelFunc
	feedback                         *slot

	fleet   *fleet
	apiURLs []string
	sweeper *slot
	workers []*slot
	apis    []*slot
}

// buildBinaries compiles the three functions for this machine into dir.
func buildBinaries(ctx context.Context, dir string) error {
	root, err := localhost.ModuleRoot()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator),
		"./functions/api", "./functions/worker", "./functions/sweeper", "./functions/webhook", "./functions/feedback")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// startServices starts the database, the stand-ins, the proxies and the
// queues. On error, what was started is left in st for close.
func startServices(ctx context.Context, cfg Config, st *stack) error {
	st.cfg = cfg
	var err error
	if st.dbName, st.dbURL, err = createDatabase(ctx, cfg.ServerURL); err != nil {
		return err
	}
	if st.db, err = openDB(ctx, st.dbURL, st.dbName); err != nil {
		return err
	}
	if st.sqsServer, err = localaws.StartSQS(ctx); err != nil {
		return err
	}
	if st.sesServer, err = localaws.StartSES(ctx); err != nil {
		return err
	}
	if st.sqsProxy, err = faultproxy.Start(ctx, st.sqsServer.Endpoint); err != nil {
		return err
	}
	ses := st.sesServer.Endpoint
	if cfg.SendRate > 0 {
		if st.sesQuota, err = quota.Start(ctx, ses, quota.Quota{Rate: cfg.SendRate, Burst: max(cfg.SendRate/2, 1)}); err != nil {
			return err
		}
		ses = st.sesQuota.URL
	}
	if st.sesProxy, err = faultproxy.Start(ctx, ses); err != nil {
		return err
	}
	st.sqs = localaws.NewSQSClient(st.sqsServer.Endpoint)
	st.queueURL, st.dlqURL, err = localaws.CreateQueueWithDLQ(ctx, st.sqs, "status-events",
		int(cfg.VisibilityTimeout/time.Second), cfg.MaxReceiveCount)
	if err != nil {
		return err
	}
	st.webhookQueueURL, _, err = localaws.CreateQueueWithDLQ(ctx, st.sqs, "webhook-events", 30, 30)
	if err != nil {
		return err
	}
	// As template.yaml's (maxReceiveCount 10), with the function's Timeout.
	if st.feedbackQueueURL, st.feedbackDLQURL, err = localaws.CreateQueueWithDLQ(ctx, st.sqs, "feedback", 30, 10); err != nil {
		return err
	}
	st.emitter = &localaws.FeedbackEmitter{SESEndpoint: st.sesServer.Endpoint, SQS: st.sqs, QueueURL: st.feedbackQueueURL}
	emitCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	st.stopEmitter = stop
	go func() { _ = st.emitter.Run(emitCtx) }()
	return nil
}

// startProcesses starts the API processes (and waits until they answer),
// the workers and the sweeper, from the binaries in binDir.
func startProcesses(ctx context.Context, cfg Config, binDir, logDir string, st *stack) error {
	common := []string{
		"AWS_REGION=" + localaws.Region,
		"AWS_ACCESS_KEY_ID=chaos",
		"AWS_SECRET_ACCESS_KEY=chaos",
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_SQS=" + st.sqsProxy.URL,
		"AWS_ENDPOINT_URL_SESV2=" + st.sesProxy.URL,
		"STATUS_EVENTS_QUEUE_URL=" + st.queueURL,
		"WEBHOOK_EVENTS_QUEUE_URL=" + st.webhookQueueURL,
	}
	dbEnv := func(appName string) (string, error) {
		u, err := withDatabase(cfg.ServerURL, st.dbName, appName)
		return "DATABASE_URL=" + u, err
	}
	st.fleet = newFleet(logDir)

	jwtSecret := make([]byte, 32)
	_, _ = rand.Read(jwtSecret) // never fails (crypto/rand)
	ports, err := localhost.FreePorts(ctx, cfg.APIs)
	if err != nil {
		return err
	}
	for i, port := range ports {
		name := "api-" + strconv.Itoa(i+1)
		d, err := dbEnv("chaos-" + name)
		if err != nil {
			return err
		}
		env := append(append([]string{}, common...), d,
			"JWT_SECRET="+hex.EncodeToString(jwtSecret), // shared, so a token works on every instance
			"PORT="+strconv.Itoa(port), "LOG_LEVEL=info")
		s, err := st.fleet.add(name, roleAPI, filepath.Join(binDir, "api"), env)
		if err != nil {
			return err
		}
		st.apis = append(st.apis, s)
		st.apiURLs = append(st.apiURLs, "http://127.0.0.1:"+strconv.Itoa(port))
	}
	for _, u := range st.apiURLs {
		if err := (&apiclient.Client{BaseURL: u}).WaitReady(ctx); err != nil {
			return err
		}
	}
	for i := 1; i <= cfg.Workers; i++ {
		name := "worker-" + strconv.Itoa(i)
		d, err := dbEnv("chaos-" + name)
		if err != nil {
			return err
		}
		env := append(append([]string{}, common...), d,
			"MAIL_FROM="+mailFrom, "LOG_LEVEL=debug",
			"LOCAL_INVOCATION_TIMEOUT="+cfg.InvocationTimeout.String())
		s, err := st.fleet.add(name, roleWorker, filepath.Join(binDir, "worker"), env)
		if err != nil {
			return err
		}
		st.workers = append(st.workers, s)
	}
	d, err := dbEnv("chaos-sweeper")
	if err != nil {
		return err
	}
	env := append(append([]string{}, common...), d, "LOG_LEVEL=info",
		"SWEEP_INTERVAL="+cfg.SweepInterval.String(), "SWEEP_GRACE="+cfg.SweepGrace.String())
	if st.sweeper, err = st.fleet.add("sweeper", roleSweeper, filepath.Join(binDir, "sweeper"), env); err != nil {
		return err
	}
	if d, err = dbEnv("chaos-feedback"); err != nil {
		return err
	}
	env = append(append([]string{}, common...), d, "LOG_LEVEL=info", "FEEDBACK_QUEUE_URL="+st.feedbackQueueURL)
	st.feedback, err = st.fleet.add("feedback", roleFeedback, filepath.Join(binDir, "feedback"), env)
	return err
}

// close stops everything startServices and startProcesses started, in reverse order, and drops
// the database. It runs on a context of its own so that a cancelled run
// still cleans up.
func (st *stack) close() error {
	var errs []error
	if st.stopEmitter != nil {
		st.stopEmitter()
	}
	if st.fleet != nil {
		st.fleet.stopAll()
	}
	for _, p := range []*faultproxy.Proxy{st.sqsProxy, st.sesProxy} {
		if p != nil {
			errs = append(errs, p.Close())
		}
	}
	if st.sesQuota != nil {
		errs = append(errs, st.sesQuota.Close())
	}
	for _, s := range []*localaws.Server{st.sqsServer, st.sesServer} {
		if s != nil {
			errs = append(errs, s.Close())
		}
	}
	if st.db != nil {
		st.db.pool.Close()
	}
	if st.dbName != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs = append(errs, dropDatabase(ctx, st.cfg.ServerURL, st.dbName))
	}
	return errors.Join(errs...)
}

// queueDepth returns the messages of a queue, visible, in flight or delayed.
func (st *stack) queueDepth(ctx context.Context, queueURL string) (int, error) {
	return localaws.QueueDepth(ctx, st.sqs, queueURL)
}

// pause waits d, or less if ctx ends first (then it returns ctx's error).
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
