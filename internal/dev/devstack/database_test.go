package devstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// ensureDatabase creates a missing database, finds an existing one the
// second time, and returns a URL that reaches it.
func TestEnsureDatabaseCreatesOnceAndPointsAtIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "devstack_" + hex.EncodeToString(b)
	server := pgtest.ServerURL()
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), server)
		if err != nil {
			t.Errorf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})

	for range 2 {
		dbURL, err := ensureDatabase(ctx, server, name)
		if err != nil {
			t.Fatal(err)
		}
		if u, err := url.Parse(dbURL); err != nil || u.Path != "/"+name {
			t.Fatalf("ensureDatabase = %q (%v), want the server URL with path /%s", dbURL, err, name)
		}
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatalf("connect to %s: %v", dbURL, err)
		}
		var current string
		err = conn.QueryRow(ctx, "SELECT current_database()").Scan(&current)
		_ = conn.Close(ctx)
		if err != nil || current != name {
			t.Fatalf("current_database() = %q (%v), want %q", current, err, name)
		}
	}
}
