package chaos

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/jobboard/jobboard/internal/dev/apiclient"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/dev/localhost"
	"github.com/jobboard/jobboard/internal/dev/syncio"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// The webhook run: the promise of webhooks under faults. Every committed
// change that a company's endpoint subscribes to reaches that endpoint's
// receiver, answered 2xx at least once, under one webhook-id; the same
// change is never delivered under two ids; every request verifies. While
// applications, status changes, withdrawals and job closings flow through
// the API, receivers are killed (connections refused and cut), slowed past
// the delivery function's timeout, slowed within it and made to fail, and
// delivery functions are killed and frozen past their lease. A slow tenant
// rides along: a company whose receiver always answers slowly (within the
// timeout, beyond jobboard.WebhookSlowAttempt); its deliveries must arrive
// too, and the report gives the other tenants' delivery latency beside it
// (issue 29.4).

// WebhookConfig is one webhook chaos run. WebhookShort and WebhookFull
// return the two standard ones; ServerURL, Seed, BinDir, LogDir and Out are
// the caller's, as in Config.
type WebhookConfig struct {
	Name      string
	ServerURL string
	Seed      int64
	BinDir    string
	LogDir    string
	Out       io.Writer

	// Deliverers is how many delivery functions poll the queue.
	Deliverers int
	// Receivers is how many companies, each with one endpoint (its own
	// receiver) subscribed to every event type, and JobsPerCompany jobs.
	Receivers      int
	JobsPerCompany int
	// SlowTenants are more companies like those, whose receivers answer
	// every request after SlowAnswer, and take no faults.
	SlowTenants int
	SlowAnswer  time.Duration
	// Candidates apply to every job; Changes status changes (and
	// withdrawals) then flow over LoadDuration, by Walkers walkers; at
	// the end every job is closed.
	Candidates   int
	Changes      int
	LoadDuration time.Duration
	Walkers      int
	// AttemptTimeout, BackoffBase and BackoffMax are the delivery
	// function's (shortened, so that a run settles in seconds).
	AttemptTimeout time.Duration
	BackoffBase    time.Duration
	BackoffMax     time.Duration
	// FaultGapMin and FaultGapMax bound the pause between two faults;
	// FaultMax bounds how long one lasts.
	FaultGapMin, FaultGapMax time.Duration
	FaultMax                 time.Duration
	SettleTimeout            time.Duration
}

// WebhookShort is the run `go test` makes: about a minute.
func WebhookShort() WebhookConfig {
	return WebhookConfig{
		Name: "webhooks-short", Deliverers: 2, Receivers: 3, JobsPerCompany: 2, Candidates: 6, SlowTenants: 1, SlowAnswer: 1500 * time.Millisecond,
		Changes: 120, LoadDuration: 20 * time.Second, Walkers: 4,
		AttemptTimeout: 2 * time.Second, BackoffBase: time.Second, BackoffMax: 3 * time.Second,
		FaultGapMin: 700 * time.Millisecond, FaultGapMax: 1500 * time.Millisecond, FaultMax: 4 * time.Second,
		SettleTimeout: 90 * time.Second,
	}
}

// WebhookFull is the run of `make chaos`: about four minutes.
func WebhookFull() WebhookConfig {
	return WebhookConfig{
		Name: "webhooks-full", Deliverers: 3, Receivers: 5, JobsPerCompany: 4, Candidates: 20, SlowTenants: 1, SlowAnswer: 1500 * time.Millisecond,
		Changes: 1500, LoadDuration: 150 * time.Second, Walkers: 8,
		AttemptTimeout: 2 * time.Second, BackoffBase: time.Second, BackoffMax: 5 * time.Second,
		FaultGapMin: time.Second, FaultGapMax: 3 * time.Second, FaultMax: 8 * time.Second,
		SettleTimeout: 3 * time.Minute,
	}
}

