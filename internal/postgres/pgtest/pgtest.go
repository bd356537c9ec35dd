// Package pgtest gives each test a fresh, migrated PostgreSQL database,
// cloned from a template that is migrated once per schema version (this takes
// milliseconds per test, not the cost of a migration).
//
// The server is the one named by TEST_DATABASE_URL, else DATABASE_URL, else
// postgres://postgres@127.0.0.1:5432/postgres. The test harness
// (.ci/with-postgres.sh) sets DATABASE_URL when it starts a throwaway
// cluster. This is the one package outside main that reads the environment:
// it only ever runs inside tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver that pgtestdb opens
	"github.com/jackc/tern/v2/migrate"
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

// NewEmptyURL creates an empty database (no schema at all, as a new
// deployment's) for tb, drops it when tb ends, and returns its URL.
func NewEmptyURL(tb testing.TB) string {
	tb.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		tb.Fatalf("connect to the test server: %v", err)
	}
	defer admin.Close(ctx)
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	name := "empty_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		tb.Fatalf("create database %s: %v", name, err)
	}
	tb.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), ServerURL())
		if err != nil {
			tb.Errorf("drop database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(ServerURL())
	if err != nil {
		tb.Fatalf("parse server url: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// CheckMigrated fails tb unless the database at url has the schema's main
// tables: what a migration of an empty database must leave behind.
func CheckMigrated(tb testing.TB, url string) {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatalf("connect to %s: %v", url, err)
	}
	defer conn.Close(ctx)
	var tables int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_name IN ('users', 'jobs', 'applications', 'outbox')`).Scan(&tables)
	if err != nil || tables != 4 {
		tb.Errorf("the schema's main tables: %d of 4 (%v)", tables, err)
	}
}

// MigrateTo applies the embedded migrations to the database at url up to
// version, and no further: the schema of an earlier release, which a
// deploy's new migrations find.
func MigrateTo(tb testing.TB, url string, version int32) {
	tb.Helper()
	ctx := context.Background()
	conn, err := Pool(tb, url).Acquire(ctx)
	if err != nil {
		tb.Fatalf("connect to %s: %v", url, err)
	}
	defer conn.Release()
	m, err := migrate.NewMigrator(ctx, conn.Conn(), "schema_version")
	if err == nil {
		err = m.LoadMigrations(schema.Migrations())
	}
	if err == nil {
		err = m.MigrateTo(ctx, version)
	}
	if err != nil {
		tb.Fatalf("migrate to version %d: %v", version, err)
	}
}

// EmbeddedMigrations is the number of migrations the build embeds: the
// schema version a migrated database has.
func EmbeddedMigrations(tb testing.TB) int32 {
	tb.Helper()
	files, err := fs.Glob(schema.Migrations(), "*.sql")
	if err != nil || len(files) == 0 {
		tb.Fatalf("embedded migrations: %v, %v", files, err)
	}
	return int32(len(files))
}

// SchemaVersion is the schema version of the database at url: the number
// of migrations applied to it, 0 when nothing ever migrated it.
func SchemaVersion(tb testing.TB, url string) int32 {
	tb.Helper()
	ctx := context.Background()
	pool := Pool(tb, url)
	var version int32
	var migrated bool
	err := pool.QueryRow(ctx, `SELECT to_regclass('schema_version') IS NOT NULL`).Scan(&migrated)
	if err == nil && migrated {
		err = pool.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&version)
	}
	if err != nil {
		tb.Fatalf("schema version of %s: %v", url, err)
	}
	return version
}

// DB is a test's fresh database: the store over it, and Pool, a raw pool
// over the same database for what a test does behind the store's back
// (ageing rows, counting them, injecting states that the store never
// makes). The store itself has no such door: code outside tests reaches the
// database only through its methods.
type DB struct {
	*postgres.DB
	Pool *pgxpool.Pool
	URL  string
}

// NewDB returns a store over a fresh migrated database, with a raw pool
// over it, both closed when tb ends.
func NewDB(tb testing.TB) *DB {
	tb.Helper()
	return Open(tb, NewURL(tb))
}

// Open returns a store over the database at url, with a raw pool over it,
// both closed when tb ends; options adjust the store's pool as they do
// postgres.Open's (the raw pool keeps the URL's settings). It fails tb if
// the database does not answer.
//
// TEST_DATABASE_QUERY_EXEC_MODE, when set, is the store's query exec mode
// (as DATABASE_QUERY_EXEC_MODE is the functions'; options may still choose
// another), so that the store's tests can run in the mode that a
// connection proxy needs. A store whose mode prepares no named statement
// (any but cache_statement) is also held to that: as its pool closes each
// connection, the server must list no named prepared statement for it, or
// tb fails.
func Open(tb testing.TB, url string, options ...func(*pgxpool.Config)) *DB {
	tb.Helper()
	if name := os.Getenv("TEST_DATABASE_QUERY_EXEC_MODE"); name != "" {
		mode, err := postgres.ParseQueryExecMode(name)
		if err != nil {
			tb.Fatalf("TEST_DATABASE_QUERY_EXEC_MODE: %v", err)
		}
		options = append([]func(*pgxpool.Config){postgres.WithQueryExecMode(mode)}, options...)
	}
	options = append(options, noNamedStatements(tb))
	db, err := postgres.Open(context.Background(), url, options...)
	if err != nil {
		tb.Fatalf("open test database: %v", err)
	}
	tb.Cleanup(db.Close)
	return &DB{DB: db, Pool: Pool(tb, url), URL: url}
}

// Pool returns a raw pool over the database at url, closed when tb ends;
// options adjust its configuration as they do postgres.Open's. It connects
// at its first use, and fails tb if the URL does not parse.
func Pool(tb testing.TB, url string, options ...func(*pgxpool.Config)) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		tb.Fatalf("parse database url: %v", err)
	}
	for _, o := range options {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("create pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// noNamedStatements fails tb when the pool closes a connection whose mode
// prepares no named statement (any but cache_statement) and the server
// lists a named prepared statement for it.
func noNamedStatements(tb testing.TB) func(*pgxpool.Config) {
	return func(c *pgxpool.Config) {
		c.BeforeClose = func(conn *pgx.Conn) {
			if conn.Config().DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			rows, _ := conn.Query(ctx, "SELECT name FROM pg_prepared_statements")
			names, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err == nil && len(names) > 0 {
				tb.Errorf("a connection in query exec mode %v holds named prepared statements: %v",
					conn.Config().DefaultQueryExecMode, names)
			}
		}
	}
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
	if err := ensureRoles(ctx); err != nil {
		return err
	}
	return schema.Migrate(ctx, c.URL())
}

// markVerifiedSQL is a fixture's shortcut past the verification email.
const markVerifiedSQL = `UPDATE users SET email_verified_at = now() WHERE id = ANY ($1::bigint[]) AND email_verified_at IS NULL`

// MarkVerified marks the users' addresses verified, as if each had followed
// the link of a verification email: a fixture for tests whose subject is
// not verification (the tests of verification follow the link). It fails
// tb unless every user exists.
func MarkVerified(tb testing.TB, pool *pgxpool.Pool, userIDs ...int64) {
	tb.Helper()
	tag, err := pool.Exec(context.Background(), markVerifiedSQL, userIDs)
	if err != nil {
		tb.Fatalf("mark users %v verified: %v", userIDs, err)
	}
	if int(tag.RowsAffected()) != len(userIDs) {
		tb.Fatalf("mark users %v verified: %d of them updated", userIDs, tag.RowsAffected())
	}
}
