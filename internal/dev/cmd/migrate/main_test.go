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

// `make migrate` brings an empty database to the schema, and a second run
// changes nothing.
func TestMigrateBringsAnEmptyDatabaseToTheSchema(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := pgtest.NewEmptyURL(t)
	for range 2 {
		var out bytes.Buffer
		if err := run(ctx, env(map[string]string{"DATABASE_URL": u}), &out); err != nil {
			t.Fatalf("migrate: %v", err)
		}
		if !strings.Contains(out.String(), "migrations applied") {
			t.Fatalf("output %q", out.String())
		}
	}
	pgtest.CheckMigrated(t, u)
}

func TestMigrateErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"no database", map[string]string{}, "DATABASE_URL"},
		{"unreachable database", map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/none"}, "connect"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), env(tt.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run = %v; want an error mentioning %q", err, tt.want)
			}
		})
	}
}
