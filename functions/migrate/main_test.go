package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// Outside Lambda the function migrates once: an empty database gets the
// schema, and a second run changes nothing.
func TestMigratesAnEmptyDatabase(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	for range 2 {
		var out bytes.Buffer
		if err := run(context.Background(), []string{"migrate"}, env(map[string]string{"DATABASE_URL": url}), &out); err != nil {
			t.Fatalf("run: %v", err)
		}
		if !strings.Contains(out.String(), "migrations applied") {
			t.Fatalf("output %q", out.String())
		}
	}
	pgtest.CheckMigrated(t, url)
}

func TestErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no database", []string{"migrate"}, nil, "DATABASE_URL"},
		{"unreachable database", []string{"migrate"}, map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/none"}, "connect"},
		{"bad log level", []string{"migrate"}, map[string]string{"LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		{"unknown command", []string{"migrate", "down"}, nil, "unknown command"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, env(tt.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run: %v; want an error mentioning %q", err, tt.want)
			}
		})
	}
}
