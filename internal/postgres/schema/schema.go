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

// Migrate brings the schema of the database at url up to date. tern holds a
// PostgreSQL advisory lock while it migrates, so concurrent starts (several
// Lambda sandboxes, parallel test packages) apply each migration once.
// It returns connection and migration errors.
func Migrate(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return fmt.Errorf("connect for migration: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	m, err := migrate.NewMigrator(ctx, conn, versionTable)
	if err != nil {
		return fmt.Errorf("create migrator: %w", err)
	}
	if err := m.LoadMigrations(Migrations()); err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
