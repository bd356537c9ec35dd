package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.WriteStore = (*DB)(nil)

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

var _ jobboard.Writes = (*unit)(nil)

// unit is one unit of work: the jobboard.Writes that Write hands its
// callback, and its only way to the database. Keyed, its writes share one
// transaction, begun lazily by the first of them (so that work before it,
// such as hashing a password, holds none) and ended by Write; unkeyed,
// each write commits on its own, as it does without any unit. Either way
// it collects the events its writes wrote to the outbox, which Write hands
// back once they are committed. One request's handler uses it from one
// goroutine.
type unit struct {
	db *DB
	// key is the keyed write's; nil for an unkeyed unit.
	key *jobboard.IdempotentRequest
	tx  pgx.Tx
	// events are those of the writes that succeeded, in order: committed
	// already when unkeyed, committed with tx when keyed.
	events []jobboard.Event
	// ended is set when Write returns: a unit kept past its callback
	// writes nowhere.
	ended bool
}

// errUnitEnded is the error of a write through a unit after its callback
// returned.
var errUnitEnded = errors.New("write: the unit of work was used after its callback returned")

// Write runs fn with one unit of work (see jobboard.WriteStore): keyed,
// its writes share a transaction, begun at the first of them, that commits
// together with the answer fn returns, or rolls back when fn returns an
// error or no answer; unkeyed, each commits on its own. It returns the
// events committed: keyed, none unless the commit succeeded. Errors: fn's,
// jobboard.ErrIdempotencyKeyInUse, database errors (the commit's
// included); on any error a keyed write commits nothing.
func (db *DB) Write(ctx context.Context, key *jobboard.IdempotentRequest, fn func(jobboard.Writes) (*jobboard.StoredResponse, error)) ([]jobboard.Event, error) {
	u := &unit{db: db, key: key}
	defer u.end(ctx)
	a, err := fn(u)
	if key == nil {
		return u.events, err
	}
	if err != nil || a == nil {
		return nil, err
	}
	if err := u.commit(ctx, *a); err != nil {
		return nil, err
	}
	return u.events, nil
}

// writer returns where a single write statement goes: the pool (the
// statement commits on its own) or the keyed write's transaction.
func (u *unit) writer(ctx context.Context) (querier, error) {
	switch {
	case u.ended:
		return nil, errUnitEnded
	case u.key == nil:
		return u.db.pool, nil
	}
	return u.begin(ctx)
}

// inTx runs fn in a transaction: one of its own, committed when fn
// returns nil (the commit's error is returned), or the keyed write's,
// which Write commits or rolls back as a whole (an error of fn fails the
// whole write).
func (u *unit) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	switch {
	case u.ended:
		return errUnitEnded
	case u.key == nil:
		return u.db.inTx(ctx, fn)
	}
	tx, err := u.begin(ctx)
	if err != nil {
		return err
	}
	return fn(tx)
}

// emit records events that a write has written, once it has succeeded.
func (u *unit) emit(evs ...jobboard.Event) { u.events = append(u.events, evs...) }

// emitPayloads records the outbox rows whose payloads a statement
// returned (emittedSQL), once it has succeeded. Errors: a payload that
// does not decode.
func (u *unit) emitPayloads(payloads []string) error {
	for _, p := range payloads {
		ev, err := jobboard.DecodeEvent([]byte(p))
		if err != nil {
			return fmt.Errorf("outbox row: %w", err)
		}
		u.emit(ev)
	}
	return nil
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

// begin starts the keyed write's transaction on its first write and claims
// the key. Errors: jobboard.ErrIdempotencyKeyInUse when another
// transaction holds the key or an answer has been stored under it
// meanwhile; database errors.
func (u *unit) begin(ctx context.Context) (pgx.Tx, error) {
	if u.ended {
		return nil, errUnitEnded
	}
	if u.tx != nil {
		return u.tx, nil
	}
	tx, err := u.db.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin idempotent write: %w", err)
	}
	var locked, answered bool
	err = tx.QueryRow(ctx, claimIdempotencyKeySQL, idempotencyLockClass, u.key.Scope, u.key.Key, ttlSeconds).
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
	u.tx = tx
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
func (u *unit) commit(ctx context.Context, a jobboard.StoredResponse) error {
	tx, err := u.begin(ctx)
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
	tag, err := tx.Exec(ctx, storeAnswerSQL, u.key.Scope, u.key.Key, u.key.Fingerprint, a.Status, string(headerJSON), body, ttlSeconds)
	if err != nil {
		return fmt.Errorf("store answer of idempotency key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("store answer of idempotency key: %w", jobboard.ErrIdempotencyKeyInUse)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit idempotent write: %w", err)
	}
	u.tx = nil
	return nil
}

// end ends the unit: it rolls a keyed write's transaction back, if any and
// not committed, and makes the unit refuse any later write.
func (u *unit) end(ctx context.Context) {
	u.ended = true
	if u.tx != nil {
		// A failed rollback leaves nothing committed: the connection is
		// closed and the server aborts the transaction.
		_ = u.tx.Rollback(context.WithoutCancel(ctx))
		u.tx = nil
	}
}
