package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Router publishes each event to the queue of its type
// (jobboard.ForWebhookQueue, jobboard.AccountMail): webhook deliveries to
// Webhooks, verification and password reset emails to Account (so that
// they never wait behind a backlog of status emails), the rest to Status.
// It implements jobboard.EventPublisher and is safe for concurrent use.
type Router struct {
	Status   jobboard.EventPublisher
	Webhooks jobboard.EventPublisher
	// Account, if set, takes the account mail; otherwise Status does (a
	// local run with one queue).
	Account jobboard.EventPublisher
	// Logger, if set, gets a WARN line when one queue fails while the
	// other accepted its events. Nil logs nothing.
	Logger *slog.Logger
}

var _ jobboard.EventPublisher = Router{}

// Publish sends the events of each queue in one call and returns the ids
// either accepted. When one queue fails, the ids of the other still count:
// the failed ones stay unpublished in the outbox. Errors: every queue
// called failed, or webhook events without a webhook queue.
func (r Router) Publish(ctx context.Context, evs []jobboard.Event) (accepted []string, err error) {
	var status, webhooks, account []jobboard.Event
	for _, ev := range evs {
		switch {
		case jobboard.ForWebhookQueue(ev.Type):
			webhooks = append(webhooks, ev)
		case jobboard.AccountMail(ev.Type) && r.Account != nil:
			account = append(account, ev)
		default:
			status = append(status, ev)
		}
	}
	var errs []error
	calls := 0
	for _, part := range []struct {
		name string
		pub  jobboard.EventPublisher
		evs  []jobboard.Event
	}{{"account emails", r.Account, account}, {"status events", r.Status, status}, {"webhook", r.Webhooks, webhooks}} {
		if len(part.evs) == 0 {
			continue
		}
		calls++
		if part.pub == nil {
			errs = append(errs, fmt.Errorf("%d events for the %s queue, which is not configured", len(part.evs), part.name))
			continue
		}
		ids, err := part.pub.Publish(ctx, part.evs)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s queue: %w", part.name, err))
			continue
		}
		accepted = append(accepted, ids...)
	}
	err = errors.Join(errs...)
	switch {
	case err == nil:
		return accepted, nil
	case len(errs) == calls:
		return nil, err
	}
	if r.Logger != nil {
		r.Logger.LogAttrs(ctx, slog.LevelWarn, "one queue refused its events; they stay in the outbox", slog.String("error", err.Error()))
	}
	return accepted, nil
}
