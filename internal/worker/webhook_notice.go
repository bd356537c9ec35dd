package worker

import (
	"context"
	"fmt"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// sendWebhookNotice sends the email of a webhook.endpoint_disabled event:
// a fixed text to one member of the company. A Mailer that cannot send it
// is a wiring mistake: the send fails and is retried (and the DLQ keeps
// the event), rather than being dropped.
func sendWebhookNotice(ctx context.Context, m jobboard.Mailer, ev jobboard.Event, c jobboard.Claim) (string, error) {
	nm, ok := m.(jobboard.WebhookNoticeMailer)
	if !ok {
		return "", fmt.Errorf("webhook notice of event %s: the mailer %T cannot send it", ev.EventID, m)
	}
	return nm.SendWebhookDisabledEmail(ctx, jobboard.WebhookDisabledEmail{
		EventID: ev.EventID, To: c.Recipient.Email, CompanyID: ev.CompanyID, EndpointID: ev.EndpointID, Reason: ev.Reason,
	})
}
