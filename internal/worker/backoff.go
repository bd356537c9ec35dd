package worker

import (
	"math/rand/v2"
	"time"
)

// retryClass is the kind of backoff a failed record gets before its next
// delivery.
type retryClass int

// The backoffs. With an exponential backoff a record is received more often
// than with the visibility timeout alone, so the queue's maxReceiveCount
// (10 in template.yaml) is set from these numbers: a record throttled on
// every receive reaches the dead-letter queue after the sum of its first
// nine backoffs, 26 to 51 minutes, and a record of a paused account after
// 2¼ to 4½ hours; the dead-letter queue then keeps it 14 days for a redrive.
const (
	// retrySoon: a send or the database failed, or the record was not
	// started. 2 s doubling to at most 5 minutes.
	retrySoon retryClass = iota
	// retryThrottled: the mail service asked us to slow down. 10 s doubling
	// to at most 15 minutes.
	retryThrottled
	// retryPaused: the account cannot send until someone acts. 15 to 30
	// minutes each time, the longest backoff.
	retryPaused
	// retryBusy: another worker holds the claim; retry once its lease ends.
	retryBusy
	// retryOrder: another worker is emailing an older status of the same
	// application. As retrySoon (that email is usually recorded within
	// moments), but never later than that lease's end.
	retryOrder
	// retryNow: the message can never be processed (malformed); let it
	// burn its receives at once and reach the dead-letter queue in seconds,
	// body intact, instead of after maxReceiveCount visibility timeouts.
	retryNow
)

// backoffs are the base and the cap of the exponential classes.
var backoffs = map[retryClass]struct{ base, limit time.Duration }{
	retrySoon:      {2 * time.Second, 5 * time.Minute},
	retryThrottled: {10 * time.Second, 15 * time.Minute},
	retryPaused:    {30 * time.Minute, 30 * time.Minute},
}

// backoff returns how long a record failed on its receiveCount-th receive
// waits before its next delivery. Exponential classes use "equal jitter":
// half the step plus a random part of the other half, so retries of a
// throttled batch spread out without ever coming back at once.
func backoff(c retryClass, receiveCount int, busyFor time.Duration, jitter func() float64) time.Duration {
	switch c {
	case retryNow:
		return 0
	case retryBusy:
		return busyFor + time.Second + time.Duration(jitter()*float64(time.Second))
	case retryOrder:
		return min(backoff(retrySoon, receiveCount, 0, jitter), backoff(retryBusy, receiveCount, busyFor, jitter))
	}
	b := backoffs[c]
	step := b.limit
	if n := receiveCount - 1; n < 30 {
		step = min(b.limit, b.base<<max(n, 0))
	}
	return step/2 + time.Duration(jitter()*float64(step/2))
}

func defaultJitter() float64 { return rand.Float64() }
