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
	// KeyedWrite runs fn with the Writes of one keyed write: they write in
	// one transaction, begun at the first of them (so that work before it,
	// such as hashing a password, holds no transaction), which commits
	// together with the answer fn returns. When fn returns an error or no
	// answer (nil), everything rolls back and nothing is stored. The
	// Writes are fn's alone: used after fn returns they fail. Errors: fn's;
	// ErrIdempotencyKeyInUse, from the first write or the commit, when
	// another request holds the key or has stored an answer under it since
	// it was looked up (nothing is committed); the commit's error.
	KeyedWrite(ctx context.Context, req IdempotentRequest, fn func(Writes) (*StoredResponse, error)) error
}

// Writes are every write that a POST or PATCH handler makes, handed to it
// explicitly: the store's own, each committing on its own, or those of a
// keyed write, all in its transaction. The reads stay with the stores; no
// handler can write around the transaction it was given.
type Writes interface {
	CompanyWrites
	JobWrites
	ApplicationWrites
	UserWrites
	WebhookWrites
	SuppressionWrites
}
