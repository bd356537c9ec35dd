package worker

import (
	"context"
	"errors"
	"log/slog"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/sqsbatch"
)

// suppressed checks the owned claim's recipient against the suppression
// list, just before the send: a short read of its own, apart from the
// claim statement. An address that a hard bounce or a complaint put on the
// list gets no email (see jobboard.Suppression.Blocks): the claim is
// finished as suppressed. done is false when the email is to be sent.
//
// The window: a suppression recorded after this read and before SES takes
// the email lets that one email through (a few milliseconds); SES's own
// account-level suppression list is the line behind it.
func (h *Handler) suppressed(ctx, dbCtx context.Context, m *marker, msg events.SQSMessage, ev jobboard.Event, c jobboard.Claim) (r result, done bool) {
	if h.c.Suppressions == nil {
		return result{}, false
	}
	to := recipient(ev, c)
	var (
		sup   jobboard.Suppression
		found bool
	)
	err := sqsbatch.Retry(dbCtx, func() (err error) {
		sup, found, err = h.c.Suppressions.Suppression(dbCtx, to)
		return err
	})
	if err != nil {
		release := sqsbatch.Retry(dbCtx, func() error { return h.c.Store.ReleaseClaim(dbCtx, ev.EventID, c.Token) })
		attrs := []slog.Attr{slog.String("error", err.Error())}
		if release != nil && !errors.Is(release, jobboard.ErrLeaseLost) {
			attrs = append(attrs, slog.String("release_error", release.Error()))
		}
		h.logRecord(ctx, slog.LevelError, "database failed reading the suppression list; claim released, will retry",
			msg.MessageId, ev, outcomeStoreError, c.Token, attrs...)
		return result{outcome: outcomeStoreError, failed: true, retry: retrySoon, answered: true, storeErr: err,
			stop: "the database failed on an earlier record"}, true
	}
	if !found || !sup.Blocks(ev.Type, c.Recipient.VerifiedAt) {
		return result{}, false
	}
	err = sqsbatch.Retry(dbCtx, func() error {
		return m.finish(dbCtx, jobboard.Finish{EventID: ev.EventID, Token: c.Token, Outcome: jobboard.OutcomeSuppressed})
	})
	if err != nil && !errors.Is(err, jobboard.ErrLeaseLost) {
		h.logRecord(ctx, slog.LevelError, "address suppressed, and the outcome could not be recorded; will retry",
			msg.MessageId, ev, outcomeStoreError, c.Token, slog.String("error", err.Error()))
		return result{outcome: outcomeStoreError, failed: true, retry: retrySoon, answered: true}, true
	}
	// The rule working as meant, not a fault: INFO, and a metric.
	h.logRecord(ctx, slog.LevelInfo, "recipient's address is suppressed; not emailed", msg.MessageId, ev,
		string(jobboard.OutcomeSuppressed), c.Token,
		slog.String("reason", string(sup.Reason)), slog.String("suppressed_by", sup.SESMessageID))
	return result{outcome: string(jobboard.OutcomeSuppressed), answered: true}, true
}

// recipient is the address the owned claim's email goes to.
func recipient(ev jobboard.Event, c jobboard.Claim) string {
	if ev.Type == jobboard.EventTypeStatusChanged {
		return c.Application.CandidateEmail
	}
	return c.Recipient.Email
}
