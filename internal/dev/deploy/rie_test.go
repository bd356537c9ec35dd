package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jobboard/jobboard/internal/dev/devstack"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/dev/syncio"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// The Lambda Runtime Interface Emulator: the program that `sam local invoke`
// runs inside its container, here run directly. Build it with `make rie`
// (the Makefile pins the same version); the test looks for it at
// $AWS_LAMBDA_RIE, then where the Makefile puts it, then on PATH.
const rieVersion = "v0.0.0-20261030222936-bef5c4ba774d"

func rieBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("AWS_LAMBDA_RIE"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	p := filepath.Join(cache, "jobboard-tools", "aws-lambda-rie-"+rieVersion)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if p, err := exec.LookPath("aws-lambda-rie"); err == nil {
		return p
	}
	t.Fatalf("aws-lambda-rie not found (not at $AWS_LAMBDA_RIE, %s, nor on PATH): run `make rie`", p)
	return ""
}

// buildBootstraps returns the bootstrap of every function of the template
// (or of those named) by logical id, compiled for this machine with the
// flags of the Makefile's Lambda builds but for the host's GOOS and GOARCH.
// They are compiled once per test process, into bootstrapDir: the
// emulator tests and every rehearsal run the same binaries, and a build of
// their own would link them again.
func buildBootstraps(t testing.TB, tpl *samTemplate, only ...string) map[string]string {
	t.Helper()
	dirs := functionDirs(t, tpl)
	b := &sharedBootstraps
	b.once.Do(func() { b.err = compileBootstraps(dirs) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	bins := map[string]string{}
	for name, dir := range dirs {
		if len(only) == 0 || slices.Contains(only, name) {
			bins[name] = filepath.Join(bootstrapDir, dir)
		}
	}
	return bins
}

// bootstrapDir holds the bootstraps of this test process; TestMain makes
// it and removes it.
var bootstrapDir string

var sharedBootstraps struct {
	once sync.Once
	err  error
}

func compileBootstraps(dirs map[string]string) error {
	args := []string{"build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bootstrapDir + string(filepath.Separator)}
	for _, dir := range dirs {
		args = append(args, "./functions/"+dir)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// waitingParallel is how many tests of this package run at once unless
// -parallel says otherwise: they spend most of their time waiting on other
// processes (python, the emulator, make, PostgreSQL), so GOMAXPROCS of them
// at a time leaves the machine idle.
const waitingParallel = 6

func TestMain(m *testing.M) {
	flag.Parse()
	if !flagSet("test.parallel") {
		if err := flag.Set("test.parallel", strconv.Itoa(max(waitingParallel, runtime.GOMAXPROCS(0)))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	dir, err := os.MkdirTemp("", "jobboard-deploy-bootstraps-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bootstrapDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// flagSet reports whether the command line set the flag name.
func flagSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// emulator is one aws-lambda-rie process running one function. It takes
// one invocation at a time: concurrent invocations crash it.
type emulator struct {
	t        testing.TB
	name     string
	invokeAt string
	cmd      *exec.Cmd
	output   *syncio.Buffer
	exited   chan struct{}
}

// startEmulator starts rie with bootstrap and env (and nothing else of this
// process's environment but PATH and HOME), on its own ports, and returns
// once it listens. It is stopped when t ends; its output is logged if t
// failed.
//
// A port found free may be taken by another process before rie binds it
// (the machine runs many tests at once, and every outgoing connection
// takes an ephemeral port too): rie then exits with "address already in
// use", and it is started again on other ports, up to 5 times.
func startEmulator(t testing.TB, rie, name, bootstrap string, env map[string]string) *emulator {
	t.Helper()
	for attempt := 1; ; attempt++ {
		e := launchEmulator(t, rie, name, bootstrap, env)
		err := e.waitListening(60 * time.Second)
		if err == nil {
			return e
		}
		if !strings.Contains(e.output.String(), "address already in use") || attempt == 5 {
			t.Fatalf("%s: %v:\n%s", name, err, e.output.String())
		}
	}
}

// launchEmulator starts rie on two free ports.
func launchEmulator(t testing.TB, rie, name, bootstrap string, env map[string]string) *emulator {
	t.Helper()
	// Two different ports: an emulator told to serve its two APIs on one
	// port fails to start.
	addrs, err := devstack.FreeAddrs(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	e := &emulator{t: t, name: name, invokeAt: addrs[0], output: &syncio.Buffer{}, exited: make(chan struct{})}
	e.cmd = exec.Command(rie,
		"--runtime-interface-emulator-address", e.invokeAt,
		"--runtime-api-address", addrs[1],
		bootstrap)
	e.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "AWS_LAMBDA_FUNCTION_NAME=" + name}
	for k, v := range env {
		e.cmd.Env = append(e.cmd.Env, k+"="+v)
	}
	e.cmd.Stdout = e.output
	e.cmd.Stderr = e.output
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", rie, err)
	}
	go func() { _ = e.cmd.Wait(); close(e.exited) }()
	t.Cleanup(func() {
		_ = e.cmd.Process.Kill()
		<-e.exited
		if t.Failed() {
			t.Logf("%s emulator output:\n%s", name, e.output.String())
		}
	})
	return e
}

// waitListening polls until the emulator listens at its invoke address,
// it exits, or timeout passes.
func (e *emulator) waitListening(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	retry := time.NewTicker(5 * time.Millisecond)
	defer retry.Stop()
	for {
		if conn, err := new(net.Dialer).DialContext(ctx, "tcp", e.invokeAt); err == nil {
			_ = conn.Close()
			// What answered may be another process that took the port.
			if mine, known := listensAt(e.cmd.Process.Pid, e.invokeAt); mine || !known {
				return nil
			}
		}
		select {
		case <-e.exited:
			return errors.New("the emulator exited before it listened")
		case <-ctx.Done():
			return fmt.Errorf("the emulator does not listen at %s: %w", e.invokeAt, ctx.Err())
		case <-retry.C:
		}
	}
}

// listensAt reports whether process pid holds the listening TCP socket at
// addr (127.0.0.1:port), from Linux's /proc; known is false where there is
// no /proc to read.
func listensAt(pid int, addr string) (mine, known bool) {
	table, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return false, false
	}
	_, port, _ := net.SplitHostPort(addr)
	p, _ := strconv.Atoi(port)
	local := fmt.Sprintf("0100007F:%04X", p) // 127.0.0.1, as the kernel writes it
	var inode string
	for _, line := range strings.Split(string(table), "\n") {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == local && f[3] == "0A" { // 0A: LISTEN
			inode = f[9]
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil || inode == "" {
		return false, err == nil
	}
	for _, fd := range fds {
		if link, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); link == "socket:["+inode+"]" {
			return true, true
		}
	}
	return false, true
}

// invoke sends payload to the function and returns its result; a function
// error ({"errorMessage": ...}) fails t.
func (e *emulator) invoke(payload []byte) []byte {
	e.t.Helper()
	status, body := e.call(payload)
	if status != http.StatusOK {
		e.t.Fatalf("%s: invoke: status %d: %s", e.name, status, body)
	}
	var fnErr struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if json.Unmarshal(body, &fnErr) == nil && fnErr.ErrorMessage != "" {
		e.t.Fatalf("%s: function error %s: %s", e.name, fnErr.ErrorType, fnErr.ErrorMessage)
	}
	return body
}

// call sends payload to the function and returns the emulator's answer,
// a function error included (502 when the function failed to start).
// Until the emulator listens, connection errors are retried (polling,
// bounded by a deadline).
func (e *emulator) call(payload []byte) (status int, body []byte) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := "http://" + e.invokeAt + "/2015-03-31/functions/function/invocations"
	retry := time.NewTicker(5 * time.Millisecond)
	defer retry.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
		if err != nil {
			e.t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, readErr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if readErr != nil {
				e.t.Fatalf("%s: invoke: status %d, %v: %s", e.name, resp.StatusCode, readErr, body)
			}
			return resp.StatusCode, body
		}
		var opErr *net.OpError
		if !errors.As(err, &opErr) || opErr.Op != "dial" {
			e.t.Fatalf("%s: invoke: %v", e.name, err)
		}
		select {
		case <-e.exited:
			e.t.Fatalf("%s: emulator exited before answering:\n%s", e.name, e.output.String())
		case <-ctx.Done():
			e.t.Fatalf("%s: emulator did not answer: %v", e.name, ctx.Err())
		case <-retry.C:
		}
	}
}

// readEvent reads events/NAME with its placeholders replaced: the bearer
// tokens given, and {{occurred_at}} (the SQS samples' event time) with now,
// since the worker refuses events older than the claim retention.
func readEvent(t testing.TB, name string, tokens map[string]string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(eventsDir, name))
	if err != nil {
		t.Fatal(err)
	}
	data = bytes.ReplaceAll(data, []byte("{{occurred_at}}"), []byte(time.Now().UTC().Format(time.RFC3339)))
	for k, v := range tokens {
		data = bytes.ReplaceAll(data, []byte("{{"+k+"}}"), []byte(v))
	}
	if bytes.Contains(data, []byte("{{")) {
		t.Fatalf("%s has a placeholder this test does not fill", name)
	}
	return data
}

// apiRequest is an HTTP API (payload v2) event for method path with body,
// modelled on the api-list-jobs.json sample.
func apiRequest(t *testing.T, method, path, token string, body any) []byte {
	t.Helper()
	var ev events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(readEvent(t, "api-list-jobs.json", nil), &ev); err != nil {
		t.Fatal(err)
	}
	ev.RawPath, ev.RequestContext.HTTP.Path, ev.RequestContext.HTTP.Method = path, path, method
	ev.RawQueryString = ""
	ev.RequestContext.RequestID = fmt.Sprintf("rie-%d", time.Now().UnixNano())
	if token != "" {
		ev.Headers["authorization"] = "Bearer " + token
	}
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		ev.Body = string(b)
		ev.Headers["content-type"] = "application/json"
	}
	out, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// apiCall invokes the API function and checks the status code.
func apiCall(t *testing.T, api *emulator, payload []byte, wantStatus int) events.APIGatewayV2HTTPResponse {
	t.Helper()
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(api.invoke(payload), &resp); err != nil {
		t.Fatalf("api: not an HTTP API response: %v", err)
	}
	if resp.StatusCode != wantStatus {
		t.Fatalf("api: status %d, want %d: %s", resp.StatusCode, wantStatus, resp.Body)
	}
	return resp
}

// localEnv is what every function gets here: the local forms of what
// template.yaml sets (DATABASE_URL and JWT_SECRET instead of the secrets'
// ARNs) and the stand-ins' endpoints.
func localEnv(t testing.TB, candidateDomain string) (map[string]string, localaws.TestQueue) {
	t.Helper()
	q := localaws.NewTestQueue(t, 200, 5)
	return map[string]string{
		"DATABASE_URL":                pgtest.NewURL(t),
		"JWT_SECRET":                  strings.Repeat("j", 64),
		"MAIL_FROM":                   "jobboard <jobs@" + candidateDomain + ">",
		"VERIFY_EMAIL_URL":            "https://app.example/verify-email",
		"ACCOUNT_RECOVERY_URL":        "https://app.example/reset-password",
		"STATUS_EVENTS_QUEUE_URL":     q.URL,
		"WEBHOOK_EVENTS_QUEUE_URL":    localaws.NewTestQueue(t, 200, 30).URL,
		"WEBHOOK_SEALING_KEY":         strings.Repeat("w", 64),
		"RETENTION_DAYS":              "30",
		"LOG_LEVEL":                   "INFO",
		"AWS_ENDPOINT_URL_SQS":        localaws.SQS(t).Endpoint,
		"AWS_ENDPOINT_URL_SESV2":      localaws.SES(t).Endpoint,
		"AWS_ACCESS_KEY_ID":           "test",
		"AWS_SECRET_ACCESS_KEY":       "test",
		"AWS_REGION":                  localaws.Region,
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "30",
		// As Lambda sets it behind the alias: the metric lines carry it.
		"AWS_LAMBDA_FUNCTION_VERSION": "7",
	}, q
}

// Every function's bootstrap, built once for this machine, under the
// emulator with the sample events. (Cold starts are measured by
// BenchmarkColdStart, in coldstart_test.go.)
func TestFunctionsUnderTheLambdaEmulator(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	rie := rieBinary(t)
	bins := buildBootstraps(t, tpl)
	t.Run("sample events", func(t *testing.T) { testSampleEvents(t, rie, bins) })
	t.Run("deploy hook", func(t *testing.T) { testDeployHook(t, rie, bins) })
	t.Run("schema migration", func(t *testing.T) { testSchemaMigration(t, rie, bins) })
}

// testSampleEvents: each sample event of events/ gets the right answer: the
// API samples their status codes, the SQS samples the expected batch item
// failures and emails, the sweeper a report.
func testSampleEvents(t *testing.T, rie string, bins map[string]string) {
	domain := fmt.Sprintf("rie%d.example.com", time.Now().UnixNano())
	env, queue := localEnv(t, domain)
	ses := localaws.SES(t).Endpoint

	// The API samples name fixed ids: in a fresh database the employer is
	// user 1, the candidate user 2, and company, job and application are 1
	// (see functions/api's TestSampleEvents).
	api := startEmulator(t, rie, "ApiFunction", bins["ApiFunction"], env)
	candidateEmail := "candidate@" + domain
	type session struct {
		User  jobboard.User `json:"user"`
		Token string        `json:"token"`
	}
	var employer, candidate session
	for _, reg := range []struct {
		s     *session
		email string
		role  string
	}{{&employer, "employer@" + domain, "employer"}, {&candidate, candidateEmail, "candidate"}} {
		resp := apiCall(t, api, apiRequest(t, "POST", "/v1/auth/register", "", map[string]any{
			"email": reg.email, "password": "correct horse battery", "name": reg.role, "role": reg.role,
		}), http.StatusCreated)
		if err := json.Unmarshal([]byte(resp.Body), reg.s); err != nil || reg.s.Token == "" {
			t.Fatalf("register %s: %s (%v)", reg.role, resp.Body, err)
		}
	}
	apiCall(t, api, apiRequest(t, "POST", "/v1/companies", employer.Token, map[string]any{"name": "Acme"}), http.StatusCreated)
	apiCall(t, api, apiRequest(t, "POST", "/v1/companies/1/jobs", employer.Token, map[string]any{
		"title": "Go Engineer", "description": "Build services in Go.", "remote": true, "employment_type": "full_time",
	}), http.StatusCreated)
	if employer.User.ID != 1 || candidate.User.ID != 2 {
		t.Fatalf("user ids %d, %d; the samples assume 1 and 2", employer.User.ID, candidate.User.ID)
	}
	// Each registration queued a verification email: the worker sends
	// them, and the candidate follows the link (status emails go only to
	// verified addresses).
	worker := startEmulator(t, rie, "WorkerFunction", bins["WorkerFunction"], env)
	verifications := receiveAsLambdaEvent(t, queue)
	if len(verifications.Records) != 2 {
		t.Fatalf("queue holds %d messages after two registrations; want 2", len(verifications.Records))
	}
	payload, err := json.Marshal(verifications)
	if err != nil {
		t.Fatal(err)
	}
	var vout events.SQSEventResponse
	if err := json.Unmarshal(worker.invoke(payload), &vout); err != nil || len(vout.BatchItemFailures) != 0 {
		t.Fatalf("verification events: batchItemFailures %v (%v); want none", vout.BatchItemFailures, err)
	}
	for _, r := range verifications.Records {
		if _, err := queue.Client.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{
			QueueUrl: &queue.URL, ReceiptHandle: aws.String(r.ReceiptHandle)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := localaws.EmailsTo(context.Background(), ses, candidateEmail)
	if err != nil || len(got) != 1 {
		t.Fatalf("verification emails to the candidate: %d (%v); want 1", len(got), err)
	}
	token := verificationTokenPattern.FindStringSubmatch(got[0].Body.Text)
	if token == nil {
		t.Fatalf("no verification link in:\n%s", got[0].Body.Text)
	}
	apiCall(t, api, apiRequest(t, "POST", "/v1/auth/verify-email", "", map[string]any{"token": token[1]}), http.StatusOK)

	tokens := map[string]string{"employer_token": employer.Token, "candidate_token": candidate.Token}
	for _, s := range []struct {
		file   string
		status int
	}{
		{"api-list-jobs.json", http.StatusOK},
		{"api-apply.json", http.StatusCreated},
		{"api-change-status.json", http.StatusOK},
	} {
		resp := apiCall(t, api, readEvent(t, s.file, tokens), s.status)
		t.Logf("%s → %d", s.file, resp.StatusCode)
	}

	// The SQS samples are about application 1, which now exists; all of
	// them carry one event, which is emailed once.
	emails := 1
	for _, s := range []struct {
		file      string
		newEmails int
	}{
		{"sqs-status-event.json", 1},
		{"sqs-duplicate-event.json", 0}, // the same event, delivered twice more
		{"sqs-malformed.json", 0},       // the same event, and a malformed record
	} {
		data := readEvent(t, s.file, nil)
		var in events.SQSEvent
		if err := json.Unmarshal(data, &in); err != nil {
			t.Fatal(err)
		}
		var wantFailed []string
		for _, r := range in.Records {
			if _, ok := statusEvent(r.Body); !ok {
				wantFailed = append(wantFailed, r.MessageId)
			}
		}
		var out events.SQSEventResponse
		body := worker.invoke(data)
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%s: response %s is not an SQSEventResponse: %v", s.file, body, err)
		}
		var failed []string
		for _, f := range out.BatchItemFailures {
			failed = append(failed, f.ItemIdentifier)
		}
		sort.Strings(failed)
		sort.Strings(wantFailed)
		if !slices.Equal(failed, wantFailed) {
			t.Errorf("%s: batchItemFailures %v; want %v", s.file, failed, wantFailed)
		}
		got, err := localaws.EmailsTo(context.Background(), ses, candidateEmail)
		if err != nil {
			t.Fatal(err)
		}
		emails += s.newEmails
		if len(got) != emails {
			t.Errorf("after %s: %d emails to the candidate; want %d", s.file, len(got), emails)
		}
	}

	// The status change above went to SQS through the API's relay; that
	// message, as the event source mapping would deliver it, gets its email.
	relayed := receiveAsLambdaEvent(t, queue)
	if len(relayed.Records) != 1 {
		t.Fatalf("queue holds %d messages after the status change; want 1", len(relayed.Records))
	}
	ev, ok := statusEvent(relayed.Records[0].Body)
	if !ok || ev.ApplicationID != 1 || ev.OldStatus != jobboard.StatusSubmitted || ev.NewStatus != jobboard.StatusReviewing {
		t.Fatalf("relayed event %s; want application 1 submitted → reviewing", relayed.Records[0].Body)
	}
	// The SQS stand-in's checksum of the attributes agrees with the one the
	// sample events are checked with.
	if r := relayed.Records[0]; r.Md5OfMessageAttributes != sqsAttributesMD5(r.MessageAttributes) {
		t.Errorf("SQS says md5OfMessageAttributes %s; sqsAttributesMD5 computes %s", r.Md5OfMessageAttributes, sqsAttributesMD5(r.MessageAttributes))
	}
	payload, err = json.Marshal(relayed)
	if err != nil {
		t.Fatal(err)
	}
	var out events.SQSEventResponse
	if err := json.Unmarshal(worker.invoke(payload), &out); err != nil || len(out.BatchItemFailures) != 0 {
		t.Errorf("relayed event: batchItemFailures %v (%v); want none", out.BatchItemFailures, err)
	}
	got, err = localaws.EmailsTo(context.Background(), ses, candidateEmail)
	if err != nil {
		t.Fatal(err)
	}
	if emails++; len(got) != emails {
		t.Errorf("after the relayed event: %d emails to the candidate; want %d", len(got), emails)
	}

	sweeper := startEmulator(t, rie, "SweeperFunction", bins["SweeperFunction"], env)
	body := sweeper.invoke(readEvent(t, "sweeper-schedule.json", nil))
	var report map[string]any
	if err := json.Unmarshal(body, &report); err != nil || report == nil || report["failed"] != 0.0 {
		t.Errorf("sweeper: response %s (%v); want a report without failures", body, err)
	}
	t.Logf("sweeper report: %s", body)

	// The feedback sample: one hard bounce, delivered twice. The address is
	// suppressed once, and neither record fails.
	feedback := startEmulator(t, rie, "FeedbackFunction", bins["FeedbackFunction"], env)
	body = feedback.invoke(readEvent(t, "sqs-ses-feedback.json", nil))
	var answer events.SQSEventResponse
	if err := json.Unmarshal(body, &answer); err != nil || len(answer.BatchItemFailures) != 0 {
		t.Errorf("feedback: response %s (%v); want no failed records", body, err)
	}
	db := pgtest.Pool(t, env["DATABASE_URL"])
	var reason string
	var applied int
	if err := db.QueryRow(context.Background(), `SELECT s.reason, (SELECT count(*) FROM email_feedback_events)
		FROM email_suppressions s WHERE s.email = 'bounced@example.org'`).Scan(&reason, &applied); err != nil || reason != "bounce" || applied != 1 {
		t.Errorf("after the feedback sample: suppression %q, %d events applied (%v); want bounce, 1", reason, applied, err)
	}
	if ms := emfLines(t, feedback.output.String()); len(ms) != 1 || ms[0]["Service"] != "feedback" ||
		ms[0]["FeedbackApplied"] != 1.0 || ms[0]["FeedbackDuplicates"] != 1.0 || ms[0]["AddressesSuppressed"] != 1.0 {
		t.Errorf("feedback metric lines %v; want one: 1 applied, 1 duplicate, 1 address suppressed", ms)
	}

	// Every metric a rollback alarm reads by version is written by version.
	checkVersionedMetrics(t, "api", "7", emfLines(t, api.output.String()))
	checkVersionedMetrics(t, "worker", "7", emfLines(t, worker.output.String()))
}

// verificationTokenPattern finds the token of the verification link in an
// email's text.
var verificationTokenPattern = regexp.MustCompile(`https://app\.example/verify-email\?token=([A-Za-z0-9_-]+)`)

// receiveAsLambdaEvent receives what q holds and shapes it as Lambda's SQS
// event source delivers it.
func receiveAsLambdaEvent(t *testing.T, q localaws.TestQueue) events.SQSEvent {
	t.Helper()
	ctx := context.Background()
	arn, err := localaws.QueueARN(ctx, q.Client, q.URL)
	if err != nil {
		t.Fatal(err)
	}
	out, err := q.Client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    &q.URL,
		MaxNumberOfMessages:         10,
		WaitTimeSeconds:             2,
		MessageAttributeNames:       []string{"All"},
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
	})
	if err != nil {
		t.Fatalf("receive: %v", err)
	}
	var e events.SQSEvent
	for _, m := range out.Messages {
		attrs := map[string]events.SQSMessageAttribute{}
		for k, v := range m.MessageAttributes {
			attrs[k] = events.SQSMessageAttribute{StringValue: v.StringValue, BinaryValue: v.BinaryValue, DataType: aws.ToString(v.DataType)}
		}
		e.Records = append(e.Records, events.SQSMessage{
			MessageId:              aws.ToString(m.MessageId),
			ReceiptHandle:          aws.ToString(m.ReceiptHandle),
			Body:                   aws.ToString(m.Body),
			Md5OfBody:              aws.ToString(m.MD5OfBody),
			Md5OfMessageAttributes: aws.ToString(m.MD5OfMessageAttributes),
			Attributes:             m.Attributes,
			MessageAttributes:      attrs,
			EventSourceARN:         arn,
			EventSource:            "aws:sqs",
			AWSRegion:              localaws.Region,
		})
	}
	return e
}
