package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/worker"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// sampleRun is one sample of events/ and what each of its records becomes.
type sampleRun struct {
	file     string
	outcomes []string
	failed   int
}

// The sample events in events/ (for `sam local invoke` and aws-lambda-rie)
// do what docs/development.md says, on a first and a second run: every
// well-formed record carries the one event of application 1 moving to
// reviewing, so its first delivery sends the email and every later one is
// a duplicate. Their application_id is 1, the first application of a fresh
// database; their occurred_at is the placeholder {{occurred_at}}, filled
// with one time for both runs, as `make invoke` fills it.
func TestSampleEvents(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	if app.ID != 1 {
		t.Fatalf("first application has id %d, the samples assume 1", app.ID)
	}
	h := e.Handler(t, e.Sender)
	occurred := time.Now().UTC()
	for run, samples := range [][]sampleRun{{
		{"sqs-status-event.json", []string{"sent"}, 0},
		{"sqs-duplicate-event.json", []string{"duplicate", "duplicate"}, 0},
		{"sqs-malformed.json", []string{"duplicate", "malformed"}, 1},
	}, {
		{"sqs-status-event.json", []string{"duplicate"}, 0},
		{"sqs-duplicate-event.json", []string{"duplicate", "duplicate"}, 0},
		{"sqs-malformed.json", []string{"duplicate", "malformed"}, 1},
	}} {
		for _, s := range samples {
			if got := handleSample(t, e, h, s.file, occurred, s.failed); !slices.Equal(got, s.outcomes) {
				t.Errorf("run %d, %s: outcomes = %v, want %v", run+1, s.file, got, s.outcomes)
			}
		}
	}
	if n := len(e.EmailsTo(t, app.CandidateEmail)); n != 1 {
		t.Errorf("emails = %d, want 1", n)
	}

	// On its own, the duplicate sample sends once and skips the copy.
	alone := workertest.New(t, workertest.Options{})
	app = alone.NewApp(t)
	got := handleSample(t, alone, alone.Handler(t, alone.Sender), "sqs-duplicate-event.json", occurred, 0)
	if want := []string{"sent", "duplicate"}; !slices.Equal(got, want) {
		t.Errorf("sqs-duplicate-event.json alone: outcomes = %v, want %v", got, want)
	}
	if n := len(alone.EmailsTo(t, app.CandidateEmail)); n != 1 {
		t.Errorf("sqs-duplicate-event.json alone: emails = %d, want 1", n)
	}
}

// handleSample hands events/FILE to h, with {{occurred_at}} filled, checks
// that failed records fail, and returns the outcome each record logged,
// in the order of the records.
func handleSample(t *testing.T, e *workertest.Env, h *worker.Handler, file string, occurred time.Time, failed int) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", file))
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.ReplaceAll(b, []byte("{{occurred_at}}"), []byte(occurred.Format(time.RFC3339)))
	var batch events.SQSEvent
	if err := json.Unmarshal(b, &batch); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	before := outcomes(t, e.Logs)
	resp, err := h.Handle(context.Background(), batch)
	if err != nil || len(resp.BatchItemFailures) != failed {
		t.Fatalf("%s: Handle = %+v, %v; want %d failed", file, resp, err, failed)
	}
	after := outcomes(t, e.Logs)
	var seen []string
	for _, r := range batch.Records {
		seen = append(seen, after[r.MessageId][len(before[r.MessageId]):]...)
	}
	return seen
}