func (c WebhookConfig) validate() error {
	var errs []error
	check := func(ok bool, msg string) {
		if !ok {
			errs = append(errs, errors.New(msg))
		}
	}
	check(c.ServerURL != "", "ServerURL is required")
	check(c.Deliverers >= 1 && c.Receivers >= 1 && c.JobsPerCompany >= 1 && c.Candidates >= 1, "need deliverers, receivers, jobs and candidates")
	check(c.Changes >= 1 && c.Walkers >= 1 && c.LoadDuration > 0, "need changes, walkers and a load duration")
	check(c.SlowTenants == 0 || c.SlowAnswer >= jobboard.WebhookSlowAttempt && c.SlowAnswer < c.AttemptTimeout,
		"a slow tenant's answer must be slow (at least jobboard.WebhookSlowAttempt) and within the attempt timeout")
	check(c.AttemptTimeout >= time.Second && c.BackoffBase >= time.Second && c.BackoffMax >= c.BackoffBase, "need an attempt timeout and a backoff of at least a second")
	check(c.FaultGapMin > 0 && c.FaultGapMax >= c.FaultGapMin && c.FaultMax > 0, "need fault gaps and a fault length")
	check(c.SettleTimeout > 0, "SettleTimeout must be positive")
	return errors.Join(errs...)
}

// WebhookReport is what a webhook run found.
type WebhookReport struct {
	Name     string
	Seed     int64
	LogDir   string
	Database string
	Duration time.Duration

	// Committed changes, from the database: applications, status changes
	// (withdrawals among them), jobs closed.
	Applications, StatusChanges, Withdrawals, JobsClosed int
	// Events and Deliveries are the webhook rows written with them.
	Events, Deliveries int
	// Requests is every request the receivers got; Retries those beyond
	// the first of each webhook-id; Processed2xxTwice the ids answered 2xx
	// more than once (a receiver that did not drop duplicates would have
	// processed them twice: the at-least-once cost, always under one id).
	Requests, Retries, Processed2xxTwice int
	// Faults counts the faults injected, by kind.
	Faults map[string]int
	// Latency is, per tenant kind, the time from each delivery's dispatch
	// to its first request at the receiver: "healthy", a company whose
	// receiver took no fault from the dispatch to then (nor an attempt
	// timeout before it: it may still be known as slow); "faulted", one
	// whose receiver did; "slow", a slow tenant.
	Latency map[string]Percentiles

	// The failures of the promise, each a list of what broke it.
	Lost           []string // a delivery never answered 2xx
	MissingEvents  []string // a committed change without its webhook event
	SplitFacts     []string // one change delivered under two webhook-ids
	UnknownIDs     []string // a webhook-id the database does not have
	BadSignatures  int
	Crashed        []string
	Failures       []string
	SettleDuration time.Duration
}

// Passed reports whether the run kept the promise.
func (r *WebhookReport) Passed() bool { return len(r.Failures) == 0 }

// Print writes the report.
func (r *WebhookReport) Print(w io.Writer) {
	fmt.Fprintf(w, "\nwebhook chaos (%s), seed %d, %s\n", r.Name, r.Seed, r.Duration.Round(time.Second))
	fmt.Fprintf(w, "  committed: %d applications, %d status changes (%d withdrawals), %d jobs closed\n",
		r.Applications, r.StatusChanges, r.Withdrawals, r.JobsClosed)
	fmt.Fprintf(w, "  webhook events %d, deliveries %d; receivers got %d requests (%d retries of a webhook-id)\n",
		r.Events, r.Deliveries, r.Requests, r.Retries)
	kinds := make([]string, 0, len(r.Faults))
	for k := range r.Faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	fmt.Fprint(w, "  faults:")
	for _, k := range kinds {
		fmt.Fprintf(w, " %s %d", k, r.Faults[k])
	}
	fmt.Fprintln(w)
	for _, kind := range []string{"healthy", "faulted", "slow"} {
		if l, ok := r.Latency[kind]; ok {
			fmt.Fprintf(w, "  %s tenants' deliveries, dispatch to first request: %s\n", kind, l)
		}
	}
	fmt.Fprintf(w, "  lost %d, committed changes without an event %d, changes under two webhook-ids %d, unknown ids %d, bad signatures %d\n",
		len(r.Lost), len(r.MissingEvents), len(r.SplitFacts), len(r.UnknownIDs), r.BadSignatures)
	fmt.Fprintf(w, "  duplicates, all retries of one webhook-id: %d ids answered 2xx more than once\n", r.Processed2xxTwice)
	fmt.Fprintf(w, "  settled in %s\n", r.SettleDuration.Round(100*time.Millisecond))
	if r.LogDir != "" {
		fmt.Fprintln(w, "  logs in "+r.LogDir)
	}
	if r.Passed() {
		fmt.Fprintln(w, "  PASSED: 0 lost; duplicates only as retries of the same webhook-id")
		return
	}
	fmt.Fprintln(w, "  FAILED:")
	for _, f := range r.Failures {
		fmt.Fprintln(w, "  - "+f)
	}
}

