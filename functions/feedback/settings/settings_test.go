package settings_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/functions/feedback/settings"
	"github.com/jobboard/jobboard/internal/function"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestMissingSettingsAreListedAtOnce(t *testing.T) {
	t.Parallel()
	_, err := settings.Load(env(nil))
	for _, name := range []string{"FEEDBACK_QUEUE_URL", "DATABASE_URL", "DATABASE_SECRET_ARN"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("nothing set: %v; want %s named", err, name)
		}
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	if _, err := settings.Load(env(nil)); err == nil || !strings.Contains(err.Error(), "FEEDBACK_QUEUE_URL") {
		t.Errorf("local mode without a queue: %v; want the queue named", err)
	}
	// In Lambda the event source mapping polls: no queue needed.
	if s, err := settings.Load(env(map[string]string{function.EnvLambdaRuntimeAPI: "127.0.0.1:9001", "DATABASE_URL": "postgres://x"})); err != nil || !s.Lambda {
		t.Errorf("Lambda without a queue: %+v, %v", s, err)
	}
	for name, bad := range map[string][]string{
		"LOCAL_INVOCATION_TIMEOUT": {"0s", "16m", "soon"},
		"DATABASE_QUERY_EXEC_MODE": {"fast"},
	} {
		for _, v := range bad {
			if _, err := settings.Load(env(map[string]string{"FEEDBACK_QUEUE_URL": "http://q", "DATABASE_URL": "postgres://x", name: v})); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: %v; want an error naming it", name, v, err)
			}
		}
	}
	s, err := settings.Load(env(map[string]string{"FEEDBACK_QUEUE_URL": "http://q", "DATABASE_URL": "postgres://x", "LOCAL_INVOCATION_TIMEOUT": "5s"}))
	if err != nil || s.QueueURL != "http://q" || s.LocalTimeout != 5*time.Second {
		t.Errorf("set: %+v, %v", s, err)
	}
}
