package function_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/function"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// Unset, the settings are a local function logging at INFO.
func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	s, err := function.Load(env(nil))
	if err != nil || s.Lambda || s.LogLevel.String() != "INFO" || s.Version != "" {
		t.Errorf("Load(empty) = Lambda %v, level %v, version %q, %v; want local, INFO, none", s.Lambda, s.LogLevel, s.Version, err)
	}
}

func TestLoadReadsTheEnvironment(t *testing.T) {
	t.Parallel()
	s, err := function.Load(env(map[string]string{
		"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "LOG_LEVEL": "DEBUG", "AWS_REGION": "eu-west-1",
		"AWS_LAMBDA_FUNCTION_VERSION": "12"}))
	if err != nil || !s.Lambda || s.LogLevel.String() != "DEBUG" || s.AWS.Region != "eu-west-1" || s.Version != "12" {
		t.Errorf("Load = Lambda %v, level %v, region %q, version %q, %v; want Lambda, DEBUG, eu-west-1, 12",
			s.Lambda, s.LogLevel, s.AWS.Region, s.Version, err)
	}
}

func TestLoadRefusesAnUnknownLogLevel(t *testing.T) {
	t.Parallel()
	if _, err := function.Load(env(map[string]string{"LOG_LEVEL": "loud"})); err == nil || !strings.Contains(err.Error(), "LOG_LEVEL") {
		t.Errorf("LOG_LEVEL=loud: %v; want an error naming LOG_LEVEL", err)
	}
}

// The logger writes JSON lines, and nothing below the level.
func TestLoggerWritesJSONAtTheLevel(t *testing.T) {
	t.Parallel()
	s, err := function.Load(env(map[string]string{"LOG_LEVEL": "warn"}))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	logger := s.Logger(&out)
	logger.InfoContext(context.Background(), "quiet")
	logger.WarnContext(context.Background(), "loud", "n", 1)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("logged %d lines, want only the WARN one:\n%s", len(lines), out.String())
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil || line["level"] != "WARN" || line["msg"] != "loud" || line["n"] != 1.0 {
		t.Errorf("line = %v (%v); want the WARN line as JSON", line, err)
	}
}

// A local-only switch reads as a flag outside Lambda and is refused, by
// name, inside it when on.
func TestLocalFlagIsRefusedInsideLambda(t *testing.T) {
	t.Parallel()
	local, lambda := function.Settings{}, function.Settings{Lambda: true}
	for _, tt := range []struct {
		s       function.Settings
		value   string
		want    bool
		wantErr bool
	}{
		{local, "true", true, false},
		{local, "", false, false},
		{local, "maybe", false, true},
		{lambda, "true", false, true},
		{lambda, "1", false, true},
		{lambda, "false", false, false},
		{lambda, "", false, false},
	} {
		got, err := tt.s.LocalFlag("SOME_SWITCH", tt.value)
		if got != tt.want || (err != nil) != tt.wantErr || (err != nil && !strings.Contains(err.Error(), "SOME_SWITCH")) {
			t.Errorf("Lambda %v, %q: %v, %v; want %v, an error naming the switch: %v", tt.s.Lambda, tt.value, got, err, tt.want, tt.wantErr)
		}
	}
}
