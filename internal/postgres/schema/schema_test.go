package schema_test

import (
	"context"
	"errors"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

// holdWriterLock begins a transaction on url that holds what a writer of
// table holds (ROW EXCLUSIVE, as an INSERT or UPDATE in progress) and
// returns its rollback.
func holdWriterLock(t *testing.T, url, table string) func() {
	t.Helper()
	ctx := context.Background()
	tx, err := pgtest.Pool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release := func() { once.Do(func() { _ = tx.Rollback(ctx) }) }
	t.Cleanup(release)
	return release
}

// lockingMigration is a migration that needs a lock on applications: 009
// adds a foreign key to it, which waits for every writer of the table.
// The tests below start just before it, whatever migrations come after.
const lockingMigration int32 = 9

// A migration that needs a lock another session holds (lockingMigration) gives
// up after its lock_timeout, rather than queueing every later statement on
// the table behind it, rolls back, and is made again after a pause until
// it gets the lock.
func TestAMigrationBlockedByALockGivesUpAndRetries(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	embedded := pgtest.EmbeddedMigrations(t)
	before := lockingMigration - 1
	pgtest.MigrateTo(t, url, before)
	release := holdWriterLock(t, url, "applications")

	timedOut := make(chan error, 100)
	done := make(chan struct{})
	var r schema.Report
	var err error
	go func() {
		defer close(done)
		r, err = schema.Options{LockTimeout: 100 * time.Millisecond, OnLockTimeout: func(err error) { timedOut <- err }}.Apply(context.Background(), url)
	}()
	select {
	case first := <-timedOut:
		var pgErr *pgconn.PgError
		if !errors.As(first, &pgErr) || pgErr.Code != "55P03" {
			t.Errorf("the blocked attempt failed with %v; want lock_not_available (55P03)", first)
		}
		if v := pgtest.SchemaVersion(t, url); v != before {
			t.Errorf("schema version %d after the blocked attempt; want %d (the migration rolled back)", v, before)
		}
	case <-done:
		t.Fatalf("Apply ended (%+v, %v) while the lock was held", r, err)
	case <-time.After(time.Minute):
		t.Fatal("the migration waited a minute for the lock without giving up")
	}
	release()
	<-done
	if err != nil || r.From != before || r.To != embedded || r.LockTimeouts < 1 {
		t.Errorf("Apply: %+v, %v; want %d → %d after at least one lock timeout", r, err, before, embedded)
	}
	if v := pgtest.SchemaVersion(t, url); v != embedded {
		t.Errorf("schema version %d; want %d", v, embedded)
	}
}

// A lock that outlasts the caller's patience fails Apply with the lock
// timeout, and leaves the schema as it was.
func TestAMigrationBlockedUntilTheDeadlineFails(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	before := lockingMigration - 1
	pgtest.MigrateTo(t, url, before)
	holdWriterLock(t, url, "applications")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := schema.Options{LockTimeout: 100 * time.Millisecond}.Apply(ctx, url)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "55P03" || r.LockTimeouts < 1 {
		t.Errorf("Apply: %+v, %v; want the lock timeout after at least one attempt", r, err)
	}
	if v := pgtest.SchemaVersion(t, url); v != before {
		t.Errorf("schema version %d; want %d", v, before)
	}
}
