package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/functions/feedback/settings"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestRunRefusesArguments(t *testing.T) {
	t.Parallel()
	if err := run(context.Background(), []string{"feedback", "extra"}, env(nil), &bytes.Buffer{}); err == nil {
		t.Error("run took an argument")
	}
}

// The wired handler applies a feedback record to the database it was
// given: a hard bounce suppresses its address.
func TestWiredHandlerAppliesFeedback(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	s, err := settings.Load(env(map[string]string{"FEEDBACK_QUEUE_URL": "http://127.0.0.1:1/000000000000/q", "DATABASE_URL": url}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := wire(context.Background(), s, &out)
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
