package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/dev/apiclient"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

const repoRoot = "../../.."

// buildFunctions returns the folder of the functions' binaries, built as
// `make dev` builds them (the same flags, so the same build cache) once per
// test process: every stack of these tests runs the same binaries, and each
// build of its own would link all five again.
func buildFunctions(t *testing.T) string {
	t.Helper()
	bin, err := sharedBuild()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// sharedBin is the folder of the shared build, removed by TestMain.
var sharedBin string

var sharedBuild = sync.OnceValues(func() (string, error) {
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", sharedBin+"/", "./functions/api", "./functions/worker", "./functions/sweeper", "./functions/webhook", "./functions/feedback")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build functions: %w\n%s", err, out)
	}
	return sharedBin, nil
})

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "devstack-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedBin = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testConfig is a stack on free ports over the database at dbURL, with its
// state file in a temporary folder.
func testConfig(t *testing.T, bin, dbURL string) Config {
	t.Helper()
	// As the server's administrator, as `make dev` runs: the webhook
	// delivery function sets the role jobboard_webhooks for its sessions,
	// which pgtestdb's test user may not.
	dbURL = pgtest.AdminURL(t, dbURL)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	queue, err := QueueFromTemplate(filepath.Join(repoRoot, "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return Config{
		ServerURL:     dbURL,
		Database:      strings.TrimPrefix(u.Path, "/"),
		BinDir:        bin,
		Queue:         queue,
		SweepInterval: time.Second,
		Out:           &testWriter{t: t},
		StateFile:     filepath.Join(t.TempDir(), "stack.json"),
	}
}

// startStack runs the stack until the test ends (or stop is called) and
// returns it once it is ready.
func startStack(t *testing.T, cfg Config) (st Stack, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan Stack, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, func(st Stack) { ready <- st }) }()
	select {
	case st = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(3 * time.Minute):
		cancel()
		t.Fatal("stack not ready after 3 minutes")
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("Run did not stop within a minute of cancel")
		}
	}
	t.Cleanup(stop)
	return st, stop
}

