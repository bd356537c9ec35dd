package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/sqsbatch"
)

// Outcomes of a record beyond the claim's jobboard.EventOutcome values, as
// they appear in the "outcome" field of the logs.
const (
	outcomeClaimed    = "claimed" // DEBUG: step one done, the send is next
	outcomeMalformed  = "malformed"
	outcomeExpired    = "expired"
	outcomeSendFailed = "send_failed"
	outcomeAmbiguous  = "ambiguous_send"
	outcomeThrottled  = "throttled"
	outcomePaused     = "paused"
	outcomeRefused    = "refused"
	outcomeNotStarted = "not_started"
	outcomeStoreError = "store_error"
	outcomeLeaseLost  = "lease_lost"
	outcomeMarkFailed = "mark_failed"
)

// process handles one record and logs one line about it (two at DEBUG).
func (h *Handler) process(ctx context.Context, m *marker, msg events.SQSMessage, ev jobboard.Event, decodeErr error) result {
	if decodeErr == nil && ev.Type != jobboard.EventTypeStatusChanged && ev.Type != jobboard.EventTypeEmailVerificationRequested &&
		ev.Type != jobboard.EventTypePasswordResetRequested && ev.Type != jobboard.EventTypeWebhookEndpointDisabled {
		decodeErr = fmt.Errorf("no handler for event type %q", ev.Type)
	}
	if decodeErr != nil {
		h.logRecord(ctx, slog.LevelError, "malformed message; it goes to the dead-letter queue", msg.MessageId, ev, outcomeMalformed, "",
			slog.String("error", decodeErr.Error()))
		return result{outcome: outcomeMalformed, failed: true, retry: retryNow}
	}
	if ev.Expired(h.c.Now(), h.c.Retention) {
		// Its claim may be gone already, so a send could be a second email.
		h.logRecord(ctx, slog.LevelError, "event older than the claim retention allows; never emailed", msg.MessageId, ev, outcomeExpired, "",
			slog.Time("occurred_at", ev.OccurredAt), slog.Duration("max_age", jobboard.MaxEventAge(h.c.Retention)))
		return result{outcome: outcomeExpired}
	}

	dbCtx, sendCtx, lease, cancel := h.contexts(ctx)
	defer cancel()

	at, r, done := h.takeSlot(dbCtx, msg, ev)
	if done {
		return r
	}

	claim, err := h.c.Store.ClaimEvent(dbCtx, ev, lease)
	if err != nil {
		h.logRecord(ctx, slog.LevelError, "database failed; nothing claimed, will retry", msg.MessageId, ev, outcomeStoreError, "",
			slog.String("error", err.Error()))
		// The next records would most likely meet the same failure, each
		// after its own connect timeout: leave them for redelivery.
		return result{outcome: outcomeStoreError, failed: true, retry: retrySoon, storeErr: err,
			stop: "the database failed on an earlier record"}
	}
	if claim.Outcome != "" {
		return h.notOwned(ctx, msg, ev, claim)
	}
	h.logRecord(ctx, slog.LevelDebug, "claimed", msg.MessageId, ev, outcomeClaimed, claim.Token,
		slog.Int("attempts", claim.Attempts), slog.Duration("lease", lease))

	if r, done := h.suppressed(ctx, dbCtx, m, msg, ev, claim); done {
		return r
	}
	providerID, err := h.sendPaced(sendCtx, at, ev, claim)
	if err != nil {
		return h.sendFailed(ctx, dbCtx, m, msg, ev, claim, err)
	}
	return h.sent(ctx, dbCtx, m, msg, ev, claim, providerID)
}

// send is step two: the email of the event's type.
func (h *Handler) send(ctx context.Context, ev jobboard.Event, c jobboard.Claim) (string, error) {
	switch ev.Type {
	case jobboard.EventTypeWebhookEndpointDisabled:
		return sendWebhookNotice(ctx, h.c.Mailer, ev, c) // webhook_notice.go
	case jobboard.EventTypeEmailVerificationRequested:
		return h.c.Mailer.SendVerificationEmail(ctx, jobboard.VerificationEmail{
			EventID:   ev.EventID,
			To:        c.Recipient.Email,
			Link:      tokenLink(h.verifyURL, c.Recipient.Token),
			ExpiresAt: c.Recipient.ExpiresAt,
		})
	case jobboard.EventTypePasswordResetRequested:
		return h.c.Mailer.SendPasswordResetEmail(ctx, jobboard.PasswordResetEmail{
			EventID:   ev.EventID,
			To:        c.Recipient.Email,
			Link:      tokenLink(h.resetURL, c.Recipient.Token),
			ExpiresAt: c.Recipient.ExpiresAt,
		})
	}
	return h.c.Mailer.SendStatusEmail(ctx, statusEmail(ev, c.Application))
}

