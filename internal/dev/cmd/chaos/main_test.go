package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// run refuses to start without a server or with an unknown flag, and says
// what is wrong.
func TestRunChecksItsSettings(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no database", map[string]string{}, nil, "DATABASE_URL"},
		{"no database, short", map[string]string{}, []string{"-short", "-seed", "3"}, "DATABASE_URL"},
		{"unknown flag", map[string]string{}, []string{"-nope"}, "nope"},
		{"bad seed", map[string]string{}, []string{"-seed", "many"}, "seed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"chaos"}, tt.args...)
			err := run(context.Background(), args, func(k string) string { return tt.env[k] }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}

// A run whose context is already cancelled stops at once, prints a report
// that says so, and fails.
func TestRunReportsACancelledRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	env := map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:1/postgres"}
	err := run(ctx, []string{"chaos", "-short", "-seed", "5", "-bin", t.TempDir(), "-logs", t.TempDir()},
		func(k string) string { return env[k] }, &out)
	if err == nil {
		t.Fatal("a cancelled run succeeded")
	}
	if s := out.String(); !strings.Contains(s, "seed 5") || !strings.Contains(s, "FAIL") {
		t.Errorf("report:\n%s\nwant the seed and FAIL", s)
	}
}

// Without -logs, a run keeps its logs in a folder of its own under
// build/chaos/logs, and its report says which.
func TestRunKeepsItsLogsUnderBuild(t *testing.T) {
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out bytes.Buffer
	env := map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:1/postgres"}
	_ = run(ctx, []string{"chaos", "-short", "-seed", "5", "-bin", t.TempDir()}, func(k string) string { return env[k] }, &out)
	runs, err := filepath.Glob(filepath.Join(defaultLogs, "*"))
	if err != nil || len(runs) != 1 {
		t.Fatalf("folders under %s: %v (%v); want the run's one", defaultLogs, runs, err)
	}
	if want := "logs:        " + runs[0]; !strings.Contains(out.String(), want) {
		t.Errorf("report:\n%s\nwant it to name the logs, %q", out.String(), want)
	}
}
