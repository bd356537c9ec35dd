// Package pgtest gives each test a fresh, migrated PostgreSQL database,
// cloned from a template that is migrated once per schema version (this takes
// milliseconds per test, not the cost of a migration).
//
// The server is the one named by TEST_DATABASE_URL, else DATABASE_URL, else
// postgres://postgres@127.0.0.1:5432/postgres. The test harness
// (scripts/with-postgres.sh) sets DATABASE_URL when it starts a throwaway
// cluster. This is the one package outside main that reads the environment:
// it only ever runs inside tests.
package pgtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver that pgtestdb opens
	"github.com/peterldowns/pgtestdb"

	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/schema"
)

// ServerURL is the URL of the server that tests use.
func ServerURL() string {
	for _, k := range []string{"TEST_DATABASE_URL", "DATABASE_URL"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// NewURL creates a fresh migrated database for tb, drops it when tb ends, and
// returns its URL. It fails tb if the server cannot be reached.
func NewURL(tb testing.TB) string {
	tb.Helper()
	cfg, err := pgconn.ParseConfig(ServerURL())
	if err != nil {
		tb.Fatalf("parse server url: %v", err)
	}
	conf := pgtestdb.Config{
		DriverName:                "pgx",
		Host:                      cfg.Host,
		Port:                      strconv.Itoa(int(cfg.Port)),
		User:                      cfg.User,
		Password:                  url.QueryEscape(cfg.Password),
		Database:                  cfg.Database,
		Options:                   "sslmode=disable",
		ForceTerminateConnections: true,
	}
	return pgtestdb.Custom(tb, conf, migrator{}).URL()
}

// NewDB returns a store over a fresh migrated database, closed when tb ends.
func NewDB(tb testing.TB) *postgres.DB {
	tb.Helper()
	db, err := postgres.Open(context.Background(), NewURL(tb))
	if err != nil {
		tb.Fatalf("open test database: %v", err)
	}
	tb.Cleanup(db.Close)
	return db
}

// migrator adapts schema.Migrate to pgtestdb: the template's name is a hash
// of the migration files, so a changed schema gets a new template.
type migrator struct{}

func (migrator) Hash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(schema.Migrations(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(schema.Migrations(), path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

func (migrator) Migrate(ctx context.Context, _ *sql.DB, c pgtestdb.Config) error {
	return schema.Migrate(ctx, c.URL())
}

// markVerifiedSQL is a fixture's shortcut past the verification email.
const markVerifiedSQL = `UPDATE users SET email_verified_at = now() WHERE id = ANY ($1::bigint[]) AND email_verified_at IS NULL`

// MarkVerified marks the users' addresses verified, as if each had followed
// the link of a verification email: a fixture for tests whose subject is
// not verification (the tests of verification follow the link). It fails
// tb unless every user exists.
func MarkVerified(tb testing.TB, db *postgres.DB, userIDs ...int64) {
	tb.Helper()
	tag, err := db.Pool().Exec(context.Background(), markVerifiedSQL, userIDs)
	if err != nil {
		tb.Fatalf("mark users %v verified: %v", userIDs, err)
	}
	if int(tag.RowsAffected()) != len(userIDs) {
		tb.Fatalf("mark users %v verified: %d of them updated", userIDs, tag.RowsAffected())
	}
}
