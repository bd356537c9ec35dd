package schema_test

import (
	"context"
	"io/fs"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/postgres/schema"
)

// Migrating an already migrated database, from several connections at once,
// is a no-op: the advisory lock serialises them and each sees the version.
func TestMigrateIsIdempotentUnderConcurrency(t *testing.T) {
	url := pgtest.NewURL(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- schema.Migrate(ctx, url)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Migrate: %v", err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var version int
	if err := conn.QueryRow(ctx, "SELECT version FROM schema_version").Scan(&version); err != nil {
		t.Fatal(err)
	}
	files, err := fs.Glob(schema.Migrations(), "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if version != len(files) {
		t.Errorf("schema version = %d, want %d (one per migration)", version, len(files))
	}
}

// Apply reports what it did: an empty database gets every embedded
// migration, a second run none.
func TestApplyReports(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	ctx := context.Background()
	embedded := pgtest.EmbeddedMigrations(t)
	r, err := schema.Apply(ctx, url)
	if err != nil || r != (schema.Report{From: 0, To: embedded, Embedded: embedded}) || r.Ahead() {
		t.Fatalf("first Apply: %+v, %v; want 0 → %d of %d", r, err, embedded, embedded)
	}
	r, err = schema.Apply(ctx, url)
	if err != nil || r != (schema.Report{From: embedded, To: embedded, Embedded: embedded}) {
		t.Fatalf("second Apply: %+v, %v; want nothing applied", r, err)
	}
}

// A database that a newer build migrated further (its version past the
// embedded migrations) is left as it is, and Apply succeeds: what an older
// release, deployed again or restored by a rollback, finds.
func TestApplyLeavesADatabaseThatIsAhead(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	ctx := context.Background()
	embedded := pgtest.EmbeddedMigrations(t)
	pool := pgtest.Pool(t, url)
	// What a newer build's migration would have done.
	if _, err := pool.Exec(ctx, `CREATE TABLE from_a_newer_build (id int); UPDATE schema_version SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	r, err := schema.Apply(ctx, url)
	if err != nil || !r.Ahead() || r != (schema.Report{From: embedded + 1, To: embedded + 1, Embedded: embedded}) {
		t.Fatalf("Apply: %+v, %v; want a report of a database ahead (%d of %d), no error", r, err, embedded+1, embedded)
	}
	if err := schema.Migrate(ctx, url); err != nil {
		t.Errorf("Migrate on a database ahead: %v", err)
	}
	var newer bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('from_a_newer_build') IS NOT NULL`).Scan(&newer); err != nil {
		t.Fatal(err)
	}
	if version := pgtest.SchemaVersion(t, url); version != embedded+1 || !newer {
		t.Errorf("after Apply: version %d, the newer build's table kept %v; want %d, true", version, newer, embedded+1)
	}
}