// webhookRun is the state of one RunWebhooks.
type webhookRun struct {
	cfg       WebhookConfig
	rep       *WebhookReport
	rng       *rand.Rand
	logf      func(string, ...any)
	st        *stack
	receivers []*receiver
	log       *receiptLog
	deliver   []*slot

	mu     sync.Mutex
	faults map[string]int
	// faulted are the times each receiver (by index) was under a fault.
	faulted map[int][]span
}

// span is a stretch of time.
type span struct{ from, to time.Time }

// RunWebhooks performs one webhook chaos run and returns its report; the
// run passed when its Failures are empty. It stops everything it started
// and drops its database on every path. Errors: the run could not be
// carried out.
func RunWebhooks(ctx context.Context, cfg WebhookConfig) (rep *WebhookReport, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep = &WebhookReport{Name: cfg.Name, Seed: cfg.Seed, Faults: map[string]int{}}
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	out = syncio.NewWriter(out)
	r := &webhookRun{cfg: cfg, rep: rep, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), 0x77656268)), log: &receiptLog{}, faults: map[string]int{},
		logf: func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }}
	r.logf("webhook chaos (%s): seed %d", cfg.Name, cfg.Seed)

	logDir, keep := cfg.LogDir, true
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "jobboard-webhook-chaos-"); err != nil {
			return rep, err
		}
		keep = false
	}
	if err := os.MkdirAll(logDir, 0o750); err != nil {
		return rep, err
	}
	rep.LogDir = logDir
	binDir := cfg.BinDir
	if binDir == "" {
		if binDir, err = os.MkdirTemp("", "jobboard-webhook-chaos-bin-"); err != nil {
			return rep, err
		}
		defer os.RemoveAll(binDir)
		if err := buildBinaries(ctx, binDir); err != nil {
			return rep, err
		}
	}
	r.st = &stack{}
	defer func() {
		for _, rc := range r.receivers {
			rc.kill()
		}
		if cerr := r.st.close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
		}
		if r.st.fleet != nil {
			rep.Crashed = r.st.fleet.crashed()
		}
		if err != nil {
			rep.Failures = append(rep.Failures, "the run did not complete: "+err.Error())
		}
		rep.Duration = time.Since(start)
		if !keep && err == nil && rep.Passed() {
			_ = os.RemoveAll(logDir)
			rep.LogDir = ""
		}
	}()
	// The email run's services: the database, the stand-ins, the queues.
	if err := startServices(ctx, Config{ServerURL: cfg.ServerURL, VisibilityTimeout: 30 * time.Second, MaxReceiveCount: maxReceiveCount}, r.st); err != nil {
		return rep, err
	}
	rep.Database = r.st.dbName
	if keep {
		r.logf("starting the stack (logs in %s)", logDir)
	} else {
		r.logf("starting the stack (logs in %s, removed if the run passes)", logDir)
	}
	if err := r.startProcesses(ctx, binDir, logDir); err != nil {
		return rep, fmt.Errorf("start the stack: %w", err)
	}
	if err := r.phases(ctx); err != nil {
		return rep, err
	}
	r.judge()
	return rep, nil
}

