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

// LoginThrottle keeps the count of failed logins per account key (a digest
// of the normalised email, whether or not an account has it).
type LoginThrottle interface {
	// LoginBlocked returns how long logins with key remain refused at now
	// (zero: not blocked). It returns only storage errors.
	LoginBlocked(ctx context.Context, key []byte, now time.Time) (time.Duration, error)
	// LoginFailed records a failure at now and blocks the key for
	// p.Delay(consecutive failures). It returns only storage errors.
	LoginFailed(ctx context.Context, key []byte, now time.Time, p LoginPolicy) error
	// LoginSucceeded forgets the key's failures. It returns only storage
	// errors.
	LoginSucceeded(ctx context.Context, key []byte) error
}