// makeTarget runs `make -s target vars...` at the repository root and
// returns its stdout and stderr.
func makeTarget(t *testing.T, target string, vars ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-s", "--no-print-directory", "-C", repoRoot, target}, vars...)...)
	env := []string{}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); name != "MAKEFLAGS" && name != "MFLAGS" && name != "MAKELEVEL" {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// The local loop, end to end against one stack on free ports: `make
// invoke` with every sample event in events/, top to bottom and then again,
// gets the answers docs/development.md promises for a first and a second
// run (the API samples with the demo accounts' tokens, on the ids the demo
// gives a fresh database), under the template's memory size; `make poison`
// sees a malformed message reach the DLQ within a minute; and a second
// start over the same database prints the data as it now is.
func TestLocalLoop(t *testing.T) {
	bin := buildFunctions(t)
	dbURL := pgtest.NewURL(t)
	cfg := testConfig(t, bin, dbURL)
	st, stop := startStack(t, cfg)

	d := st.Demo
	if d.CompanyID != 1 || d.JobID != 2 || d.ApplicationID != 1 || d.Status != "submitted" || d.Version != 1 || d.Applications != 1 {
		t.Fatalf("demo on a fresh database: %+v; the samples in events/ need company 1, the application 1 (submitted, version 1) on job 2, job 1 open", d)
	}
	var banner bytes.Buffer
	PrintBanner(&banner, st)
	for _, want := range []string{"application 1, now submitted (version 1)", `-H 'If-Match: "1"' -d '{"status":"reviewing"}'`,
		"make invoke DEV_STATE=" + cfg.StateFile, fmt.Sprintf("PID %d", os.Getpid())} {
		if !strings.Contains(banner.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, banner.String())
		}
	}

	invokeDir := t.TempDir()
	vars := []string{"DEV_STATE=" + cfg.StateFile, "INVOKE_DIR=" + invokeDir}
	invoke := func(t *testing.T, function, event string) (answer []byte, log string) {
		t.Helper()
		stdout, stderr, err := makeTarget(t, "invoke", append(vars, "FUNCTION="+function, "EVENT=events/"+event)...)
		if err != nil {
			t.Fatalf("make invoke %s %s: %v\n%s\n%s", function, event, err, stdout, stderr)
		}
		fs, err := FunctionFromTemplate(filepath.Join(repoRoot, "template.yaml"), function)
		if err != nil {
			t.Fatal(err)
		}
		if want := "Memory Size: " + strconv.Itoa(fs.MemorySize) + " MB"; !strings.Contains(stderr, want) {
			t.Errorf("the emulator's report does not say %q (the template's):\n%s", want, stderr)
		}
		return []byte(strings.TrimSpace(stdout)), stderr
	}

	// Every good record of the SQS samples carries the one event of
	// application 1's move to reviewing: the first delivery sends it,
	// every later one is a duplicate.
	eventSent := false
	for run, apiStatus := range []map[string]int{
		{"api-list-jobs.json": http.StatusOK, "api-apply.json": http.StatusCreated, "api-change-status.json": http.StatusOK},
		{"api-list-jobs.json": http.StatusOK, "api-apply.json": http.StatusConflict, "api-change-status.json": http.StatusPreconditionFailed},
	} {
		t.Run(fmt.Sprintf("run %d", run+1), func(t *testing.T) {
			for _, event := range []string{"api-list-jobs.json", "api-apply.json", "api-change-status.json"} {
				var resp events.APIGatewayV2HTTPResponse
				answer, _ := invoke(t, "ApiFunction", event)
				if err := json.Unmarshal(answer, &resp); err != nil || resp.StatusCode != apiStatus[event] {
					t.Errorf("%s: answer %s (%v); want status %d", event, answer, err, apiStatus[event])
				}
			}
			for _, event := range []string{"sqs-status-event.json", "sqs-duplicate-event.json", "sqs-malformed.json"} {
				in := readSQSSample(t, event)
				want := map[string]string{} // message id → outcome
				var wantFailed []string
				for _, r := range in.Records {
					switch {
					case sampleEventID(r.Body) == "":
						want[r.MessageId] = "malformed"
						wantFailed = append(wantFailed, r.MessageId)
					case !eventSent:
						want[r.MessageId], eventSent = "sent", true
					default:
						want[r.MessageId] = "duplicate"
					}
				}
				answer, log := invoke(t, "WorkerFunction", event)
				var out events.SQSEventResponse
				if err := json.Unmarshal(answer, &out); err != nil {
					t.Fatalf("%s: answer %s is not a batch response: %v", event, answer, err)
				}
				var failed []string
				for _, f := range out.BatchItemFailures {
					failed = append(failed, f.ItemIdentifier)
				}
				sort.Strings(failed)
				sort.Strings(wantFailed)
				if !slices.Equal(failed, wantFailed) {
					t.Errorf("%s: batchItemFailures %v; want %v", event, failed, wantFailed)
				}
				if got := recordOutcomes(log); !maps.Equal(got, want) {
					t.Errorf("%s: outcomes by message %v; want %v\n%s", event, got, want, log)
				}
				// A failed record's WARN is explained where it appears.
				if len(wantFailed) > 0 && (!strings.Contains(log, "ReceiptHandleIsInvalid") || !strings.Contains(log, "never handed out by the local queue")) {
					t.Errorf("%s: the log does not show and explain the refused ChangeMessageVisibility:\n%s", event, log)
				}
			}
			// The samples' event emailed the demo candidate once, in all.
			emails, err := localaws.EmailsTo(context.Background(), st.SESEndpoint, d.CandidateEmail)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, e := range emails {
				if e.Header(mail.EventIDHeader) == sampleEventID(readSQSSample(t, "sqs-status-event.json").Records[0].Body) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("%d emails for the samples' event; want 1", n)
			}
			var report map[string]any
			answer, _ := invoke(t, "SweeperFunction", "sweeper-schedule.json")
			if err := json.Unmarshal(answer, &report); err != nil || report["failed"] != 0.0 {
				t.Errorf("sweeper answer %s (%v); want a report without failures", answer, err)
			}
			// A hard bounce delivered twice: no record fails, on either run.
			var feedback events.SQSEventResponse
			answer, _ = invoke(t, "FeedbackFunction", "sqs-ses-feedback.json")
			if err := json.Unmarshal(answer, &feedback); err != nil || len(feedback.BatchItemFailures) != 0 {
				t.Errorf("feedback answer %s (%v); want no failed records", answer, err)
			}
		})
	}

	// The feedback loop of `make dev`: the verification email to the
	// mailbox simulator's bounce address bounces, the feedback function
	// suppresses the address, and GET /v1/me says so.
	t.Run("a bounce reaches GET /v1/me", func(t *testing.T) {
		ctx := context.Background()
		c := &apiclient.Client{BaseURL: st.APIURL}
		var reg struct {
			Token string `json:"token"`
		}
		email := fmt.Sprintf("bounce+%d@%s", time.Now().UnixNano(), localaws.SimulatorDomain)
		if err := c.Do(ctx, "POST", "/v1/auth/register", "", map[string]any{"email": email, "password": "correct horse battery",
			"name": "Bo Unce", "role": "candidate"}, http.StatusCreated, &reg); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			var me struct {
				EmailDelivery struct {
					Deliverable bool   `json:"deliverable"`
					Reason      string `json:"reason"`
				} `json:"email_delivery"`
			}
			if err := c.Do(ctx, "GET", "/v1/me", reg.Token, nil, http.StatusOK, &me); err != nil {
				t.Fatal(err)
			}
			// The account never verified its address (the verification email
			// bounced), so it learns that mail does not reach it, not why
			// (docs/api.md, "Undeliverable addresses").
			if !me.EmailDelivery.Deliverable {
				if me.EmailDelivery.Reason != "" {
					t.Fatalf("an unverified account sees the suppression's reason %q", me.EmailDelivery.Reason)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a minute after registering %s: email_delivery %+v; want the bounce to make it undeliverable", email, me.EmailDelivery)
			}
			<-tick.C
		}
	})

	t.Run("poison reaches the DLQ", func(t *testing.T) {
		start := time.Now()
		stdout, stderr, err := makeTarget(t, "poison", vars...)
		if err != nil {
			t.Fatalf("make poison: %v\n%s\n%s", err, stdout, stderr)
		}
		if !strings.Contains(stdout, "in the dead-letter queue") {
			t.Fatalf("make poison says:\n%s", stdout)
		}
		t.Logf("make poison (build included) took %v:\n%s", time.Since(start).Round(100*time.Millisecond), stdout)

		// The documented bound, measured from the send.
		state, err := ReadState(context.Background(), cfg.StateFile)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Poison(context.Background(), state, time.Minute, &testWriter{t: t})
		if err != nil {
			t.Fatalf("a malformed message did not reach the DLQ within a minute: %v", err)
		}
		t.Logf("in the DLQ %.1f s after it was sent", r.Elapsed.Seconds())
	})

	stop()
	t.Run("without a stack", func(t *testing.T) {
		stdout, stderr, err := makeTarget(t, "invoke", append(vars, "FUNCTION=SweeperFunction", "EVENT=events/sweeper-schedule.json")...)
		if err == nil || !strings.Contains(stderr, "start `make dev` first") {
			t.Errorf("make invoke with the stack stopped: %v\n%s\n%s; want it to say to start make dev first", err, stdout, stderr)
		}
	})

	t.Run("second start shows the data as it is", func(t *testing.T) {
		again, _ := startStack(t, testConfig(t, bin, dbURL))
		d := again.Demo
		if d.ApplicationID != 1 || d.JobID != 2 || d.Status != "reviewing" || d.Version != 2 || d.Applications != 2 {
			t.Errorf("demo on the second start: %+v; want application 1 on job 2, now reviewing at version 2, of 2", d)
		}
		var banner bytes.Buffer
		PrintBanner(&banner, again)
		for _, want := range []string{"application 1, now reviewing (version 2)", "the candidate has 2 applications", `-H 'If-Match: "2"' -d '{"status":"interview"}'`} {
			if !strings.Contains(banner.String(), want) {
				t.Errorf("banner on the second start lacks %q:\n%s", want, banner.String())
			}
		}
	})
}

// readSQSSample reads events/NAME as an SQS event.
func readSQSSample(t *testing.T, name string) events.SQSEvent {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "events", name))
	if err != nil {
		t.Fatal(err)
	}
	var in events.SQSEvent
	if err := json.Unmarshal(raw, &in); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return in
}

// sampleEventID is the event_id of a sample record's body, "" if it has none.
func sampleEventID(body string) string {
	var ev struct {
		EventID string `json:"event_id"`
	}
	_ = json.Unmarshal([]byte(body), &ev)
	return ev.EventID
}

// recordOutcomes reads the worker's JSON log lines in a function's output:
// the outcome of each record, by message id.
func recordOutcomes(log string) map[string]string {
	got := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			MessageID string `json:"message_id"`
			Outcome   string `json:"outcome"`
		}
		if i := strings.IndexByte(line, '{'); i >= 0 && json.Unmarshal([]byte(line[i:]), &l) == nil && l.MessageID != "" && l.Outcome != "" {
			got[l.MessageID] = l.Outcome
		}
	}
	return got
}