// startProcesses starts the receivers, one API, the sweeper and the
// delivery functions.
func (r *webhookRun) startProcesses(ctx context.Context, binDir, logDir string) error {
	cfg, st := r.cfg, r.st
	ports, err := localhost.FreePorts(ctx, cfg.Receivers+cfg.SlowTenants+1)
	if err != nil {
		return err
	}
	for i := range cfg.Receivers + cfg.SlowTenants {
		rc := &receiver{index: i, port: ports[i+1], log: r.log, base: receiverUp, slow: 2 * cfg.AttemptTimeout, lag: cfg.AttemptTimeout / 2}
		if i >= cfg.Receivers {
			rc.lag, rc.base = cfg.SlowAnswer, receiverLagging
			rc.restore()
		}
		if err := rc.start(); err != nil {
			return err
		}
		r.receivers = append(r.receivers, rc)
	}
	dbURL, err := withDatabase(cfg.ServerURL, st.dbName, "")
	if err != nil {
		return err
	}
	env := []string{
		"AWS_REGION=" + localaws.Region, "AWS_ACCESS_KEY_ID=chaos", "AWS_SECRET_ACCESS_KEY=chaos",
		"AWS_CONFIG_FILE=" + os.DevNull, "AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_SQS=" + st.sqsServer.Endpoint, "AWS_ENDPOINT_URL_SESV2=" + st.sesServer.Endpoint,
		"STATUS_EVENTS_QUEUE_URL=" + st.queueURL, "WEBHOOK_EVENTS_QUEUE_URL=" + st.webhookQueueURL,
		"DATABASE_URL=" + dbURL, "JWT_SECRET=" + randomHex(32), "WEBHOOK_SEALING_KEY=" + randomHex(32),
		"WEBHOOK_ALLOW_INSECURE=true", "LOG_LEVEL=info",
	}
	st.fleet = newFleet(logDir)
	apiURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	api, err := st.fleet.add("api-1", roleAPI, filepath.Join(binDir, "api"), append(append([]string{}, env...), "PORT="+strconv.Itoa(ports[0])))
	if err != nil {
		return err
	}
	st.apis, st.apiURLs = append(st.apis, api), append(st.apiURLs, apiURL)
	if err := (&apiclient.Client{BaseURL: apiURL}).WaitReady(ctx); err != nil {
		return err
	}
	if st.sweeper, err = st.fleet.add("sweeper", roleSweeper, filepath.Join(binDir, "sweeper"),
		append(append([]string{}, env...), "SWEEP_INTERVAL=1s", "SWEEP_GRACE=2s")); err != nil {
		return err
	}
	for i := 1; i <= cfg.Deliverers; i++ {
		s, err := st.fleet.add("webhook-"+strconv.Itoa(i), roleWebhook, filepath.Join(binDir, "webhook"), append(append([]string{}, env...),
			"WEBHOOK_ATTEMPT_TIMEOUT="+cfg.AttemptTimeout.String(), "WEBHOOK_BACKOFF_BASE="+cfg.BackoffBase.String(),
			"WEBHOOK_BACKOFF_MAX="+cfg.BackoffMax.String(), "LOCAL_INVOCATION_TIMEOUT=30s"))
		if err != nil {
			return err
		}
		r.deliver = append(r.deliver, s)
	}
	return nil
}

// roleWebhook is a delivery function's process.
const roleWebhook role = "webhook"

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// company is one seeded company: its employer's token, its jobs and the
// applications to them.
type company struct {
	token string
	jobs  []int64
	apps  []*application
}

