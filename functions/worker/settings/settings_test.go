package settings

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/worker"
)

// An environment that lacks every required setting gets one error that
// names each of them, not the first alone.
func TestMissingSettingsAreListedAtOnce(t *testing.T) {
	t.Parallel()
	lambdaOnly := map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}
	_, err := Load(func(k string) string { return lambdaOnly[k] })
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
		"VERIFY_EMAIL_URL": "/verify-email", "ACCOUNT_RECOVERY_URL": "ftp://app.example/reset", "DATABASE_QUERY_EXEC_MODE": "prepared", "SES_MAX_SEND_RATE": "0"} {
		if _, err := Load(env(with(k, v))); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v; want %s named", k, v, err, k)
		}
	}
	s, err := Load(env(with("LOG_LEVEL", "debug")))
	if err != nil || s.LogLevel.String() != "DEBUG" || s.Retention != jobboard.DefaultRetention || s.Concurrency != worker.DefaultConcurrency {
		t.Errorf("good settings = %+v, %v", s, err)
	}
	if s.DB.QueryExecMode != 0 {
		t.Errorf("DATABASE_QUERY_EXEC_MODE unset: %v, want none (the URL's, else pgx's default)", s.DB.QueryExecMode)
	}
	if s, err := Load(env(with("DATABASE_QUERY_EXEC_MODE", "exec"))); err != nil || s.DB.QueryExecMode != pgx.QueryExecModeExec {
		t.Errorf("DATABASE_QUERY_EXEC_MODE=exec: %v, %v", s.DB.QueryExecMode, err)
	}
	if s.MaxSendRate != 0 {
		t.Errorf("SES_MAX_SEND_RATE unset: %v, want 0 (SES tells)", s.MaxSendRate)
	}
	if s, err := Load(env(with("SES_MAX_SEND_RATE", "14"))); err != nil || s.MaxSendRate != 14 {
		t.Errorf("SES_MAX_SEND_RATE=14: %v, %v", s.MaxSendRate, err)
	}
	s, err = Load(env(with("RETENTION_DAYS", "45")))
	if err != nil || s.Retention != 45*24*time.Hour {
		t.Errorf("RETENTION_DAYS=45: %+v, %v", s, err)
	}
	// The verification link's base: a local default, required in Lambda.
	if s.VerifyEmailURL != localVerifyEmailURL {
		t.Errorf("VERIFY_EMAIL_URL unset, locally: %q, want %q", s.VerifyEmailURL, localVerifyEmailURL)
	}
	if _, err := Load(env(with("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001"))); err == nil || !strings.Contains(err.Error(), "VERIFY_EMAIL_URL") {
		t.Errorf("VERIFY_EMAIL_URL unset in Lambda: %v; want it named", err)
	}
	s, err = Load(env(with("VERIFY_EMAIL_URL", "https://app.example.com/verify")))
	if err != nil || s.VerifyEmailURL != "https://app.example.com/verify" {
		t.Errorf("VERIFY_EMAIL_URL set: %+v, %v", s, err)
	}
	// The password reset link's base: the same.
	if s.PasswordResetURL != localPasswordResetURL {
		t.Errorf("ACCOUNT_RECOVERY_URL unset, locally: %q, want %q", s.PasswordResetURL, localPasswordResetURL)
	}
	if _, err := Load(env(with("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001"))); err == nil || !strings.Contains(err.Error(), "ACCOUNT_RECOVERY_URL") {
		t.Errorf("ACCOUNT_RECOVERY_URL unset in Lambda: %v; want it named", err)
	}
	s, err = Load(env(with("ACCOUNT_RECOVERY_URL", "https://app.example.com/reset")))
	if err != nil || s.PasswordResetURL != "https://app.example.com/reset" {
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
	if s, err := Load(env("")); err != nil || s.LocalTimeout != localTimeout {
		t.Errorf("unset: %v, %v; want %v", s.LocalTimeout, err, localTimeout)
	}
	if s, err := Load(env("8s")); err != nil || s.LocalTimeout != 8*time.Second {
		t.Errorf("8s: %v, %v", s.LocalTimeout, err)
	}
	for _, bad := range []string{"0s", "-1s", "8"} {
		if _, err := Load(env(bad)); err == nil || !strings.Contains(err.Error(), "LOCAL_INVOCATION_TIMEOUT") {
			t.Errorf("%q: %v; want an error naming the variable", bad, err)
		}
	}
}
