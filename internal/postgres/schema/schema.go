// Package schema holds the job board's PostgreSQL schema as embedded SQL
// migrations and applies them with tern under an advisory lock. It is apart
// from package postgres so that only the programs that migrate (the API's
// local mode and `make migrate`, and the tests) link the migration tool.
package schema

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
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
// after (the number of migrations applied to the database so far), and
// the number of migrations this build embeds.
type Report struct {
	From, To, Embedded int32
}

// Ahead reports a database that a newer build has migrated further than
// this build's migrations go. Apply then changes nothing and succeeds:
// migrations are additive, so this build's code works on that schema (an
// older release deployed again, or a deploy's rollback that invokes the
// previous migration function).
func (r Report) Ahead() bool { return r.From > r.Embedded }

// Apply brings the schema of the database at url up to date and says what
// it found and did. tern holds a PostgreSQL advisory lock while it
// migrates, so concurrent starts (several Lambda sandboxes, parallel test
// packages) apply each migration once. It returns connection and migration
// errors.
func Apply(ctx context.Context, url string) (Report, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return Report{}, fmt.Errorf("connect for migration: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	m, err := migrate.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return Report{}, fmt.Errorf("create migrator: %w", err)
	}
	if err := m.LoadMigrations(Migrations()); err != nil {
		return Report{}, fmt.Errorf("load migrations: %w", err)
	}
	r := Report{Embedded: int32(len(m.Migrations))}
	if r.From, err = m.GetCurrentVersion(ctx); err != nil {
		return r, fmt.Errorf("read the schema version: %w", err)
	}
	// Versions only grow, so a database ahead now stays ahead: no need to
	// hold the lock for this answer (tern would refuse the version as out
	// of range).
	if r.Ahead() {
		r.To = r.From
		return r, nil
	}
	if err := m.Migrate(ctx); err != nil {
		return r, fmt.Errorf("migrate: %w", err)
	}
	if r.To, err = m.GetCurrentVersion(ctx); err != nil {
		return r, fmt.Errorf("read the schema version: %w", err)
	}
	return r, nil
}