func (r *webhookRun) phases(ctx context.Context) error {
	cfg := r.cfg
	a := newAPI(r.st.apiURLs, 10*time.Second, rand.New(rand.NewPCG(r.rng.Uint64(), 1)))
	companies, err := r.seed(ctx, a)
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	var apps []*application
	for _, c := range companies {
		apps = append(apps, c.apps...)
	}
	r.logf("seeded %d companies with an endpoint each, %d applications", len(companies), len(apps))

	// The load and the faults, together; each with a random source of its
	// own, drawn from the run's.
	walkSeed := r.rng.Uint64()
	faultRng := rand.New(rand.NewPCG(r.rng.Uint64(), 3))
	loadCtx, stopFaults := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.injectFaults(loadCtx, faultRng) })
	var stats loadStats
	walk(ctx, a, Config{Changes: cfg.Changes, LoadDuration: cfg.LoadDuration, Walkers: cfg.Walkers}, apps, walkSeed, &stats)
	for _, c := range companies {
		for _, j := range c.jobs {
			if err := a.do(ctx, http.MethodPatch, "/v1/jobs/"+strconv.FormatInt(j, 10), c.token,
				map[string]any{"status": "closed"}, http.StatusOK, nil); err != nil {
				r.logf("close job %d: %v (the database says what committed)", j, err)
			}
		}
	}
	stopFaults()
	wg.Wait()
	r.logf("load done: %d status requests, %d confirmed", stats.Requests.Load(), stats.Confirmed.Load())

	// Settle with everything whole.
	for _, rc := range r.receivers {
		rc.restore()
		if err := rc.start(); err != nil {
			return err
		}
	}
	if err := r.st.fleet.restoreAll(); err != nil {
		return err
	}
	began := time.Now()
	deadline := time.Now().Add(cfg.SettleTimeout)
	for {
		pending, err := r.pending(ctx)
		if err != nil {
			return err
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			r.rep.Failures = append(r.rep.Failures, fmt.Sprintf("%d deliveries still pending after %v", pending, cfg.SettleTimeout))
			break
		}
		if err := pause(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	r.rep.SettleDuration = time.Since(began)
	r.logf("settled in %s", r.rep.SettleDuration.Round(100*time.Millisecond))
	return r.collect(ctx)
}

// seed registers the companies, each with an endpoint for its receiver
// subscribed to every event, their jobs and the candidates' applications.
func (r *webhookRun) seed(ctx context.Context, a *api) ([]*company, error) {
	register := func(role string, i int) (string, error) {
		var out struct {
			Token string `json:"token"`
		}
		err := a.do(ctx, http.MethodPost, "/v1/auth/register", "", map[string]any{
			"email": fmt.Sprintf("%s-%d@webhooks.chaos.example.com", role, i), "password": password,
			"name": fmt.Sprintf("%s %d", role, i), "role": role}, http.StatusCreated, &out)
		return out.Token, err
	}
	var companies []*company
	for i, rc := range r.receivers {
		token, err := register("employer", i)
		if err != nil {
			return nil, err
		}
		var co struct {
			ID int64 `json:"id"`
		}
		if err := a.do(ctx, http.MethodPost, "/v1/companies", token, map[string]any{"name": fmt.Sprintf("Hooked %d", i)}, http.StatusCreated, &co); err != nil {
			return nil, err
		}
		var hook struct {
			Secret string `json:"secret"`
		}
		if err := a.do(ctx, http.MethodPost, fmt.Sprintf("/v1/companies/%d/webhooks", co.ID), token, map[string]any{
			"url": rc.URL(), "event_types": jobboard.WebhookEventTypes}, http.StatusCreated, &hook); err != nil {
			return nil, err
		}
		rc.setSecret(hook.Secret)
		c := &company{token: token}
		for j := range r.cfg.JobsPerCompany {
			var job struct {
				ID int64 `json:"id"`
			}
			if err := a.do(ctx, http.MethodPost, fmt.Sprintf("/v1/companies/%d/jobs", co.ID), token, map[string]any{
				"title": fmt.Sprintf("Hook %d", j), "description": "Receives webhooks.", "employment_type": "full_time"}, http.StatusCreated, &job); err != nil {
				return nil, err
			}
			c.jobs = append(c.jobs, job.ID)
		}
		companies = append(companies, c)
	}
	for k := range r.cfg.Candidates {
		token, err := register("candidate", k)
		if err != nil {
			return nil, err
		}
		for _, c := range companies {
			for _, j := range c.jobs {
				var app struct {
					ID int64 `json:"id"`
				}
				if err := a.do(ctx, http.MethodPost, fmt.Sprintf("/v1/jobs/%d/applications", j), token,
					map[string]any{"cover_letter": "Hook me."}, http.StatusCreated, &app); err != nil {
					return nil, err
				}
				c.apps = append(c.apps, &application{id: app.ID, employerToken: c.token, candidateToken: token, status: jobboard.StatusSubmitted})
			}
		}
	}
	return companies, nil
}

// injectFaults disturbs receivers and delivery functions until ctx ends:
// each fault lasts a random time up to FaultMax, then is undone. rng is
// this goroutine's alone.
func (r *webhookRun) injectFaults(ctx context.Context, rng *rand.Rand) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		gap := r.cfg.FaultGapMin + time.Duration(rng.Int64N(int64(r.cfg.FaultGapMax-r.cfg.FaultGapMin)+1))
		if pause(ctx, gap) != nil {
			return
		}
		length := time.Second + time.Duration(rng.Int64N(int64(r.cfg.FaultMax)))
		kind := []string{"receiver_killed", "receiver_slow", "receiver_lagging", "receiver_failing", "deliverer_killed", "deliverer_frozen"}[rng.IntN(6)]
		rc := r.receivers[rng.IntN(r.cfg.Receivers)] // not a slow tenant's
		deliverer := r.st.fleet.pick(roleWebhook, rng.IntN)
		r.mu.Lock()
		r.faults[kind]++
		r.mu.Unlock()
		wg.Go(func() { r.fault(ctx, kind, rc, deliverer, length) })
	}
}