// tokenLink is base with the token in its query ("token=..."), beside
// whatever query base has.
func tokenLink(base *url.URL, token string) string {
	u := *base
	q := u.Query()
	q.Set("token", token)
	u.RawQuery = q.Encode()
	return u.String()
}

// notOwned logs and returns a claim that leaves nothing to send.
func (h *Handler) notOwned(ctx context.Context, msg events.SQSMessage, ev jobboard.Event, c jobboard.Claim) result {
	o := string(c.Outcome)
	r := result{outcome: o, answered: true}
	switch c.Outcome {
	case jobboard.OutcomeDuplicate:
		// Expected with at-least-once delivery: INFO, not a warning.
		h.logRecord(ctx, slog.LevelInfo, "event already processed; duplicate skipped", msg.MessageId, ev, o, "")
	case jobboard.OutcomePayloadMismatch:
		h.logRecord(ctx, slog.LevelError, "same event_id, different payload; not emailed", msg.MessageId, ev, o, "")
	case jobboard.OutcomeApplicationMissing:
		h.logRecord(ctx, slog.LevelWarn, "application no longer exists; skipped", msg.MessageId, ev, o, c.Token)
	case jobboard.OutcomeRecipientUnverified:
		// The rule working as meant, not a fault: INFO, and a metric.
		h.logRecord(ctx, slog.LevelInfo, "recipient's address is not verified; not emailed", msg.MessageId, ev, o, c.Token)
	case jobboard.OutcomeSuperseded:
		// The order working as meant: a newer status of the application
		// has been emailed, or is being emailed; this older one must not
		// arrive after it. INFO, and a metric.
		h.logRecord(ctx, slog.LevelInfo, "a newer status of the application is emailed; this older one is not", msg.MessageId, ev, o, c.Token,
			slog.Int64("version", ev.Version))
	case jobboard.OutcomeAlreadyVerified:
		h.logRecord(ctx, slog.LevelInfo, "address verified already; no verification email", msg.MessageId, ev, o, c.Token)
	case jobboard.OutcomeUserMissing:
		h.logRecord(ctx, slog.LevelWarn, "account no longer exists; skipped", msg.MessageId, ev, o, c.Token)
	case jobboard.OutcomeNoAccount:
		// Expected: the API queues a reset event for every address asked
		// about, so that its answer does not tell which have an account.
		h.logRecord(ctx, slog.LevelInfo, "no account has the address; no password reset email", msg.MessageId, ev, o, c.Token)
	case jobboard.OutcomeBusy:
		r.failed, r.retry, r.busyFor = true, retryBusy, c.BusyFor
		if c.BusyOrder {
			// Usually over as soon as that email is recorded: retry soon,
			// and at the latest when its lease runs out.
			r.retry = retryOrder
			h.logRecord(ctx, slog.LevelWarn, "an older status of the application is being emailed; will retry after it", msg.MessageId, ev, o, "",
				slog.Duration("busy_for", c.BusyFor), slog.Int64("version", ev.Version))
			break
		}
		h.logRecord(ctx, slog.LevelWarn, "another worker holds the claim; will retry after its lease", msg.MessageId, ev, o, "",
			slog.Duration("busy_for", c.BusyFor))
	default:
		h.logRecord(ctx, slog.LevelError, "unknown claim outcome; will retry", msg.MessageId, ev, o, "")
		r.failed, r.retry = true, retrySoon
	}
	return r
}

