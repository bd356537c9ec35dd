package quota_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/dev/localhost"
	"github.com/jobboard/jobboard/internal/dev/quota"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/queue"
)

// baselineWorkerEnv names a worker binary of an earlier commit to measure
// instead of this tree's (docs/performance.md: the "before" of the quota
// scenario). It consumes the status events queue alone, so the scenario
// then puts account mail there too.
const baselineWorkerEnv = "QUOTA_BASELINE_WORKER"

// scenario is one run: a fresh database, queues on the SQS stand-in,
// the SES stand-in behind a quota, and worker processes.
type scenario struct {
	tb       testing.TB
	proxy    *quota.Proxy
	counter  *quota.ReceiveCounter
	sqs      *sqs.Client
	status   string // queue URLs
	account  string // "" when the worker consumes one queue
	dlqs     []string
	url      string // the database's
	pool     *pgxpool.Pool
	db       *postgres.DB
	router   queue.Router
	sesURL   string
	jobID    int64
	workers  []*exec.Cmd
	baseline bool
}

var (
	buildOnce sync.Once
	builtBin  string
	buildErr  error
)

// workerBinary builds functions/worker once per test process, or returns
// the baseline's.
func workerBinary(tb testing.TB) (string, bool) {
	tb.Helper()
	if bin := os.Getenv(baselineWorkerEnv); bin != "" {
		return bin, true
	}
	buildOnce.Do(func() {
		root, err := localhost.ModuleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "quota-worker-")
		if err != nil {
			buildErr = err
			return
		}
		builtBin = filepath.Join(dir, "worker")
		cmd := exec.Command("go", "build", "-o", builtBin, "./functions/worker")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return builtBin, false
}

// newScenario starts everything but the workers.
func newScenario(tb testing.TB, q quota.Quota) *scenario {
	tb.Helper()
	ctx := context.Background()
	s := &scenario{tb: tb}
	_, s.baseline = workerBinary(tb)
	sqsServer, sesServer := localaws.SQS(tb), localaws.SES(tb)
	s.sesURL = sesServer.Endpoint
	var err error
	if s.proxy, err = quota.Start(ctx, sesServer.Endpoint, q); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.proxy.Close() })
	if s.counter, err = quota.StartReceiveCounter(ctx, sqsServer.Endpoint); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.counter.Close() })
	s.sqs = localaws.NewSQSClient(sqsServer.Endpoint)
	tag := uuid.NewString()[:8]
	// As template.yaml's: maxReceiveCount 10.
	status, statusDLQ, err := localaws.CreateQueueWithDLQ(ctx, s.sqs, "quota-status-"+tag, 60, 10)
	if err != nil {
		tb.Fatal(err)
	}
	s.status, s.dlqs = status, []string{statusDLQ}
	s.router = queue.Router{Status: queue.NewPublisher(s.sqs, status)}
	if !s.baseline {
		account, accountDLQ, err := localaws.CreateQueueWithDLQ(ctx, s.sqs, "quota-account-"+tag, 60, 10)
		if err != nil {
			tb.Fatal(err)
		}
		s.account, s.dlqs = account, append(s.dlqs, accountDLQ)
		s.router.Account = queue.NewPublisher(s.sqs, account)
	}
	s.url = pgtest.NewURL(tb)
	s.pool = pgtest.Pool(tb, s.url)
	s.db = pgtest.Open(tb, s.url).DB
	s.jobID = s.newJob()
	return s
}

// newJob creates an employer, a company and an open job.
func (s *scenario) newJob() int64 {
	ctx := context.Background()
	emp, err := pgtest.CreateUser(ctx, s.pool, jobboard.Registration{Email: "boss-" + uuid.NewString() + "@example.com", Name: "Boss", Role: jobboard.RoleEmployer}, "x")
	if err != nil {
		s.tb.Fatal(err)
	}
	actor := jobboard.Actor{UserID: emp.ID, Role: emp.Role}
	var job jobboard.Job
	pgtest.MustWrite(s.tb, s.db, func(st jobboard.Writes) error {
		c, err := st.CreateCompany(ctx, actor, jobboard.NewCompany{Name: "Acme"})
		if err != nil {
			return err
		}
		job, err = st.CreateJob(ctx, actor, c.ID, jobboard.NewJob{Title: "Engineer", Description: "Go.", EmploymentType: jobboard.FullTime})
		return err
	})
	return job.ID
}

// applicationsSQL makes $1 verified candidates who applied to job $2, in
// one statement (a fixture: the burst needs thousands).
const applicationsSQL = `
WITH c AS (
	INSERT INTO users (email, password_hash, name, role, email_verified_at)
	SELECT 'cand-' || g || '-' || $3 || '@quota.example', 'x', 'Candidate ' || g, 'candidate', now()
	FROM generate_series(1, $1) g RETURNING id)
INSERT INTO applications (job_id, candidate_id) SELECT $2, id FROM c RETURNING id`

