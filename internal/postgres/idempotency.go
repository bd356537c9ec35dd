package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var (
	_ jobboard.IdempotencyStore = (*DB)(nil)
	_ jobboard.Writes           = (*DB)(nil)
)

// ttlSeconds is jobboard.IdempotencyKeyTTL as the statements take it.
var ttlSeconds = jobboard.IdempotencyKeyTTL.Seconds()

const storedResponseSQL = `
SELECT fingerprint, status, header, body
FROM idempotency_keys
WHERE scope = $1 AND key = $2 AND created_at > now() - make_interval(secs => $3)`

// StoredResponse returns the answer stored under scope and key within the
// key's lifetime. Errors: jobboard.ErrNotFound, database errors.
func (db *DB) StoredResponse(ctx context.Context, scope, key string) (jobboard.StoredResponse, error) {
	var a jobboard.StoredResponse
	err := db.pool.QueryRow(ctx, storedResponseSQL, scope, key, ttlSeconds).
		Scan(&a.Fingerprint, &a.Status, &a.Header, &a.Body)
	if err != nil {
		return jobboard.StoredResponse{}, fmt.Errorf("stored answer of idempotency key: %w", notFound(err))
	}
	return a, nil
}

var _ jobboard.Writes = (*keyedWrite)(nil)

// keyedWrite is the store a keyed write's callback gets: its write methods
// share one transaction, begun lazily by the first of them (so that work
// before it, such as hashing a password, holds none) and ended by
// KeyedWrite. It has no other way to the database. One request's handler
// uses it from one goroutine.
type keyedWrite struct {
	writes
	db  *DB
	req jobboard.IdempotentRequest
	tx  pgx.Tx
	// ended is set when KeyedWrite returns: a store kept past its callback
	// writes nowhere.
	ended bool
}

// errKeyedWriteEnded is the error of a write through a keyed write's store
// after its callback returned.
var errKeyedWriteEnded = errors.New("keyed write: used after its callback returned")

// KeyedWrite runs fn with the store of one keyed write (see
// jobboard.IdempotencyStore): its writes share a transaction, begun at the
// first of them, that commits together with the answer fn returns, or rolls
// back when fn returns an error or no answer. Errors: fn's,
// jobboard.ErrIdempotencyKeyInUse, database errors (the commit's included);
// on any error nothing is committed.
func (db *DB) KeyedWrite(ctx context.Context, req jobboard.IdempotentRequest, fn func(jobboard.Writes) (*jobboard.StoredResponse, error)) error {
	w := &keyedWrite{db: db, req: req}
	w.writes = writes{w}
	defer w.rollback(ctx)
	a, err := fn(w)
	if err != nil || a == nil {
		return err
	}
	return w.commit(ctx, *a)
}

func (w *keyedWrite) writer(ctx context.Context) (querier, error) { return w.begin(ctx) }

// inTx runs fn in the keyed write's transaction, which KeyedWrite commits
// or rolls back as a whole; an error of fn fails the whole write.
func (w *keyedWrite) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := w.begin(ctx)
	if err != nil {
		return err
	}
	return fn(tx)
}

// idempotencyLockClass is the first half of the two-key advisory locks on
// idempotency keys; the second is a hash of scope and key. The two-key
// space does not overlap tern's one-key migration lock.
const idempotencyLockClass = 10

// claimIdempotencyKeySQL tries, without waiting, the transaction-scoped
// advisory lock of the key, and tells whether an answer is stored under it.
// A request that finds the lock taken answers "in progress" (409) rather
// than queueing behind the first. The primary key remains the guard: two
// distinct keys whose hashes collide only make one of them wait for a retry.
const claimIdempotencyKeySQL = `
SELECT pg_try_advisory_xact_lock($1, hashtext($2 || ' ' || $3)),
	EXISTS (SELECT 1 FROM idempotency_keys
		WHERE scope = $2 AND key = $3 AND created_at > now() - make_interval(secs => $4))`

// begin starts the transaction on the first write and claims the key.
// Errors: jobboard.ErrIdempotencyKeyInUse when another transaction holds the
// key or an answer has been stored under it meanwhile; database errors.
func (w *keyedWrite) begin(ctx context.Context) (pgx.Tx, error) {
	if w.ended {
		return nil, errKeyedWriteEnded
	}
	if w.tx != nil {
		return w.tx, nil
	}
	tx, err := w.db.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin idempotent write: %w", err)
	}
	var locked, answered bool
	err = tx.QueryRow(ctx, claimIdempotencyKeySQL, idempotencyLockClass, w.req.Scope, w.req.Key, ttlSeconds).
		Scan(&locked, &answered)
	switch {
	case err != nil:
		err = fmt.Errorf("claim idempotency key: %w", err)
	case !locked || answered:
		err = fmt.Errorf("claim idempotency key: %w", jobboard.ErrIdempotencyKeyInUse)
	}
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx)) // the claim's error is the one to report
		return nil, err
	}
	w.tx = tx
	return tx, nil
}

// storeAnswerSQL inserts the answer, or replaces one whose key has expired
// but is not yet swept. A live answer is never replaced: no row comes back.
// The header ($5) is JSON text: in the query exec modes that do not ask the
// server for the parameters' types (exec, simple_protocol), pgx cannot
// tell which type a map is for.
const storeAnswerSQL = `
INSERT INTO idempotency_keys AS k (scope, key, fingerprint, status, header, body)
VALUES ($1, $2, $3, $4, $5::jsonb, $6)
ON CONFLICT (scope, key) DO UPDATE
SET fingerprint = EXCLUDED.fingerprint, status = EXCLUDED.status, header = EXCLUDED.header,
	body = EXCLUDED.body, created_at = EXCLUDED.created_at
WHERE k.created_at <= now() - make_interval(secs => $7)`

// commit stores the answer and commits it with the writes. Errors:
// jobboard.ErrIdempotencyKeyInUse, database errors (the commit's included);
// on any error nothing is committed.
func (w *keyedWrite) commit(ctx context.Context, a jobboard.StoredResponse) error {
	tx, err := w.begin(ctx)
	if err != nil {
		return err
	}
	header := a.Header
	if header == nil {
		header = map[string]string{}
	}
	headerJSON, err := json.Marshal(header)
	if err != nil {
		return fmt.Errorf("store answer of idempotency key: %w", err)
	}
	body := a.Body
	if body == nil {
		body = []byte{} // an answer without a body (202) is stored as an empty one
	}
	tag, err := tx.Exec(ctx, storeAnswerSQL, w.req.Scope, w.req.Key, w.req.Fingerprint, a.Status, string(headerJSON), body, ttlSeconds)
	if err != nil {
		return fmt.Errorf("store answer of idempotency key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store answer of idempotency key: %w", jobboard.ErrIdempotencyKeyInUse)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit idempotent write: %w", err)
	}
	w.tx = nil
	return nil
}

// rollback ends the keyed write: it undoes the writes, if any and not
// committed, and makes the store refuse any later write.
func (w *keyedWrite) rollback(ctx context.Context) {
	w.ended = true
	if w.tx != nil {
		// A failed rollback leaves nothing committed: the connection is
		// closed and the server aborts the transaction.
		_ = w.tx.Rollback(context.WithoutCancel(ctx))
		w.tx = nil
	}
}