// fault injects one fault for length, then undoes it: on the receiver rc,
// or on the delivery function s (nil: none was up, nothing to do).
func (r *webhookRun) fault(ctx context.Context, kind string, rc *receiver, s *slot, length time.Duration) {
	f := r.st.fleet
	wait := func() { _ = pause(context.WithoutCancel(ctx), length) }
	switch kind {
	case "receiver_killed", "receiver_slow", "receiver_lagging", "receiver_failing":
		from := time.Now()
		defer func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.faulted == nil {
				r.faulted = map[int][]span{}
			}
			r.faulted[rc.index] = append(r.faulted[rc.index], span{from, time.Now()})
		}()
	}
	switch kind {
	case "receiver_killed":
		rc.kill()
		wait()
		if err := rc.start(); err != nil {
			r.logf("restart receiver %d: %v", rc.index, err)
		}
	case "receiver_slow", "receiver_lagging", "receiver_failing":
		rc.setMode(map[string]receiverMode{"receiver_slow": receiverSlow, "receiver_lagging": receiverLagging, "receiver_failing": receiverFailing}[kind])
		wait()
		rc.restore()
	case "deliverer_killed":
		if s != nil && f.kill(s) != nil {
			wait()
			if err := f.start(s); err != nil {
				r.logf("restart %s: %v", s.name, err)
			}
		}
	case "deliverer_frozen":
		if s == nil {
			return
		}
		if in := f.freeze(s); in != nil {
			wait()
			f.thaw(in)
		}
	}
}

