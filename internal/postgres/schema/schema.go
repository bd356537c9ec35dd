// Package schema holds the job board's PostgreSQL schema as embedded SQL
// migrations and applies them with tern under an advisory lock. It is apart
// from package postgres so that only the programs that migrate (the API's
// local mode and `make migrate`, and the tests) link the migration tool.
package schema

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// versionTable records the applied migrations.
const versionTable = "schema_version"

// Migrations returns the embedded migration files, for tools that hash them.
func Migrations() fs.FS {
	sub, _ := fs.Sub(migrationFiles, "migrations") // cannot fail: the folder is embedded
	return sub
}

// Migrate brings the schema of the database at url up to date (Apply,
// without its report).
func Migrate(ctx context.Context, url string) error {
	_, err := Apply(ctx, url)
	return err
}

// Report is what Apply found and did: the schema's version before and
// after (the number of migrations applied to the database so far), the
// number of migrations this build embeds, and how many attempts ran into
// the lock timeout and were made again.
type Report struct {
	From, To, Embedded int32
	LockTimeouts       int
}

// Ahead reports a database that a newer build has migrated further than
// this build's migrations go. Apply then changes nothing and succeeds:
// migrations are additive, so this build's code works on that schema (an
// older release deployed again, or a deploy's rollback that invokes the
// previous migration function).
func (r Report) Ahead() bool { return r.From > r.Embedded }

// DefaultLockTimeout is how long a migration's statement waits for a lock
// before it gives up (PostgreSQL's lock_timeout). An ALTER TABLE queued
// behind a long transaction makes every later statement on that table
// queue behind it, the API's included; giving up after 2 s bounds that
// stall, and the attempt is made again after a pause (Options.Apply).
const DefaultLockTimeout = 2 * time.Second

// Retry pauses after a lock timeout: the first, doubling up to the last.
const (
	firstRetryPause = time.Second
	maxRetryPause   = 15 * time.Second
)

// Options tune Apply. The zero value is what the deploys use.
type Options struct {
	// LockTimeout: zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// OnLockTimeout, if set, hears of each attempt that ran into the lock
	// timeout, before the pause that precedes the next.
	OnLockTimeout func(err error)
}

// Apply brings the schema of the database at url up to date with the
// default Options.
func Apply(ctx context.Context, url string) (Report, error) {
	return Options{}.Apply(ctx, url)
}

// Apply brings the schema of the database at url up to date and says what
// it found and did. tern holds a PostgreSQL advisory lock while it
// migrates, so concurrent starts (several Lambda sandboxes, parallel test
// packages) apply each migration once. Every statement, the advisory lock
// included, waits at most LockTimeout for a lock; a migration that runs
// into it is rolled back (each runs in its own transaction) and the
// attempt made again after a pause, until ctx ends. It returns connection
// and migration errors, and the last lock timeout when ctx ended first.
func (o Options) Apply(ctx context.Context, url string) (Report, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return Report{}, fmt.Errorf("connect for migration: %w", err)
	}
	timeout := o.LockTimeout
	if timeout == 0 {
		timeout = DefaultLockTimeout
	}
	// A startup parameter, not a SET: tern resets the session's settings
	// after each migration (RESET ALL), which keeps this one.
	cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(timeout.Milliseconds(), 10)
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return Report{}, fmt.Errorf("connect for migration: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))

	var r Report
	pause := firstRetryPause
	var blocked error // the last lock timeout
	gaveUp := func() error {
		return fmt.Errorf("gave up after %d lock timeouts of %s: %w", r.LockTimeouts, timeout, blocked)
	}
	for {
		err := apply(ctx, conn, &r)
		if err != nil && blocked != nil && ctx.Err() != nil {
			// The caller's patience ended during a retry: what kept the
			// migration from finishing is the lock, not the deadline.
			return r, gaveUp()
		}
		if err == nil || !isLockTimeout(err) {
			return r, err
		}
		blocked = err
		r.LockTimeouts++
		if o.OnLockTimeout != nil {
			o.OnLockTimeout(err)
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return r, gaveUp()
		case <-t.C:
		}
		pause = min(2*pause, maxRetryPause)
	}
}

// apply is one attempt: it fills r.
func apply(ctx context.Context, conn *pgx.Conn, r *Report) error {
	m, err := migrate.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return fmt.Errorf("create migrator: %w", err)
	}
	if err := m.LoadMigrations(Migrations()); err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	r.Embedded = int32(len(m.Migrations))
	from, err := m.GetCurrentVersion(ctx)
	if err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	if r.LockTimeouts == 0 {
		r.From = from
	}
	// Versions only grow, so a database ahead now stays ahead: no need to
	// hold the lock for this answer (tern would refuse the version as out
	// of range).
	if from > r.Embedded {
		r.To = from
		return nil
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if r.To, err = m.GetCurrentVersion(ctx); err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	return nil
}

// isLockTimeout reports PostgreSQL's lock_not_available (55P03): a
// statement waited longer than lock_timeout.
func isLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}
