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

	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// The sample events in events/ (for `sam local invoke` and aws-lambda-rie)
// are what the worker expects: each record gets the outcome its file name
// promises. Their application_id is 1, the first application of a fresh
// database; their occurred_at is the placeholder {{occurred_at}}.
func TestSampleEvents(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	if app.ID != 1 {
		t.Fatalf("first application has id %d, the samples assume 1", app.ID)
	}
	h := e.Handler(t, e.Sender)
	for _, tc := range []struct {
		file     string
		outcomes []string
		failed   int
	}{
		{"sqs-status-event.json", []string{"sent"}, 0},
		{"sqs-duplicate-event.json", []string{"sent", "duplicate"}, 0},
		{"sqs-malformed.json", []string{"sent", "malformed", "sent"}, 1},
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", "events", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		// The samples' event time is a placeholder: the worker refuses
		// events older than the claim retention.
		b = bytes.ReplaceAll(b, []byte("{{occurred_at}}"), []byte(time.Now().UTC().Format(time.RFC3339)))
		var batch events.SQSEvent
		if err := json.Unmarshal(b, &batch); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		resp, err := h.Handle(context.Background(), batch)
		if err != nil || len(resp.BatchItemFailures) != tc.failed {
			t.Fatalf("%s: Handle = %+v, %v; want %d failed", tc.file, resp, err, tc.failed)
		}
		got := outcomes(t, e.Logs)
		var seen []string
		for _, r := range batch.Records {
			seen = append(seen, got[r.MessageId]...)
		}
		if !slices.Equal(seen, tc.outcomes) {
			t.Errorf("%s: outcomes = %v, want %v", tc.file, seen, tc.outcomes)
		}
	}
	if n := len(e.EmailsTo(t, app.CandidateEmail)); n != 4 {
		t.Errorf("emails = %d, want 4", n)
	}
}
