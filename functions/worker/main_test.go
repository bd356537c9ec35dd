package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/functions/worker/settings"
	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// wireFrom is run's first two steps: the settings (which must load), then
// the wiring.
func wireFrom(t *testing.T, getenv func(string) string, stdout io.Writer) (*function.Wiring, error) {
	t.Helper()
	s, err := settings.Load(getenv)
	if err != nil {
		t.Fatal(err)
	}
	return wire(context.Background(), s, stdout)
}

// wire wires the real adapters from the environment alone: the SDK finds
// the SES stand-in through AWS_ENDPOINT_URL_SESV2, as it would find SES.
func TestWireBuildsAWorkingHandler(t *testing.T) {
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	// The AWS settings come through getenv, as everything else (awsenv).
	env := map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL_SESV2": e.SESEndpoint,
		"DATABASE_URL":           e.URL, "MAIL_FROM": workertest.MailFrom, "STATUS_EVENTS_QUEUE_URL": e.QueueURL}
	var out bytes.Buffer
	w, err := wireFrom(t, func(k string) string { return env[k] }, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	handle, ok := w.Handler.(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error))
	if !ok {
		t.Fatalf("handler %T; want the SQS batch handler", w.Handler)
	}
	ev := app.Event()
	resp, err := handle(context.Background(), events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: workertest.Body(t, ev)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	if got := e.EmailsTo(t, app.CandidateEmail); len(got) != 1 {
		t.Fatalf("emails = %d, want 1", len(got))
	}
	if !strings.Contains(out.String(), `"outcome":"sent"`) || !strings.Contains(out.String(), `"_aws"`) {
		t.Errorf("stdout lacks the record line or the EMF line:\n%s", out.String())
	}
}

// Like the other functions, the worker takes no command line arguments.
func TestRunRefusesArguments(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"worker", "migrate"}, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("run with an argument: %v; want an unknown-command error", err)
	}
}
