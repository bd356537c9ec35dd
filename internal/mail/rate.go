package mail

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// RateRefresh is how long SendRate keeps the rate SES told before it asks
// again: SES raises an account's rate without notice, and a lowered rate
// shows as throttles until then.
const RateRefresh = 5 * time.Minute

// rateRetry is how long SendRate waits after SES failed to tell the rate
// before it asks again.
const rateRetry = 30 * time.Second

// SendRate tells the SES account's maximum send rate: a fixed one (the
// SES_MAX_SEND_RATE setting), or the SendQuota.MaxSendRate of SES v2's
// GetAccount (IAM ses:GetAccount), asked again every RateRefresh. It
// implements jobboard.SendRate and is safe for concurrent use.
type SendRate struct {
	client *sesv2.Client
	fixed  float64
	now    func() time.Time

	mu      sync.Mutex
	rate    float64
	askedAt time.Time
	err     error
}

var _ jobboard.SendRate = (*SendRate)(nil)

// NewSendRate returns the rate fixed if it is positive, and otherwise
// asks client.
func NewSendRate(client *sesv2.Client, fixed float64) *SendRate {
	return &SendRate{client: client, fixed: fixed, now: time.Now}
}

// MaxSendRate returns the account's maximum send rate in emails per
// second. When SES fails to tell it, the last rate it told is kept.
// Errors: SES has not told it yet, and failed to now.
func (r *SendRate) MaxSendRate(ctx context.Context) (float64, error) {
	if r.fixed > 0 {
		return r.fixed, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	fresh := r.err == nil && now.Sub(r.askedAt) < RateRefresh || r.err != nil && now.Sub(r.askedAt) < rateRetry
	if !r.askedAt.IsZero() && fresh {
		if r.rate > 0 {
			return r.rate, nil
		}
		return 0, r.err
	}
	r.askedAt = now
	out, err := r.client.GetAccount(ctx, &sesv2.GetAccountInput{})
	switch {
	case err != nil:
		r.err = fmt.Errorf("get SES account's send rate: %w", err)
	case out.SendQuota == nil || out.SendQuota.MaxSendRate <= 0:
		r.err = errors.New("get SES account's send rate: no MaxSendRate in the answer")
	default:
		r.rate, r.err = out.SendQuota.MaxSendRate, nil
	}
	if r.rate > 0 {
		return r.rate, nil
	}
	return 0, r.err
}