// statusEvents returns n status events, each about an application of its
// own.
func (s *scenario) statusEvents(n int) []jobboard.Event {
	rows, err := s.pool.Query(context.Background(), applicationsSQL, n, s.jobID, uuid.NewString()[:8])
	if err != nil {
		s.tb.Fatal(err)
	}
	var evs []jobboard.Event
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			s.tb.Fatal(err)
		}
		evs = append(evs, jobboard.Event{Type: jobboard.EventTypeStatusChanged, EventID: uuid.NewString(),
			OccurredAt: time.Now().UTC(), ApplicationID: id, OldStatus: jobboard.StatusSubmitted, NewStatus: jobboard.StatusReviewing})
	}
	if err := rows.Err(); err != nil {
		s.tb.Fatal(err)
	}
	return evs
}

// publish puts the events on their queues, ten a call, eight calls at once.
func (s *scenario) publish(evs []jobboard.Event) {
	var wg sync.WaitGroup
	chunks := slices.Collect(slices.Chunk(evs, queue.MaxBatch))
	next := make(chan []jobboard.Event)
	for range 8 {
		wg.Go(func() {
			for c := range next {
				if ids, err := s.router.Publish(context.Background(), c); err != nil || len(ids) != len(c) {
					s.tb.Errorf("publish: %d of %d, %v", len(ids), len(c), err)
				}
			}
		})
	}
	for _, c := range chunks {
		next <- c
	}
	close(next)
	wg.Wait()
}

// reset asks for a password reset of a new account, as the API does, and
// publishes its event; it returns the address and when it was published.
func (s *scenario) reset() (string, time.Time) {
	ctx := context.Background()
	email := "reset-" + uuid.NewString()[:8] + "@quota.example"
	u, err := pgtest.CreateUser(ctx, s.pool, jobboard.Registration{Email: email, Name: "Rita", Role: jobboard.RoleCandidate}, "x")
	if err != nil {
		s.tb.Fatal(err)
	}
	pgtest.MarkVerified(s.tb, s.pool, u.ID)
	evs := pgtest.MustWrite(s.tb, s.db, func(st jobboard.Writes) error {
		_, err := st.RequestPasswordReset(ctx, email, jobboard.DefaultPasswordResetPolicy, time.Now())
		return err
	})
	at := time.Now()
	if ids, err := s.router.Publish(ctx, evs); err != nil || len(ids) != 1 {
		s.tb.Fatalf("publish the reset: %v, %v", ids, err)
	}
	return email, at
}

// startWorkers starts n worker processes in their local polling mode.
func (s *scenario) startWorkers(n int) {
	bin, _ := workerBinary(s.tb)
	logDir := s.tb.TempDir()
	for i := range n {
		env := []string{
			"PATH=" + os.Getenv("PATH"),
			"AWS_REGION=" + localaws.Region, "AWS_ACCESS_KEY_ID=quota", "AWS_SECRET_ACCESS_KEY=quota",
			"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull, "AWS_EC2_METADATA_DISABLED=true",
			"AWS_ENDPOINT_URL_SQS=" + s.counter.URL, "AWS_ENDPOINT_URL_SESV2=" + s.proxy.URL,
			"DATABASE_URL=" + s.url, "MAIL_FROM=jobs@quota.example", "LOG_LEVEL=warn",
			"STATUS_EVENTS_QUEUE_URL=" + s.status,
		}
		if s.account != "" {
			env = append(env, "ACCOUNT_EMAILS_QUEUE_URL="+s.account)
		}
		log, err := os.Create(filepath.Join(logDir, "worker-"+strconv.Itoa(i+1)+".log"))
		if err != nil {
			s.tb.Fatal(err)
		}
		cmd := exec.Command(bin)
		cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
		if err := cmd.Start(); err != nil {
			s.tb.Fatal(err)
		}
		s.workers = append(s.workers, cmd)
		s.tb.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			log.Close()
		})
	}
}

// waitUntil polls cond until it holds, failing tb after timeout.
func (s *scenario) waitUntil(timeout time.Duration, what string, cond func() bool) {
	s.tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			s.tb.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

// settled reports whether every queue is empty: nothing visible, in
// flight or delayed.
func (s *scenario) settled() bool {
	for _, u := range []string{s.status, s.account} {
		if u == "" {
			continue
		}
		if n, err := localaws.QueueDepth(context.Background(), s.sqs, u); err != nil || n != 0 {
			return false
		}
	}
	return true
}

// outcome is what became of the events: counted from the SES stand-in's
// store (by the event id header), the dead-letter queues and the
// receive counter.
type outcome struct {
	lost, duplicates, dead int
	receives, maxReceives  int // receives of all events; the highest receive count of one
}

func (s *scenario) outcome(evs []jobboard.Event) outcome {
	s.tb.Helper()
	ctx := context.Background()
	emails, err := localaws.Emails(ctx, s.sesURL)
	if err != nil {
		s.tb.Fatal(err)
	}
	sent := map[string]int{}
	for _, e := range emails {
		sent[e.Header(mail.EventIDHeader)]++
	}
	var o outcome
	receives, maxCount := s.counter.Receives()
	for _, ev := range evs {
		switch n := sent[ev.EventID]; {
		case n == 0:
			o.lost++
		case n > 1:
			o.duplicates += n - 1
		}
		o.receives += receives[ev.EventID]
		o.maxReceives = max(o.maxReceives, maxCount[ev.EventID])
	}
	for _, dlq := range s.dlqs {
		n, err := localaws.QueueDepth(ctx, s.sqs, dlq)
		if err != nil {
			s.tb.Fatal(err)
		}
		o.dead += n
	}
	return o
}