// sent is step three after an accepted email: record it (with the other
// records that finish together). The mark is retried within the deadline
// if the database blips. The message is
// deleted whatever happens to the mark, since the email has left: only a
// later copy of the event could then send it again.
func (h *Handler) sent(ctx, dbCtx context.Context, m *marker, msg events.SQSMessage, ev jobboard.Event, c jobboard.Claim, providerID string) result {
	err := sqsbatch.Retry(dbCtx, func() error {
		return m.finish(dbCtx, jobboard.Finish{EventID: ev.EventID, Token: c.Token, Outcome: jobboard.OutcomeSent, ProviderMessageID: providerID})
	})
	id := slog.String("ses_message_id", providerID)
	switch {
	case err == nil:
		h.logRecord(ctx, slog.LevelInfo, emailName(ev)+" sent", msg.MessageId, ev, string(jobboard.OutcomeSent), c.Token,
			id, slog.Int("attempts", c.Attempts))
		return result{outcome: string(jobboard.OutcomeSent), answered: true}
	case errors.Is(err, jobboard.ErrLeaseLost):
		h.logRecord(ctx, slog.LevelError, "email sent, but the lease had expired and another worker took the event over; it may send it again",
			msg.MessageId, ev, outcomeLeaseLost, c.Token, id)
		return result{outcome: outcomeLeaseLost, answered: true}
	default:
		h.logRecord(ctx, slog.LevelError, "email sent, but it could not be recorded; a later copy of the event may send it again",
			msg.MessageId, ev, outcomeMarkFailed, c.Token, id, slog.String("error", err.Error()))
		return result{outcome: outcomeMarkFailed, answered: true}
	}
}

// sendFailed handles a send that did not succeed: a rejection finishes the
// claim; anything else releases it for a retry.
func (h *Handler) sendFailed(ctx, dbCtx context.Context, m *marker, msg events.SQSMessage, ev jobboard.Event, c jobboard.Claim, sendErr error) result {
	errAttr := slog.String("error", sendErr.Error())
	if errors.Is(sendErr, jobboard.ErrMailRejected) {
		err := sqsbatch.Retry(dbCtx, func() error {
			return m.finish(dbCtx, jobboard.Finish{EventID: ev.EventID, Token: c.Token, Outcome: jobboard.OutcomeRejected})
		})
		if err != nil && !errors.Is(err, jobboard.ErrLeaseLost) {
			h.logRecord(ctx, slog.LevelError, "email rejected, and the rejection could not be recorded; will retry",
				msg.MessageId, ev, outcomeStoreError, c.Token, errAttr, slog.String("store_error", err.Error()))
			return result{outcome: outcomeStoreError, failed: true, retry: retrySoon, answered: true}
		}
		h.logRecord(ctx, slog.LevelWarn, "mail service rejected the email permanently; not retried",
			msg.MessageId, ev, string(jobboard.OutcomeRejected), c.Token, errAttr)
		return result{outcome: string(jobboard.OutcomeRejected), answered: true}
	}

	// The email did not leave (or, if ambiguous, may have): release the
	// claim so the retry can send. If the release fails, the lease runs
	// out and the retry takes the claim over.
	release := sqsbatch.Retry(dbCtx, func() error { return h.c.Store.ReleaseClaim(dbCtx, ev.EventID, c.Token) })
	attrs := []slog.Attr{errAttr}
	if release != nil && !errors.Is(release, jobboard.ErrLeaseLost) {
		attrs = append(attrs, slog.String("release_error", release.Error()))
	}
	r := result{failed: true, answered: true, retry: retrySoon}
	switch {
	case errors.Is(sendErr, jobboard.ErrMailThrottled) && h.paced():
		// Throttled on its slot and on its retries' slots: an anomaly (the
		// alarm's), not a storm the rest of the batch would add to. Back
		// as a new message, so that throttling alone never dead-letters it.
		h.logRecord(ctx, slog.LevelWarn, "mail service throttled the send on every slot it took; claim released",
			msg.MessageId, ev, outcomeThrottled, c.Token, attrs...)
		r = h.requeue(ctx, msg, ev, backoff(retryThrottled, 1, 0, h.c.Jitter), "throttled")
		r.outcome = outcomeThrottled
	case errors.Is(sendErr, jobboard.ErrMailThrottled):
		r.outcome, r.retry, r.stop = outcomeThrottled, retryThrottled, "the mail service throttled an earlier record"
		h.logRecord(ctx, slog.LevelWarn, "mail service throttled; claim released, the rest of the batch is not started",
			msg.MessageId, ev, r.outcome, c.Token, attrs...)
	case errors.Is(sendErr, jobboard.ErrMailPaused):
		r.outcome, r.retry, r.stop = outcomePaused, retryPaused, "the mail service stopped sending for the account"
		h.logRecord(ctx, slog.LevelError, "mail service stopped sending for the account (paused, suspended or misconfigured); claim released, retried with the longest backoff",
			msg.MessageId, ev, r.outcome, c.Token, attrs...)
	case errors.Is(sendErr, jobboard.ErrMailRefused):
		// Our permissions, not the email: every send would meet it until
		// someone changes them, so as a pause.
		r.outcome, r.retry, r.stop = outcomeRefused, retryPaused, "the mail service refused the sender's authorisation"
		h.logRecord(ctx, slog.LevelError, "mail service refused the sender's authorisation (access denied); claim released, retried with the longest backoff",
			msg.MessageId, ev, r.outcome, c.Token, attrs...)
	case errors.Is(sendErr, jobboard.ErrMailAmbiguous):
		// The one way left for this worker to cause a second email: the
		// request reached SES and the answer did not reach us.
		r.outcome = outcomeAmbiguous
		h.logRecord(ctx, slog.LevelWarn, "the mail service may have accepted the email, its answer was lost; claim released, a retry may send it a second time",
			msg.MessageId, ev, r.outcome, c.Token, attrs...)
	default:
		r.outcome = outcomeSendFailed
		h.logRecord(ctx, slog.LevelWarn, "send failed; claim released, will retry", msg.MessageId, ev, r.outcome, c.Token, attrs...)
	}
	return r
}

