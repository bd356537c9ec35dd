package settings

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// An environment that lacks every required setting gets one error that
// names each of them, not the first alone.
func TestMissingSettingsAreListedAtOnce(t *testing.T) {
	t.Parallel()
	_, err := Load(func(string) string { return "" })
	for _, name := range []string{"STATUS_EVENTS_QUEUE_URL", "WEBHOOK_EVENTS_QUEUE_URL", "DATABASE_URL", "DATABASE_SECRET_ARN"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("nothing set: %v; want %s named", err, name)
		}
	}
}

func TestLoadSettings(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	base := map[string]string{"DATABASE_URL": "postgres://x", "STATUS_EVENTS_QUEUE_URL": "http://q", "WEBHOOK_EVENTS_QUEUE_URL": "http://w"}
	s, err := Load(env(base))
	if err != nil || s.Retention != jobboard.DefaultRetention {
		t.Errorf("default retention = %v, %v; want %v", s.Retention, err, jobboard.DefaultRetention)
	}
	for _, bad := range []string{"0", "-3", "14", "two weeks", "1.5"} {
		base["RETENTION_DAYS"] = bad
		if _, err := Load(env(base)); err == nil || !strings.Contains(err.Error(), "RETENTION_DAYS") {
			t.Errorf("RETENTION_DAYS=%q: %v; want an error", bad, err)
		}
	}
	base["RETENTION_DAYS"] = "30"
	if s, err := Load(env(base)); err != nil || s.Retention != 30*24*time.Hour {
		t.Errorf("RETENTION_DAYS=30: %v, %v", s.Retention, err)
	}
	if s, err := Load(env(base)); err != nil || s.Grace != 0 {
		t.Errorf("no SWEEP_GRACE: grace = %v, %v; want 0 (the sweeper's default)", s.Grace, err)
	}
	for _, bad := range []string{"0s", "-1s", "soon"} {
		base["SWEEP_GRACE"] = bad
		if _, err := Load(env(base)); err == nil || !strings.Contains(err.Error(), "SWEEP_GRACE") {
			t.Errorf("SWEEP_GRACE=%q: %v; want an error", bad, err)
		}
	}
	base["SWEEP_GRACE"] = "2s"
	if s, err := Load(env(base)); err != nil || s.Grace != 2*time.Second {
		t.Errorf("SWEEP_GRACE=2s: %v, %v", s.Grace, err)
	}

	// SWEEP_INTERVAL paces the local mode only; in Lambda the schedule does.
	if s, err := Load(env(base)); err != nil || s.Interval != defaultSweepInterval {
		t.Errorf("no SWEEP_INTERVAL: interval = %v, %v; want %v", s.Interval, err, defaultSweepInterval)
	}
	base["SWEEP_INTERVAL"] = "5s"
	if s, err := Load(env(base)); err != nil || s.Interval != 5*time.Second {
		t.Errorf("SWEEP_INTERVAL=5s: %v, %v", s.Interval, err)
	}
	base["SWEEP_INTERVAL"] = "often"
	if _, err := Load(env(base)); err == nil || !strings.Contains(err.Error(), "SWEEP_INTERVAL") {
		t.Errorf("SWEEP_INTERVAL=often: %v; want an error", err)
	}
	base["AWS_LAMBDA_RUNTIME_API"] = "127.0.0.1:9001"
	if s, err := Load(env(base)); err != nil || !s.Lambda {
		t.Errorf("SWEEP_INTERVAL=often in Lambda: %v, %v; want it ignored", s.Lambda, err)
	}
	base["DATABASE_QUERY_EXEC_MODE"] = "exec"
	if s, err := Load(env(base)); err != nil || s.DB.QueryExecMode != pgx.QueryExecModeExec {
		t.Errorf("DATABASE_QUERY_EXEC_MODE=exec: %v, %v", s.DB.QueryExecMode, err)
	}
	base["DATABASE_QUERY_EXEC_MODE"] = "prepared"
	if _, err := Load(env(base)); err == nil || !strings.Contains(err.Error(), "DATABASE_QUERY_EXEC_MODE") {
		t.Errorf("DATABASE_QUERY_EXEC_MODE=prepared: %v; want an error", err)
	}
	base["LOG_LEVEL"] = "loud"
	if _, err := Load(env(base)); err == nil || !strings.Contains(err.Error(), "LOG_LEVEL") {
		t.Errorf("LOG_LEVEL=loud: %v; want an error", err)
	}
}
