package jobboard

import (
	"context"
	"time"
)

// IdempotencyKeyTTL is how long the answer to a keyed write is kept and
// replayed to retries with the same key. After it, the sweeper deletes the
// answer and the key may be used again.
const IdempotencyKeyTTL = 24 * time.Hour

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

// WriteStore runs the writes of a request (POST, PATCH, DELETE) as one
// unit of work, hands back what the unit committed, and keeps the answers
// of keyed writes.
type WriteStore interface {
	// StoredResponse returns the answer stored under scope and key within
	// the last IdempotencyKeyTTL. Errors: ErrNotFound.
	StoredResponse(ctx context.Context, scope, key string) (StoredResponse, error)
	// Write runs fn with the Writes of one unit of work and returns the
	// events that the unit committed to the outbox (status events, webhook
	// deliveries, verification and password reset emails), in the order
	// written, for the relay to publish. They come back only once
	// committed: the unit collects them itself, and nothing else carries
	// them.
	//
	// With key, the writes share one transaction, begun at the first of
	// them (so that work before it, such as hashing a password, holds no
	// transaction), which commits together with the answer fn returns,
	// stored under key. When fn returns an error or no answer (nil),
	// everything rolls back, nothing is stored and no event is returned.
	//
	// Without key (nil), each write commits on its own as it returns, as
	// one statement or one short transaction, and fn's answer is not
	// stored; the events of the writes that committed are returned, fn's
	// error or not.
	//
	// The Writes are fn's alone: used after fn returns they fail. Errors:
	// fn's; with key, ErrIdempotencyKeyInUse, from the first write or the
	// commit, when another request holds the key or has stored an answer
	// under it since it was looked up (nothing is committed), and the
	// commit's error.
	Write(ctx context.Context, key *IdempotentRequest, fn func(Writes) (*StoredResponse, error)) ([]Event, error)
}

// Writes are every write that a request makes, handed to it by
// WriteStore.Write: each committing on its own, or all in the transaction
// of a keyed write. The reads stay with the stores; no handler can write
// around the unit of work it was given, and no write hands its events back
// other than through it. The login throttle's counts (LoginThrottle) are
// not among them: a failed attempt counts whatever becomes of the request.
type Writes interface {
	CompanyWrites
	JobWrites
	ApplicationWrites
	UserWrites
	PasswordResetWrites
	WebhookWrites
	SuppressionWrites
}
