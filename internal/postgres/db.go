package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// DB is the job board's store over a pgx connection pool. It implements the
// store interfaces of package jobboard.
type DB struct {
	pool *pgxpool.Pool
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
	return &DB{pool: pool}, nil
}

// Pool returns the underlying pool, for tests and health checks.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

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
// Inside a keyed write (see idempotency.go) fn runs in that write's
// transaction instead, which its IdempotentWrite commits or rolls back as a
// whole; an error of fn then fails the whole write.
func (db *DB) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if w := db.idempotentWriteIn(ctx); w != nil {
		tx, err := w.begin(ctx)
		if err != nil {
			return err
		}
		return fn(tx)
	}
	return pgx.BeginFunc(ctx, db.pool, fn)
}

// SQLSTATE codes this package recognises.
const (
	uniqueViolation     = "23505"
	foreignKeyViolation = "23503"
	lockNotAvailable    = "55P03"
	duplicateDatabase   = "42P04"
)

// pgCode returns the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// notFound turns pgx.ErrNoRows into jobboard.ErrNotFound.
func notFound(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return jobboard.ErrNotFound
	}
	return err
}
