package jobboard

import (
	"context"
	"errors"
	"time"
)

// IdempotencyKeyTTL is how long the answer to a keyed write is kept and
// replayed to retries with the same key. After it, the sweeper deletes the
// answer and the key may be used again.
const IdempotencyKeyTTL = 24 * time.Hour

// ErrIdempotencyKeyInUse means that another request with the same
// idempotency key is still running (its transaction holds the key). Retry
// later: once it has finished, the retry gets its answer.
var ErrIdempotencyKeyInUse = errors.New("a request with this idempotency key is still in progress")

// IdempotentRequest identifies one keyed write: who sent it, the key they
// chose, and a fingerprint of the request (method, path, body, …) that a
// retry must repeat exactly.
type IdempotentRequest struct {
	// Scope keeps the keys of different callers apart: one user's key never
	// finds another user's answer.
	Scope       string
	Key         string
	Fingerprint []byte
}

// StoredResponse is the answer recorded for a keyed write, replayed to its
// retries.
type StoredResponse struct {
	// Fingerprint is the fingerprint of the request that was answered.
	Fingerprint []byte
	Status      int
	// Header holds the response header fields worth replaying (Location,
	// ETag, Content-Type).
	Header map[string]string
	Body   []byte
}

// IdempotencyStore keeps the answers of keyed writes, each committed in the
// same transaction as the write it answers for.
type IdempotencyStore interface {
	// StoredResponse returns the answer stored under scope and key within
	// the last IdempotencyKeyTTL. Errors: ErrNotFound.
	StoredResponse(ctx context.Context, scope, key string) (StoredResponse, error)
	// BeginIdempotent starts a keyed write. The store methods called with
	// the returned context write in one transaction, begun at their first
	// write (so that work before it, such as hashing a password, holds no
	// transaction), and the returned IdempotentWrite commits that
	// transaction together with the answer, or rolls it back. A store
	// method that begins the transaction fails with ErrIdempotencyKeyInUse
	// when another request holds the key or has stored an answer under it
	// since it was looked up.
	BeginIdempotent(ctx context.Context, req IdempotentRequest) (context.Context, IdempotentWrite)
}

// IdempotentWrite ends a keyed write begun by BeginIdempotent. After either
// method, the context of BeginIdempotent writes outside any transaction
// again.
type IdempotentWrite interface {
	// Commit stores the answer under the request's key and commits it with
	// the writes made so far, or alone when there were none. Errors:
	// ErrIdempotencyKeyInUse (nothing is committed), the commit's error.
	Commit(ctx context.Context, answer StoredResponse) error
	// Rollback undoes the writes made so far. It does nothing after Commit.
	Rollback(ctx context.Context)
}

// IdempotencyKeyRetention deletes the answers of expired idempotency keys.
type IdempotencyKeyRetention interface {
	// DeleteExpiredIdempotencyKeys deletes answers stored more than
	// olderThan ago, at most batch rows per statement, and returns how many
	// it deleted. Errors: database errors.
	DeleteExpiredIdempotencyKeys(ctx context.Context, olderThan time.Duration, batch int) (int64, error)
}