// contexts returns the context of the database work, which must end in
// time to return the response; the context of the send, which must end in
// time to record or release the claim; and the lease to take, which must
// outlive the whole invocation, so that no other worker takes the event
// over while this one may still send it.
func (h *Handler) contexts(ctx context.Context) (dbCtx, sendCtx context.Context, lease time.Duration, cancel func()) {
	deadline, _ := ctx.Deadline() // Handle gives ctx one
	lease = deadline.Sub(h.c.Now()) + h.c.LeaseMargin
	dbCtx, cancelDB := context.WithDeadline(ctx, deadline.Add(-returnMargin))
	sendCtx, cancelSend := context.WithDeadline(dbCtx, deadline.Add(-h.c.SendMargin))
	return dbCtx, sendCtx, lease, func() { cancelSend(); cancelDB() }
}

// statusEmail is what the candidate is told: the event's change, about the
// application as it is now.
func statusEmail(ev jobboard.Event, d jobboard.ApplicationDetails) jobboard.StatusEmail {
	return jobboard.StatusEmail{
		EventID:       ev.EventID,
		To:            d.CandidateEmail,
		CandidateName: d.CandidateName,
		JobTitle:      d.JobTitle,
		CompanyName:   d.CompanyName,
		ApplicationID: d.ApplicationID,
		OldStatus:     ev.OldStatus,
		NewStatus:     ev.NewStatus,
	}
}

// emailName says which email an event sends, for the logs.
func emailName(ev jobboard.Event) string {
	switch ev.Type {
	case jobboard.EventTypeEmailVerificationRequested:
		return "verification email"
	case jobboard.EventTypePasswordResetRequested:
		return "password reset email"
	case jobboard.EventTypeWebhookEndpointDisabled:
		return "webhook notice"
	}
	return "status email"
}

// logRecord writes a line about a record. Every line carries the same
// fields, empty when unknown (a malformed message has no event id; a
// verification event no application_id, a status event no user_id), so
// that a query over the logs can rely on them; lease_token ties the lines
// of one attempt together. No line carries a verification or password
// reset token: the claim's Recipient is never logged.
func (h *Handler) logRecord(ctx context.Context, level slog.Level, msg, messageID string,
	ev jobboard.Event, outcome, leaseToken string, extra ...slog.Attr,
) {
	attrs := append([]slog.Attr{
		slog.String("event_id", ev.EventID),
		slog.String("message_id", messageID),
		slog.Int64("application_id", ev.ApplicationID),
		slog.Int64("user_id", ev.UserID),
		slog.String("outcome", outcome),
		slog.String("lease_token", leaseToken),
	}, extra...)
	h.c.Logger.LogAttrs(ctx, level, msg, attrs...)
}
