package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/localaws"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

const repoRoot = "../.."

// buildFunctions builds the three functions as `make dev` does (the same
// flags, so the same build cache) into a temporary folder.
func buildFunctions(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", bin+"/", "./functions/api", "./functions/worker", "./functions/sweeper", "./functions/webhook")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build functions: %v\n%s", err, out)
	}
	return bin
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
// invoke` with every sample event in events/ gets the answer the sample is
// about (the API samples with the demo accounts' tokens, on the ids the
// demo gives a fresh database), under the template's memory size; `make
// poison` sees a malformed message reach the DLQ within a minute; and a
// second start over the same database prints the data as it now is.
func TestLocalLoop(t *testing.T) {
	bin := buildFunctions(t)
	dbURL := pgtest.NewURL(t)
	cfg := testConfig(t, bin, dbURL)
	st, stop := startStack(t, cfg)

	d := st.Demo
	if d.CompanyID != 1 || d.JobID != 2 || d.ApplicationID != 1 || d.Status != "submitted" || d.Applications != 1 {
		t.Fatalf("demo on a fresh database: %+v; the samples in events/ need company 1, the application 1 (submitted) on job 2, job 1 open", d)
	}
	var banner bytes.Buffer
	PrintBanner(&banner, st)
	for _, want := range []string{"application 1, now submitted", `{"status":"reviewing"}`, "make invoke DEV_STATE=" + cfg.StateFile} {
		if !strings.Contains(banner.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, banner.String())
		}
	}

	invokeDir := t.TempDir()
	vars := []string{"DEV_STATE=" + cfg.StateFile, "INVOKE_DIR=" + invokeDir}
	invoke := func(t *testing.T, function, event string) []byte {
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
		return []byte(strings.TrimSpace(stdout))
	}

	t.Run("API samples", func(t *testing.T) {
		for _, s := range []struct {
			event  string
			status int
		}{
			{"api-list-jobs.json", http.StatusOK},
			{"api-apply.json", http.StatusCreated},    // job 1, as the candidate
			{"api-change-status.json", http.StatusOK}, // application 1 → reviewing, as the employer
		} {
			var resp events.APIGatewayV2HTTPResponse
			answer := invoke(t, "ApiFunction", s.event)
			if err := json.Unmarshal(answer, &resp); err != nil || resp.StatusCode != s.status {
				t.Errorf("%s: answer %s (%v); want status %d", s.event, answer, err, s.status)
			}
		}
	})

	t.Run("SQS samples", func(t *testing.T) {
		for _, event := range []string{"sqs-status-event.json", "sqs-duplicate-event.json", "sqs-malformed.json"} {
			raw, err := os.ReadFile(filepath.Join(repoRoot, "events", event))
			if err != nil {
				t.Fatal(err)
			}
			var in events.SQSEvent
			if err := json.Unmarshal(raw, &in); err != nil {
				t.Fatal(err)
			}
			var wantFailed []string
			eventIDs := map[string]bool{}
			for _, r := range in.Records {
				var body struct {
					EventID string `json:"event_id"`
				}
				if json.Unmarshal([]byte(r.Body), &body) != nil || body.EventID == "" {
					wantFailed = append(wantFailed, r.MessageId)
					continue
				}
				eventIDs[body.EventID] = true
			}
			var out events.SQSEventResponse
			answer := invoke(t, "WorkerFunction", event)
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
			// Each event of the sample emailed the demo candidate once.
			emails, err := localaws.EmailsTo(context.Background(), st.SESEndpoint, d.CandidateEmail)
			if err != nil {
				t.Fatal(err)
			}
			for id := range eventIDs {
				n := 0
				for _, e := range emails {
					if e.Header(mail.EventIDHeader) == id {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%s: %d emails for event %s; want 1", event, n, id)
				}
			}
		}
	})

	t.Run("sweeper sample", func(t *testing.T) {
		var report map[string]any
		answer := invoke(t, "SweeperFunction", "sweeper-schedule.json")
		if err := json.Unmarshal(answer, &report); err != nil || report["failed"] != 0.0 {
			t.Errorf("sweeper answer %s (%v); want a report without failures", answer, err)
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
		if d.ApplicationID != 1 || d.JobID != 2 || d.Status != "reviewing" || d.Applications != 2 {
			t.Errorf("demo on the second start: %+v; want application 1 on job 2, now reviewing, of 2", d)
		}
		var banner bytes.Buffer
		PrintBanner(&banner, again)
		for _, want := range []string{"application 1, now reviewing", "the candidate has 2 applications", `{"status":"interview"}`} {
			if !strings.Contains(banner.String(), want) {
				t.Errorf("banner on the second start lacks %q:\n%s", want, banner.String())
			}
		}
	})
}
