package chaos

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/mail"
)

// The delivery feedback's part of the verdict: the candidates whose
// addresses are the mailbox simulator's bounce and complaint addresses
// (Config.FeedbackEvery) are suppressed once their first email's feedback
// is applied; from then on the worker must send them nothing.

// feedbackEvidence is what the database says of the feedback loop.
type feedbackEvidence struct {
	// Suppressed are the event ids whose claim finished as suppressed.
	Suppressed map[string]bool
	// Suppressions are the suppressed addresses and when each was
	// recorded.
	Suppressions map[string]time.Time
	// Applied counts the SES events applied (email_feedback_events).
	Applied int
}

const (
	suppressedEventsSQL = `SELECT event_id FROM processed_events WHERE outcome = 'suppressed'`
	suppressionsSQL     = `SELECT email, suppressed_at FROM email_suppressions`
	feedbackAppliedSQL  = `SELECT count(*) FROM email_feedback_events`
)

func (d *db) feedback(ctx context.Context) (feedbackEvidence, error) {
	f := feedbackEvidence{Suppressed: map[string]bool{}, Suppressions: map[string]time.Time{}}
	var id string
	rows, _ := d.pool.Query(ctx, suppressedEventsSQL)
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error { f.Suppressed[id] = true; return nil }); err != nil {
		return f, fmt.Errorf("read suppressed events: %w", err)
	}
	var at time.Time
	rows, _ = d.pool.Query(ctx, suppressionsSQL)
	if _, err := pgx.ForEachRow(rows, []any{&id, &at}, func() error { f.Suppressions[id] = at; return nil }); err != nil {
		return f, fmt.Errorf("read suppressions: %w", err)
	}
	if err := d.pool.QueryRow(ctx, feedbackAppliedSQL).Scan(&f.Applied); err != nil {
		return f, fmt.Errorf("count applied feedback: %w", err)
	}
	return f, nil
}

// lateEmail is a status email the SES stand-in accepted for an address in
// the second its suppression was recorded, or later.
type lateEmail struct {
	EventID string `json:"event_id"`
	To      string `json:"to"`
	Inside  bool   `json:"inside"`
	Reason  string `json:"reason"`
}

// lateEmails finds the status emails accepted for an address at or after
// the second of its suppression, and judges each against the documented
// window: the worker reads the suppression list after its claim and before
// its send, so an email is inside the window when the claim that sent it
// was logged before the suppression was recorded (the read may have come
// first, and a frozen worker or a slow SES may have stretched the rest),
// and outside when that claim was logged after: its read came after the
// suppression committed, and must have seen it.
func lateEmails(emails []localaws.Email, committed map[string]int64, f feedbackEvidence, lines []recordLine) []lateEmail {
	claims := map[string]recordLine{} // lease token → its claimed line
	sender := map[string]string{}     // SES message id → the lease that sent it
	for _, l := range lines {
		switch {
		case l.Outcome == "claimed":
			claims[l.LeaseToken] = l
		case l.SESID != "":
			sender[l.SESID] = l.LeaseToken
		}
	}
	var out []lateEmail
	for _, e := range emails {
		id := e.Header(mail.EventIDHeader)
		if _, ok := committed[id]; !ok || len(e.Destination.To) == 0 {
			continue // not a status email
		}
		to := strings.ToLower(e.Destination.To[0])
		since, ok := f.Suppressions[to]
		if !ok || time.Unix(e.At, 0).Before(since.Truncate(time.Second)) {
			continue
		}
		l := lateEmail{EventID: id, To: to, Inside: true}
		claim, found := claims[sender[e.MessageID]]
		switch {
		case !found:
			l.Reason = "no worker line names its SES message id (its worker was killed or frozen after the send)"
		case claim.Time.After(since):
			l.Inside = false
			l.Reason = fmt.Sprintf("%s claimed it at %s, after the suppression at %s", claim.Instance,
				claim.Time.Format(time.RFC3339Nano), since.Format(time.RFC3339Nano))
		default:
			l.Reason = fmt.Sprintf("%s claimed it at %s, before the suppression at %s", claim.Instance,
				claim.Time.Format(time.RFC3339Nano), since.Format(time.RFC3339Nano))
		}
		out = append(out, l)
	}
	return out
}
