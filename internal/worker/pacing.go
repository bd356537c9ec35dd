package worker

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Pacing: every send takes a slot of the send schedule (Config.Schedule),
// which hands out slots one interval (1 / the mail service's maximum send
// rate) apart to every worker instance together, so that the mail service
// is never asked faster than it answers. A record whose slot is near waits
// for it; one whose slot is further than the horizon is put back on its
// queue as a new message, delayed, so that the wait costs it no receive
// toward the dead-letter queue.
const (
	// DefaultSlotHorizon: a record whose slot is at most this far away
	// waits for it within the invocation.
	DefaultSlotHorizon = 10 * time.Second
	// maxThrottleRetries: a send that the mail service throttled anyway
	// takes a new slot and is sent again, at most this many times.
	maxThrottleRetries = 2
	// maxRequeueDelay is the longest delay SQS gives a new message.
	maxRequeueDelay = 15 * time.Minute
)

// outcomeDeferred: the record's slot was too far; it was put back on its
// queue as a new message that arrives near its slot.
const outcomeDeferred = "deferred"

// slot is the moment a record may send at; the zero slot sends at once
// (pacing off, or the rate unknown).
type slot struct{ at time.Time }

// paced reports whether sends take slots.
func (h *Handler) paced() bool { return h.c.Schedule != nil && h.c.Rate != nil }

// takeSlot takes the record's send slot. It returns done with the
// record's result when the record does not send now: its slot is beyond
// the horizon (the record is requeued), or the database failed.
func (h *Handler) takeSlot(ctx context.Context, msg events.SQSMessage, ev jobboard.Event) (slot, result, bool) {
	if !h.paced() {
		return slot{}, result{}, false
	}
	req, ok, err := h.slotRequest(ctx, ev, h.c.StartMargin)
	if !ok {
		// Unpaced, as before pacing: the mail service's throttle and the
		// backoff stand in. Said once a minute, not once a record.
		if now := h.c.Now(); now.Sub(time.Unix(0, h.rateWarned.Load())) >= time.Minute {
			h.rateWarned.Store(now.UnixNano())
			h.logRecord(ctx, slog.LevelWarn, "the mail service's send rate is unknown; sending unpaced", msg.MessageId, ev, "", "",
				slog.Any("error", err))
		}
		return slot{}, result{}, false
	}
	s, err := h.c.Schedule.TakeSendSlot(ctx, req)
	if err != nil {
		h.logRecord(ctx, slog.LevelError, "database failed; no send slot taken, will retry", msg.MessageId, ev, outcomeStoreError, "",
			slog.String("error", err.Error()))
		return slot{}, result{outcome: outcomeStoreError, failed: true, retry: retrySoon, storeErr: err,
			stop: "the database failed on an earlier record"}, true
	}
	if !s.Taken {
		// Back when the slot is within reach, and not sooner than a second.
		after := max(s.Wait-h.c.SlotHorizon/2, time.Second)
		return slot{}, h.requeue(ctx, msg, ev, after, "send slot beyond the horizon"), true
	}
	return slot{at: h.c.Now().Add(s.Wait)}, result{}, false
}

// slotRequest is ev's request for a send slot at the mail service's
// rate, no further than the horizon nor than margin before ctx's
// deadline; false (with the rate's error) when the rate is unknown.
func (h *Handler) slotRequest(ctx context.Context, ev jobboard.Event, margin time.Duration) (jobboard.SlotRequest, bool, error) {
	rate, err := h.c.Rate.MaxSendRate(ctx)
	if err != nil || rate <= 0 {
		return jobboard.SlotRequest{}, false, err
	}
	deadline, _ := ctx.Deadline()
	horizon := min(h.c.SlotHorizon, deadline.Sub(h.c.Now())-margin)
	return jobboard.SlotRequest{Interval: time.Duration(float64(time.Second) / rate), Horizon: max(horizon, 0),
		Account: jobboard.AccountMail(ev.Type)}, true, nil
}

// nextSlot takes a new slot for a send that the mail service throttled,
// within the send's time; false if there is none.
func (h *Handler) nextSlot(ctx context.Context, ev jobboard.Event) (slot, bool) {
	if !h.paced() {
		return slot{}, false
	}
	req, ok, _ := h.slotRequest(ctx, ev, 0)
	if !ok {
		return slot{}, false
	}
	s, err := h.c.Schedule.TakeSendSlot(ctx, req)
	if err != nil || !s.Taken {
		return slot{}, false
	}
	return slot{at: h.c.Now().Add(s.Wait)}, true
}

// wait waits until the slot, or until ctx ends (its error).
func (h *Handler) wait(ctx context.Context, s slot) error {
	d := s.at.Sub(h.c.Now())
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// sendPaced sends the email at its slot. A send the mail service
// throttled takes a new slot and is sent again, at most
// maxThrottleRetries times.
func (h *Handler) sendPaced(ctx context.Context, s slot, ev jobboard.Event, c jobboard.Claim) (string, error) {
	for tries := 0; ; tries++ {
		if err := h.wait(ctx, s); err != nil {
			return "", err
		}
		id, err := h.send(ctx, ev, c)
		if !errors.Is(err, jobboard.ErrMailThrottled) || tries == maxThrottleRetries {
			return id, err
		}
		next, ok := h.nextSlot(ctx, ev)
		if !ok {
			return id, err
		}
		s = next
	}
}

// requeue puts the record off: the batch consumer sends it again as a new
// message delivered after the delay, and the record counts as done (the
// event source mapping deletes the original), so waiting for the mail
// service costs no receive toward the dead-letter queue. When the queue
// refuses, the consumer fails the record with the delay as its backoff.
func (h *Handler) requeue(ctx context.Context, msg events.SQSMessage, ev jobboard.Event, after time.Duration, why string) result {
	after = min(after, maxRequeueDelay)
	h.logRecord(ctx, slog.LevelInfo, why+"; put back on the queue as a new message", msg.MessageId, ev, outcomeDeferred, "",
		slog.Duration("after", after))
	return result{outcome: outcomeDeferred, requeue: true, busyFor: after, answered: true}
}
