package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/uuid"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Probe is what the retention probe did and saw.
type Probe struct {
	// Aged events: emailed once, then their claim, outbox row and
	// occurred_at moved back past the retention.
	Aged []string
	// ClaimsDeleted says the sweeper's retention deleted their claims.
	ClaimsDeleted bool
	// CopiesSent is how many copies of the aged events were delivered again.
	CopiesSent int
	// Expired counts the copies for which a worker logged outcome expired.
	Expired int
	// SecondEmails are aged events emailed again.
	SecondEmails []string
	// Stale are never-published outbox rows older than the retention.
	Stale []string
	// SweepsAfter counts the sweeps that ran after the stale rows were
	// inserted.
	SweepsAfter int
	// StalePublished (carried by a SendMessage or SendMessageBatch call to
	// SQS) and StaleEmailed must stay empty.
	StalePublished []string
	StaleEmailed   []string
	// StaleMarked counts the stale rows whose published_at is set: how the
	// sweeper puts a row aside is its own business, so this is only shown.
	StaleMarked int
}

// agedBy is how far back the probe moves things: one day past the
// retention.
const agedBy = retention + 24*time.Hour

// probeRetention ages cfg.ProbeEvents events that were emailed once and
// inserts cfg.ProbeStale stale outbox rows, waits for the sweeper to delete
// the aged claims, then delivers copies of the aged events (with their aged
// occurred_at) again. The caller settles and then judges with
// finishProbe.
func probeRetention(ctx context.Context, st *stack, rng *rand.Rand, emails map[string]int, committed map[string]int64, watch func(ids ...string)) (*Probe, error) {
	p := &Probe{}
	claims, err := st.db.sentClaims(ctx)
	if err != nil {
		return p, err
	}
	var candidates []string
	for _, id := range claims {
		if _, ok := committed[id]; ok && emails[id] == 1 {
			candidates = append(candidates, id)
		}
	}
	rng.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
	if len(candidates) < st.cfg.ProbeEvents {
		return p, fmt.Errorf("retention probe: only %d events were emailed exactly once, want %d", len(candidates), st.cfg.ProbeEvents)
	}
	var bodies []string
	for _, id := range candidates[:st.cfg.ProbeEvents] {
		payload, err := st.db.outboxPayload(ctx, id)
		if err != nil {
			return p, err
		}
		ev, err := jobboard.DecodeEvent(payload)
		if err != nil {
			return p, fmt.Errorf("retention probe: outbox payload of %s: %w", id, err)
		}
		ev.OccurredAt = ev.OccurredAt.Add(-agedBy)
		body, err := jobboard.EncodeEvent(ev)
		if err != nil {
			return p, err
		}
		if err := st.db.age(ctx, id, agedBy, body); err != nil {
			return p, err
		}
		p.Aged = append(p.Aged, id)
		bodies = append(bodies, string(body))
	}

	apps, err := st.db.applications(ctx, st.cfg.ProbeStale)
	if err != nil {
		return p, err
	}
	for i := range st.cfg.ProbeStale {
		id := uuid.NewString()
		watch(id) // before the row exists: the sweeper may publish it at once
		ev := jobboard.Event{
			Type: jobboard.EventTypeStatusChanged, EventID: id,
			OccurredAt:    time.Now().Add(-agedBy).UTC().Truncate(time.Microsecond),
			ApplicationID: apps[i%len(apps)], OldStatus: jobboard.StatusSubmitted, NewStatus: jobboard.StatusReviewing,
		}
		payload, err := jobboard.EncodeEvent(ev)
		if err != nil {
			return p, err
		}
		if err := st.db.insertStale(ctx, ev.EventID, ev.Type, payload, agedBy); err != nil {
			return p, err
		}
		p.Stale = append(p.Stale, ev.EventID)
	}

	// The sweeper's retention must delete the aged claims before the
	// copies arrive: that is the situation the worker must recognise.
	deadline := time.Now().Add(st.cfg.SettleTimeout)
	for time.Now().Before(deadline) {
		left, err := st.db.claimsLeft(ctx, p.Aged)
		if err == nil && left == 0 {
			p.ClaimsDeleted = true
			break
		}
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return p, err
		}
	}
	if !p.ClaimsDeleted {
		return p, fmt.Errorf("retention probe: the sweeper did not delete the aged claims within %v", st.cfg.SettleTimeout)
	}
	for _, body := range bodies {
		if _, err := st.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(st.queueURL), MessageBody: aws.String(body)}); err != nil {
			return p, fmt.Errorf("retention probe: deliver a copy: %w", err)
		}
		p.CopiesSent++
	}
	return p, nil
}

// waitForSweeps waits (at most timeout) until the sweeper has run n times
// since t, and returns how many times it did.
func waitForSweeps(ctx context.Context, st *stack, since time.Time, n int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		got, err := sweepsSince(st.fleet.instancesOf(roleSweeper), since)
		if err != nil {
			return 0, err
		}
		if got >= n || time.Now().After(deadline) {
			return got, nil
		}
		if err := pause(ctx, 200*time.Millisecond); err != nil {
			return got, err
		}
	}
}

// finishProbe compares the emails before (b) and after (c) the probe,
// reads what the workers logged about the copies, and takes the stale ids
// that were published (carried by a call to SQS).
func finishProbe(ctx context.Context, st *stack, p *Probe, b, c map[string]int, lines []recordLine, sentAt time.Time, published []string) error {
	aged := map[string]bool{}
	for _, id := range p.Aged {
		aged[id] = true
		if c[id] > b[id] {
			p.SecondEmails = append(p.SecondEmails, id)
		}
	}
	expired := map[string]bool{}
	for _, l := range lines {
		if aged[l.EventID] && l.Outcome == "expired" && !l.Time.Before(sentAt) {
			expired[l.EventID] = true
		}
	}
	p.Expired = len(expired)
	for _, id := range p.Stale {
		if c[id] > 0 {
			p.StaleEmailed = append(p.StaleEmailed, id)
		}
	}
	p.StalePublished = published
	marked, err := st.db.publishedOf(ctx, p.Stale)
	p.StaleMarked = len(marked)
	return err
}
