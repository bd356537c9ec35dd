package settings_test

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/functions/webhook/settings"

	"github.com/jobboard/jobboard/internal/webhook"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// An environment that lacks every required setting gets one error that
// names each of them, not the first alone.
func TestMissingSettingsAreListedAtOnce(t *testing.T) {
	t.Parallel()
	_, err := settings.Load(env(nil))
	for _, name := range []string{"WEBHOOK_EVENTS_QUEUE_URL", "WEBHOOK_SEALING_KEY", "WEBHOOK_SEALING_KEY_SECRET_ARN", "DATABASE_URL", "DATABASE_SECRET_ARN"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("nothing set: %v; want %s named", err, name)
		}
	}
	// The function's own login names the database too.
	if _, err := settings.Load(env(map[string]string{"WEBHOOK_DATABASE_SECRET_ARN": "arn:aws:secretsmanager:eu-west-1:1:secret:w"})); err == nil || strings.Contains(err.Error(), "DATABASE_URL") {
		t.Errorf("WEBHOOK_DATABASE_SECRET_ARN set: %v; want the database not named missing", err)
	}
}

func TestLoadSettings(t *testing.T) {
	t.Parallel()
	base := map[string]string{"WEBHOOK_EVENTS_QUEUE_URL": "http://q", "DATABASE_URL": "postgres://x", "WEBHOOK_SEALING_KEY": "k"}
	s, err := settings.Load(env(base))
	if err != nil || s.Role != "jobboard_webhooks" || s.AllowInsecure || s.Concurrency != webhook.DefaultConcurrency ||
		s.AttemptTimeout != webhook.DefaultAttemptTimeout || s.BackoffBase != 0 || s.BackoffMax != 0 {
		t.Errorf("defaults: %+v, %v", s, err)
	}
	for name, bad := range map[string][]string{
		"WEBHOOK_ALLOW_INSECURE":   {"yes please"},
		"WEBHOOK_CONCURRENCY":      {"0", "101", "ten"},
		"WEBHOOK_ATTEMPT_TIMEOUT":  {"10", "500ms", "1m"},
		"WEBHOOK_BACKOFF_BASE":     {"0s", "2h"},
		"WEBHOOK_BACKOFF_MAX":      {"13h", "-1s"},
		"LOCAL_INVOCATION_TIMEOUT": {"1s"},
	} {
		for _, v := range bad {
			kv := maps.Clone(base)
			kv[name] = v
			if _, err := settings.Load(env(kv)); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: %v; want an error naming it", name, v, err)
			}
		}
	}
	// The insecure switch is refused inside Lambda.
	inLambda := maps.Clone(base)
	maps.Copy(inLambda, map[string]string{"WEBHOOK_ALLOW_INSECURE": "true", "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"})
	if _, err := settings.Load(env(inLambda)); err == nil || !strings.Contains(err.Error(), "WEBHOOK_ALLOW_INSECURE") {
		t.Errorf("WEBHOOK_ALLOW_INSECURE=true inside Lambda: %v; want it refused", err)
	}
	kv := maps.Clone(base)
	maps.Copy(kv, map[string]string{"WEBHOOK_ALLOW_INSECURE": "true", "DATABASE_ROLE": "other",
		"WEBHOOK_BACKOFF_BASE": "1s", "WEBHOOK_BACKOFF_MAX": "2s", "WEBHOOK_ATTEMPT_TIMEOUT": "3s"})
	if s, err := settings.Load(env(kv)); err != nil || !s.AllowInsecure || s.Role != "other" || s.BackoffMax != 2*time.Second || s.AttemptTimeout != 3*time.Second {
		t.Errorf("set: %+v, %v", s, err)
	}
}
