package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestMissingSettingsAreListedAtOnce(t *testing.T) {
	t.Parallel()
	_, err := loadSettings(env(nil))
	for _, name := range []string{"FEEDBACK_QUEUE_URL", "DATABASE_URL", "DATABASE_SECRET_ARN"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("nothing set: %v; want %s named", err, name)
		}
	}
}

func TestLoadSettings(t *testing.T) {
	t.Parallel()
	if _, err := loadSettings(env(nil)); err == nil || !strings.Contains(err.Error(), "FEEDBACK_QUEUE_URL") {
		t.Errorf("local mode without a queue: %v; want the queue named", err)
	}
	// In Lambda the event source mapping polls: no queue needed.
	if s, err := loadSettings(env(map[string]string{function.EnvLambdaRuntimeAPI: "127.0.0.1:9001", "DATABASE_URL": "postgres://x"})); err != nil || !s.Lambda {
		t.Errorf("Lambda without a queue: %+v, %v", s, err)
	}
	for name, bad := range map[string][]string{
		"LOCAL_INVOCATION_TIMEOUT": {"0s", "16m", "soon"},
		"DATABASE_QUERY_EXEC_MODE": {"fast"},
	} {
		for _, v := range bad {
			if _, err := loadSettings(env(map[string]string{"FEEDBACK_QUEUE_URL": "http://q", "DATABASE_URL": "postgres://x", name: v})); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: %v; want an error naming it", name, v, err)
			}
		}
	}
	s, err := loadSettings(env(map[string]string{"FEEDBACK_QUEUE_URL": "http://q", "DATABASE_URL": "postgres://x", "LOCAL_INVOCATION_TIMEOUT": "5s"}))
	if err != nil || s.queueURL != "http://q" || s.localTimeout != 5*time.Second {
		t.Errorf("set: %+v, %v", s, err)
	}
	if err := run(context.Background(), []string{"feedback", "extra"}, env(nil), &bytes.Buffer{}); err == nil {
		t.Error("run took an argument")
	}
}

// The wired handler applies a feedback record to the database it was
// given: a hard bounce suppresses its address.
func TestWiredHandlerAppliesFeedback(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	s, err := loadSettings(env(map[string]string{"FEEDBACK_QUEUE_URL": "http://127.0.0.1:1/000000000000/q", "DATABASE_URL": "postgres://x"}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := wire(context.Background(), s, env(map[string]string{"DATABASE_URL": url}), &out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	handle, ok := w.Handler.(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error))
	if !ok {
		t.Fatalf("handler %T; want the SQS batch handler", w.Handler)
	}
	body := `{"eventType":"Bounce","mail":{"messageId":"m-1","destination":["gone@example.org"]},` +
		`"bounce":{"bounceType":"Permanent","bounceSubType":"General","feedbackId":"f-1","bouncedRecipients":[{"emailAddress":"gone@example.org"}]}}`
	resp, err := handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{{MessageId: "1", Body: body}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	var reason string
	if err := pgtest.Pool(t, url).QueryRow(context.Background(), `SELECT reason FROM email_suppressions WHERE email = 'gone@example.org'`).Scan(&reason); err != nil || reason != "bounce" {
		t.Errorf("suppression %q, %v; want bounce", reason, err)
	}
	if !strings.Contains(out.String(), `"FeedbackApplied"`) {
		t.Errorf("no metric line:\n%s", out.String())
	}
}
