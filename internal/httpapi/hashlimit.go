package httpapi

import (
	"context"
	"fmt"
	"time"
)

// DefaultPasswordHashWait is how long a request waits for an argon2id slot
// unless Config says otherwise; then it answers 503 with Retry-After. A
// hash takes some 20–50 ms, so a second's wait serves a queue of a few
// dozen per slot.
const DefaultPasswordHashWait = time.Second

// hashMemoryShare is the share of the memory available that password
// hashing may take, and hashGCFactor what one hash costs in memory, in
// multiples of its argon2id memory: its block array is garbage as soon as
// the hash is done, and the collector lets the heap grow to about twice
// what is live before it reclaims it.
const (
	hashMemoryShare = 4 // a quarter
	hashGCFactor    = 2
)

// PasswordHashConcurrency is the default number of argon2id computations
// that may run at once: one per core (a hash is pure CPU, so more at once
// would only make each slower), fewer when a quarter of memoryBytes cannot
// hold that many hashes with p's memory (counting the collector's headroom),
// and at least one. memoryBytes ≤ 0 means unknown: cores alone decide.
func PasswordHashConcurrency(cores int, memoryBytes int64, p PasswordParams) int {
	n := max(cores, 1)
	if memoryBytes > 0 && p.MemoryKiB > 0 {
		perHash := int64(p.MemoryKiB) << 10 * hashGCFactor
		n = min(n, int(memoryBytes/hashMemoryShare/perHash))
	}
	return max(n, 1)
}

// hashLimiter bounds the argon2id computations running at once: each takes
// p.MemoryKiB of memory (19 MiB by default) and a core for tens of
// milliseconds, so a burst of registrations or logins left unbounded takes
// gigabytes. Beyond the bound a request waits up to wait for a slot, then
// is refused (errHashBusy) rather than queue without end.
type hashLimiter struct {
	slots chan struct{}
	wait  time.Duration
}

func newHashLimiter(n int, wait time.Duration) hashLimiter {
	return hashLimiter{slots: make(chan struct{}, max(n, 1)), wait: wait}
}

// busyError refuses a request because the server is at capacity: 503 with
// Retry-After.
type busyError struct {
	retryAfter time.Duration
}

func (e *busyError) Error() string {
	return fmt.Sprintf("every password hashing slot is taken; retry after %s", e.retryAfter)
}

// errHashBusy: no argon2id slot came free within the wait.
var errHashBusy = &busyError{retryAfter: time.Second}

// run runs fn, an argon2id computation, in a slot: at once when one is
// free, else after waiting at most the limiter's wait. Errors: errHashBusy
// when none came free in time, the context's error when the request ended
// first. fn does not run then.
func (l hashLimiter) run(ctx context.Context, fn func()) error {
	select {
	case l.slots <- struct{}{}:
	default:
		t := time.NewTimer(l.wait)
		defer t.Stop()
		select {
		case l.slots <- struct{}{}:
		case <-t.C:
			return errHashBusy
		case <-ctx.Done():
			return fmt.Errorf("wait for a password hashing slot: %w", ctx.Err())
		}
	}
	defer func() { <-l.slots }()
	fn()
	return nil
}
