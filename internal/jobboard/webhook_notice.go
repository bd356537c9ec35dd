package jobboard

import "context"

// WebhookDisabledEmail tells a company's member that an endpoint was
// disabled. Its text is fixed: it carries ids and the reason, nothing that
// a user wrote (not the URL, not the company's name), so it may go to an
// address that is not verified.
type WebhookDisabledEmail struct {
	EventID    string
	To         string
	CompanyID  int64
	EndpointID int64
	// Reason is DisabledGone or DisabledFailing.
	Reason string
}

// WebhookNoticeMailer is what a Mailer implements to send the
// webhook.endpoint_disabled emails (mail.Sender does). The worker refuses
// such events when its Mailer does not.
type WebhookNoticeMailer interface {
	// SendWebhookDisabledEmail sends the email, once. Errors as Mailer's.
	SendWebhookDisabledEmail(ctx context.Context, e WebhookDisabledEmail) (messageID string, err error)
}