// pending counts the deliveries not delivered yet.
func (r *webhookRun) pending(ctx context.Context) (int, error) {
	var n int
	err := r.st.db.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE state <> 'delivered'`).Scan(&n)
	return n, err
}

// collect reads the ground truth from the database into the report.
func (r *webhookRun) collect(ctx context.Context) error {
	rep, pool := r.rep, r.st.db.pool
	for _, q := range []struct {
		sql  string
		into *int
	}{
		{`SELECT count(*) FROM applications`, &rep.Applications},
		{`SELECT count(*) FROM application_status_history`, &rep.StatusChanges},
		{`SELECT count(*) FROM application_status_history WHERE new_status = 'withdrawn'`, &rep.Withdrawals},
		{`SELECT count(*) FROM jobs WHERE status = 'closed'`, &rep.JobsClosed},
		{`SELECT count(*) FROM webhook_events`, &rep.Events},
		{`SELECT count(*) FROM webhook_deliveries`, &rep.Deliveries},
	} {
		if err := pool.QueryRow(ctx, q.sql).Scan(q.into); err != nil {
			return fmt.Errorf("%s: %w", q.sql, err)
		}
	}
	// Every committed change has its event: the counts of the changes and
	// of the events of each type agree.
	var missing []string
	for _, q := range []struct{ typ, sql string }{
		{jobboard.WebhookApplicationSubmitted, `SELECT count(*) FROM applications a WHERE NOT EXISTS (
			SELECT 1 FROM webhook_events e WHERE e.type = 'application.submitted' AND e.application_id = a.id)`},
		{jobboard.WebhookApplicationStatusChanged, `SELECT count(*) FROM application_status_history h WHERE NOT EXISTS (
			SELECT 1 FROM webhook_events e WHERE e.type = 'application.status_changed' AND e.application_id = h.application_id
			AND e.old_status = h.old_status AND e.new_status = h.new_status)`},
		{jobboard.WebhookApplicationWithdrawn, `SELECT count(*) FROM application_status_history h WHERE h.new_status = 'withdrawn' AND NOT EXISTS (
			SELECT 1 FROM webhook_events e WHERE e.type = 'application.withdrawn' AND e.application_id = h.application_id)`},
		{jobboard.WebhookJobClosed, `SELECT count(*) FROM jobs j WHERE j.status = 'closed' AND NOT EXISTS (
			SELECT 1 FROM webhook_events e WHERE e.type = 'job.closed' AND e.job_id = j.id)`},
	} {
		var n int
		if err := pool.QueryRow(ctx, q.sql).Scan(&n); err != nil {
			return err
		}
		for range n {
			missing = append(missing, q.typ)
		}
	}
	rep.MissingEvents = missing

	// Which receiver each delivery's endpoint is: endpoints were made in
	// receiver order, ids 1..n.
	rows, err := pool.Query(ctx, `SELECT d.event_id::text, d.endpoint_id, d.state, d.dispatched_at FROM webhook_deliveries d`)
	if err != nil {
		return err
	}
	type delivery struct {
		endpoint   int64
		state      string
		dispatched time.Time
	}
	byID := map[string]delivery{}
	for rows.Next() {
		var id string
		var d delivery
		if err := rows.Scan(&id, &d.endpoint, &d.state, &d.dispatched); err != nil {
			return err
		}
		byID[id] = d
	}
	if err := rows.Err(); err != nil {
		return err
	}
	receipts := r.log.all()
	rep.Requests = len(receipts)
	got2xx := map[string]int{}
	seen := map[string]int{}
	first := map[string]receipt{}
	factIDs := map[string]map[string]bool{}
	for _, rc := range receipts {
		if f, ok := first[rc.ID]; !ok || rc.At.Before(f.At) {
			first[rc.ID] = rc
		}
		seen[rc.ID]++
		if !rc.Verified {
			rep.BadSignatures++
		}
		if rc.Status >= 200 && rc.Status <= 299 {
			got2xx[rc.ID]++
		}
		if _, ok := byID[rc.ID]; !ok {
			rep.UnknownIDs = append(rep.UnknownIDs, rc.ID)
		}
		if rc.Fact != "" {
			if factIDs[rc.Fact] == nil {
				factIDs[rc.Fact] = map[string]bool{}
			}
			factIDs[rc.Fact][rc.ID] = true
		}
	}
	for id, n := range seen {
		rep.Retries += n - 1
		if got2xx[id] > 1 {
			rep.Processed2xxTwice++
		}
	}
	for id, d := range byID {
		if got2xx[id] == 0 || d.state != jobboard.DeliveryDelivered {
			rep.Lost = append(rep.Lost, fmt.Sprintf("%s (endpoint %d, %s, %d requests)", id, d.endpoint, d.state, seen[id]))
		}
	}
	latency := map[string][]time.Duration{}
	r.mu.Lock()
	faulted := r.faulted
	r.mu.Unlock()
	for id, rc := range first {
		if d, ok := byID[id]; ok {
			kind := "healthy"
			for _, f := range faulted[rc.Endpoint] {
				if f.from.Before(rc.At) && f.to.Add(r.cfg.AttemptTimeout).After(d.dispatched) {
					kind = "faulted"
				}
			}
			if rc.Endpoint >= r.cfg.Receivers {
				kind = "slow"
			}
			latency[kind] = append(latency[kind], rc.At.Sub(d.dispatched))
		}
	}
	rep.Latency = map[string]Percentiles{}
	for kind, ds := range latency {
		rep.Latency[kind] = percentilesOf(ds)
	}
	for fact, ids := range factIDs {
		if len(ids) > 1 {
			rep.SplitFacts = append(rep.SplitFacts, fmt.Sprintf("%s under %d ids", fact, len(ids)))
		}
	}
	sort.Strings(rep.Lost)
	sort.Strings(rep.SplitFacts)
	r.mu.Lock()
	for k, n := range r.faults {
		rep.Faults[k] = n
	}
	r.mu.Unlock()
	return writeJSON(filepath.Join(rep.LogDir, "webhook-receipts.json"), receipts)
}

// judge turns what was found into failures.
func (r *webhookRun) judge() {
	rep := r.rep
	fail := func(format string, args ...any) { rep.Failures = append(rep.Failures, fmt.Sprintf(format, args...)) }
	if len(rep.Lost) > 0 {
		fail("%d deliveries lost (never answered 2xx), e.g. %s", len(rep.Lost), firstFew(rep.Lost))
	}
	if len(rep.MissingEvents) > 0 {
		fail("%d committed changes without their webhook event: %v", len(rep.MissingEvents), rep.MissingEvents)
	}
	if len(rep.SplitFacts) > 0 {
		fail("%d changes delivered under more than one webhook-id, e.g. %s", len(rep.SplitFacts), firstFew(rep.SplitFacts))
	}
	if len(rep.UnknownIDs) > 0 {
		fail("%d requests with a webhook-id the database does not have", len(rep.UnknownIDs))
	}
	if rep.BadSignatures > 0 {
		fail("%d requests did not verify", rep.BadSignatures)
	}
	if len(rep.Crashed) > 0 {
		fail("processes crashed: %v", rep.Crashed)
	}
	if rep.Events == 0 || rep.Applications == 0 || rep.StatusChanges == 0 || rep.JobsClosed == 0 || rep.Withdrawals == 0 {
		fail("the load made too little to judge: %d events, %d applications, %d changes, %d withdrawals, %d jobs closed",
			rep.Events, rep.Applications, rep.StatusChanges, rep.Withdrawals, rep.JobsClosed)
	}
	total := 0
	for _, n := range rep.Faults {
		total += n
	}
	if total == 0 || rep.Retries == 0 {
		fail("no fault hit the deliveries (%d faults, %d retries)", total, rep.Retries)
	}
}

// Percentiles summarise a set of durations.
type Percentiles struct {
	N             int
	P50, P99, Max time.Duration
}

func (p Percentiles) String() string {
	return fmt.Sprintf("p50 %v, p99 %v, max %v (%d deliveries)",
		p.P50.Round(time.Millisecond), p.P99.Round(time.Millisecond), p.Max.Round(time.Millisecond), p.N)
}

// percentilesOf takes the nearest-rank percentiles of ds (which it sorts).
func percentilesOf(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	slices.Sort(ds)
	rank := func(q int) time.Duration { return ds[max((len(ds)*q+99)/100, 1)-1] }
	return Percentiles{N: len(ds), P50: rank(50), P99: rank(99), Max: ds[len(ds)-1]}
}
