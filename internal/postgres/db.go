package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// DB is the job board's store over a pgx connection pool. It implements the
// store interfaces of package jobboard.
type DB struct {
	pool *pgxpool.Pool
	// functions tells a pool whose mode sends no named prepared statement
	// (every mode but cache_statement): it calls the hot statements' PL/pgSQL
	// functions (migration 014), whose plans PostgreSQL caches per database
	// session, rather than sending them to be parsed and planned on every
	// request. A pool that prepares named statements runs the statements
	// themselves, whose generic plans it keeps per connection.
	functions bool
}

// Open connects a pool to the database at url. Options adjust the pool
// configuration before it connects (e.g. session parameters for the worker).
// It returns an error if the URL is invalid or the database does not answer.
func Open(ctx context.Context, url string, options ...func(*pgxpool.Config)) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	for _, o := range options {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("create pool: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("ping database: %w", err)
	}
	return &DB{pool: pool, functions: cfg.ConnConfig.DefaultQueryExecMode != pgx.QueryExecModeCacheStatement}, nil
}

// WithStatementTimeout makes the server cancel any statement of the pool
// that runs longer than d (PostgreSQL's statement_timeout, set for every
// connection as it opens). Such a statement fails with an error matching
// jobboard.ErrTimeout. Zero or less leaves the server's setting.
func WithStatementTimeout(d time.Duration) func(*pgxpool.Config) {
	return func(c *pgxpool.Config) {
		if d > 0 {
			c.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(max(d.Milliseconds(), 1), 10)
		}
	}
}

// queryExecModes are pgx's query exec modes by the names its connection
// strings give them (default_query_exec_mode).
var queryExecModes = []struct {
	name string
	mode pgx.QueryExecMode
}{
	{"cache_statement", pgx.QueryExecModeCacheStatement},
	{"cache_describe", pgx.QueryExecModeCacheDescribe},
	{"describe_exec", pgx.QueryExecModeDescribeExec},
	{"exec", pgx.QueryExecModeExec},
	{"simple_protocol", pgx.QueryExecModeSimpleProtocol},
}

// ParseQueryExecMode returns the pgx query exec mode that name names
// (cache_statement, cache_describe, describe_exec, exec or simple_protocol,
// pgx's own names), or zero when name is empty: then WithQueryExecMode
// leaves the pool the mode of its URL, else pgx's default, cache_statement
// (named prepared statements, cached per connection). Errors: a name that
// is not a mode.
func ParseQueryExecMode(name string) (pgx.QueryExecMode, error) {
	if name == "" {
		return 0, nil
	}
	names := make([]string, len(queryExecModes))
	for i, m := range queryExecModes {
		if name == m.name {
			return m.mode, nil
		}
		names[i] = m.name
	}
	return 0, fmt.Errorf("unknown query exec mode %q: want one of %s", name, strings.Join(names, ", "))
}

// WithQueryExecMode makes m the way the pool's connections send
// statements. Behind a connection proxy that multiplexes connections, such
// as RDS Proxy, a named prepared statement is session state that ties the
// client's connection to one server connection (pins it); every mode but
// cache_statement sends none (see docs/performance.md). Zero leaves the
// mode of the URL (default_query_exec_mode), else pgx's default.
func WithQueryExecMode(m pgx.QueryExecMode) func(*pgxpool.Config) {
	return func(c *pgxpool.Config) {
		if m != 0 {
			c.ConnConfig.DefaultQueryExecMode = m
		}
	}
}

// Close closes the pool.
func (db *DB) Close() { db.pool.Close() }

// Ping checks that the database answers. It returns the driver's error.
func (db *DB) Ping(ctx context.Context) error { return db.pool.Ping(ctx) }

// querier is what both the pool and a transaction offer, so that private
// helpers can run inside or outside a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// inTx runs fn in a transaction: committed when fn returns nil, rolled back
// when it returns an error. The commit's own error is returned, never dropped.
func (db *DB) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, db.pool, fn)
}

// SQLSTATE codes this package recognises.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
	lockNotAvailable    = "55P03"
	queryCanceled       = "57014"
)

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// timeout marks a statement that the server cancelled (SQLSTATE 57014) as
// jobboard.ErrTimeout. The server cancels a statement for statement_timeout
// and when pgx asks it to because ctx ended; the latter stays a context
// error, since the client went away and nobody is waiting for an answer.
func timeout(ctx context.Context, err error) error {
	if pgCode(err) == queryCanceled && ctx.Err() == nil {
		return fmt.Errorf("%w: %w", jobboard.ErrTimeout, err)
	}
	return err
}

// notFound turns pgx.ErrNoRows into jobboard.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return jobboard.ErrNotFound
	}
	return err
}
