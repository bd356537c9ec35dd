package jobboard

import (
	"context"
	"time"
)

// LoginPolicy says how repeated failed logins to one account are slowed
// down: the FreeAttempts-th consecutive failure blocks the account for
// BaseDelay, each further one for twice as long as the one before, at most
// MaxDelay. A failure more than ResetAfter after the previous one starts the
// count anew.
type LoginPolicy struct {
	FreeAttempts int
	BaseDelay    time.Duration
	MaxDelay     time.Duration
	ResetAfter   time.Duration
}

// DefaultLoginPolicy is five failures, then blocks of 1 s, 2 s, 4 s ... up to
// 15 minutes; a day without failures forgets them. The cap bounds how long
// someone who knows an email can lock its owner out.
var DefaultLoginPolicy = LoginPolicy{FreeAttempts: 5, BaseDelay: time.Second, MaxDelay: 15 * time.Minute, ResetAfter: 24 * time.Hour}

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

// LoginThrottle keeps the count of login attempts per account key (a
// digest of the normalised email, whether or not an account has it).
type LoginThrottle interface {
	// LoginAttempt counts an attempt to log in with key at now, as a
	// failure until LoginSucceeded forgets it, and blocks the key for
	// p.Delay(consecutive attempts) — unless the key is blocked at now:
	// then it counts nothing and returns how long the block lasts. The
	// check and the count are one step, so that attempts made at the same
	// time cannot all pass the check before any of them is counted. It
	// returns only storage errors.
	LoginAttempt(ctx context.Context, key []byte, now time.Time, p LoginPolicy) (blocked time.Duration, err error)
	// LoginSucceeded forgets the key's failures. It returns only storage
	// errors.
	LoginSucceeded(ctx context.Context, key []byte) error
}

// LoginFailureRetention forgets failed logins that no longer count.
type LoginFailureRetention interface {
	// DeleteOldLoginFailures deletes the counts of keys whose last failure
	// is older than olderThan and that are not blocked, at most batch rows
	// per statement, and returns how many it deleted. Errors: database
	// errors.
	DeleteOldLoginFailures(ctx context.Context, olderThan time.Duration, batch int) (int64, error)
}
