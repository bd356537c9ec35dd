package jobboard

import (
	"context"
	"time"
)

// LoginPolicy says how repeated failed attempts under one key (see
// ThrottleKey) are slowed down: the FreeAttempts-th consecutive failure
// blocks the key for BaseDelay, each further one for twice as long as the
// one before, at most MaxDelay. A failure more than ResetAfter after the
// previous one starts the count anew.
type LoginPolicy struct {
	FreeAttempts int
	BaseDelay    time.Duration
	MaxDelay     time.Duration
	ResetAfter   time.Duration
}

// Delay is how long an account stays blocked after its n-th consecutive
// failure: zero while n < FreeAttempts.
func (p LoginPolicy) Delay(n int) time.Duration {
	over := n - p.FreeAttempts + 1
	if over <= 0 {
		return 0
	}
	d := p.BaseDelay
	for i := 1; i < over && d < p.MaxDelay; i++ {
		d *= 2
	}
	return min(d, p.MaxDelay)
}

// Delays returns Delay(1), Delay(2), ... up to the first n whose delay is
// MaxDelay (at most 64 of them): Delay of any larger n is the last one.
func (p LoginPolicy) Delays() []time.Duration {
	var ds []time.Duration
	for n := 1; n <= 64; n++ {
		d := p.Delay(n)
		ds = append(ds, d)
		if d >= p.MaxDelay {
			break
		}
	}
	return ds
}

// ThrottleKey is one count of attempts: what is counted, and the policy
// that blocks it.
type ThrottleKey struct {
	// Digest names what is counted, without keeping it in clear: a digest
	// of an (account, client) pair, or of a client alone.
	Digest []byte
	Policy LoginPolicy
	// Shared marks a count that many accounts share (a client's): a success
	// takes back its own attempt but does not forget the others' failures,
	// so that an attacker cannot wipe the count by signing in to their own
	// account between guesses.
	Shared bool
}

// LoginThrottle keeps counts of attempts, such as logins, per key (see
// ThrottleKey); the same counts back other requests that an attacker could
// repeat to guess or probe, such as registrations that find the address
// taken.
type LoginThrottle interface {
	// LoginAttempt counts an attempt at now under each key in order (one
	// or two), as a failure until LoginSucceeded says otherwise, and blocks
	// each for its policy's Delay of the consecutive failures — but it
	// stops at the first key that is blocked at now: that key and those
	// after it count nothing, and it returns how long that block lasts.
	// The keys before it have counted the attempt. The check and the count
	// of a key are one step, so that attempts made at the same time cannot
	// all pass the check before any of them is counted. It returns only
	// storage errors.
	LoginAttempt(ctx context.Context, now time.Time, keys ...ThrottleKey) (blocked time.Duration, err error)
	// LoginSucceeded records that the attempt counted under keys
	// succeeded: it forgets the failures of every key that is not Shared,
	// and takes the one attempt back from every Shared key. It returns only
	// storage errors.
	LoginSucceeded(ctx context.Context, keys ...ThrottleKey) error
	// LoginUndecided takes the attempt counted under keys back from every
	// key: it was never decided (the server was too busy to check the
	// password), so it counts neither way. A block it set stays. It
	// returns only storage errors.
	LoginUndecided(ctx context.Context, keys ...ThrottleKey) error
}
