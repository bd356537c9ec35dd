package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/worker"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// An environment that lacks every required setting gets one error that
// names each of them, not the first alone.
func TestMissingSettingsAreListedAtOnce(t *testing.T) {
	t.Parallel()
	lambdaOnly := map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}
	_, err := loadSettings(func(k string) string { return lambdaOnly[k] })
	for _, name := range []string{"MAIL_FROM", "STATUS_EVENTS_QUEUE_URL", "VERIFY_EMAIL_URL", "ACCOUNT_RECOVERY_URL", "DATABASE_URL", "DATABASE_SECRET_ARN"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("nothing set, in Lambda: %v; want %s named", err, name)
		}
	}
}

func TestLoadSettings(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	good := map[string]string{"DATABASE_URL": "postgres://x", "MAIL_FROM": "a@example.com", "STATUS_EVENTS_QUEUE_URL": "http://q"}
	with := func(k, v string) map[string]string {
		m := maps.Clone(good)
		m[k] = v
		return m
	}
	for k, v := range map[string]string{"LOG_LEVEL": "loud", "RETENTION_DAYS": "14", "WORKER_CONCURRENCY": "0",
		"VERIFY_EMAIL_URL": "/verify-email", "ACCOUNT_RECOVERY_URL": "ftp://app.example/reset", "DATABASE_QUERY_EXEC_MODE": "prepared"} {
		if _, err := loadSettings(env(with(k, v))); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v; want %s named", k, v, err, k)
		}
	}
	s, err := loadSettings(env(with("LOG_LEVEL", "debug")))
	if err != nil || s.LogLevel.String() != "DEBUG" || s.retention != jobboard.DefaultRetention || s.concurrency != worker.DefaultConcurrency {
		t.Errorf("good settings = %+v, %v", s, err)
	}
	if s.db.QueryExecMode != 0 {
		t.Errorf("DATABASE_QUERY_EXEC_MODE unset: %v, want none (the URL's, else pgx's default)", s.db.QueryExecMode)
	}
	if s, err := loadSettings(env(with("DATABASE_QUERY_EXEC_MODE", "exec"))); err != nil || s.db.QueryExecMode != pgx.QueryExecModeExec {
		t.Errorf("DATABASE_QUERY_EXEC_MODE=exec: %v, %v", s.db.QueryExecMode, err)
	}
	s, err = loadSettings(env(with("RETENTION_DAYS", "45")))
	if err != nil || s.retention != 45*24*time.Hour {
		t.Errorf("RETENTION_DAYS=45: %+v, %v", s, err)
	}
	// The verification link's base: a local default, required in Lambda.
	if s.verifyEmailURL != localVerifyEmailURL {
		t.Errorf("VERIFY_EMAIL_URL unset, locally: %q, want %q", s.verifyEmailURL, localVerifyEmailURL)
	}
	if _, err := loadSettings(env(with("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001"))); err == nil || !strings.Contains(err.Error(), "VERIFY_EMAIL_URL") {
		t.Errorf("VERIFY_EMAIL_URL unset in Lambda: %v; want it named", err)
	}
	s, err = loadSettings(env(with("VERIFY_EMAIL_URL", "https://app.example.com/verify")))
	if err != nil || s.verifyEmailURL != "https://app.example.com/verify" {
		t.Errorf("VERIFY_EMAIL_URL set: %+v, %v", s, err)
	}
	// The password reset link's base: the same.
	if s.passwordResetURL != localPasswordResetURL {
		t.Errorf("ACCOUNT_RECOVERY_URL unset, locally: %q, want %q", s.passwordResetURL, localPasswordResetURL)
	}
	if _, err := loadSettings(env(with("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001"))); err == nil || !strings.Contains(err.Error(), "ACCOUNT_RECOVERY_URL") {
		t.Errorf("ACCOUNT_RECOVERY_URL unset in Lambda: %v; want it named", err)
	}
	s, err = loadSettings(env(with("ACCOUNT_RECOVERY_URL", "https://app.example.com/reset")))
	if err != nil || s.passwordResetURL != "https://app.example.com/reset" {
		t.Errorf("ACCOUNT_RECOVERY_URL set: %+v, %v", s, err)
	}
}

// LOCAL_INVOCATION_TIMEOUT sets the local invocations' deadline.
func TestLocalInvocationTimeout(t *testing.T) {
	good := map[string]string{"DATABASE_URL": "postgres://x", "MAIL_FROM": "a@example.com", "STATUS_EVENTS_QUEUE_URL": "http://q"}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "LOCAL_INVOCATION_TIMEOUT" {
				return v
			}
			return good[k]
		}
	}
	if s, err := loadSettings(env("")); err != nil || s.localTimeout != localTimeout {
		t.Errorf("unset: %v, %v; want %v", s.localTimeout, err, localTimeout)
	}
	if s, err := loadSettings(env("8s")); err != nil || s.localTimeout != 8*time.Second {
		t.Errorf("8s: %v, %v", s.localTimeout, err)
	}
	for _, bad := range []string{"0s", "-1s", "8"} {
		if _, err := loadSettings(env(bad)); err == nil || !strings.Contains(err.Error(), "LOCAL_INVOCATION_TIMEOUT") {
			t.Errorf("%q: %v; want an error naming the variable", bad, err)
		}
	}
}

// wireFrom is run's first two steps: the settings (which must load), then
// the wiring.
func wireFrom(t *testing.T, getenv func(string) string, stdout io.Writer) (*function.Wiring, error) {
	t.Helper()
	s, err := loadSettings(getenv)
	if err != nil {
		t.Fatal(err)
	}
	return wire(context.Background(), s, getenv, stdout)
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
