package mail

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"

	"github.com/jobboard/jobboard/internal/jobboard"
)

var _ jobboard.WebhookNoticeMailer = (*Sender)(nil)

// webhookDisabledFields are the placeholders of the webhook_disabled
// templates: ids and a fixed sentence, nothing a user wrote.
var webhookDisabledFields = []string{"CompanyID", "EndpointID", "Reason", "Subject"}

var webhookDisabledTemplates = sync.OnceValues(func() (templateSet, error) {
	txt, err := templateFS.ReadFile("templates/webhook_disabled.txt")
	if err != nil {
		return templateSet{}, err
	}
	return parseTemplateSet("webhook_disabled", txt, webhookDisabledFields)
})

// disabledReasons are the fixed sentences of the reasons.
var disabledReasons = map[string]string{
	jobboard.DisabledGone:    "it answered 410 Gone, which asks us to stop.",
	jobboard.DisabledFailing: "every delivery to it failed for three days.",
}

// RenderWebhookDisabled returns the subject, text and HTML of the email
// that tells a member an endpoint was disabled. Errors: a reason without a
// sentence; a template failed to parse.
func RenderWebhookDisabled(e jobboard.WebhookDisabledEmail) (subject, text, htmlBody string, err error) {
	reason, ok := disabledReasons[e.Reason]
	if !ok {
		return "", "", "", fmt.Errorf("render webhook notice for event %s: unknown reason %q", e.EventID, e.Reason)
	}
	set, err := webhookDisabledTemplates()
	if err != nil {
		return "", "", "", fmt.Errorf("render webhook notice for event %s: %w", e.EventID, err)
	}
	subject, text, htmlBody = set.renderWith(map[string]string{
		"CompanyID": strconv.FormatInt(e.CompanyID, 10), "EndpointID": strconv.FormatInt(e.EndpointID, 10), "Reason": reason,
	})
	return subject, text, htmlBody, nil
}

// SendWebhookDisabledEmail sends the email that tells a member of a
// company that one of its webhook endpoints was disabled, with one
// SendEmail request tagged with event_id. Errors as SendStatusEmail's; an
// email that RenderWebhookDisabled refuses is jobboard.ErrMailRejected.
func (s *Sender) SendWebhookDisabledEmail(ctx context.Context, e jobboard.WebhookDisabledEmail) (messageID string, err error) {
	if err := checkRecipient(e.To); err != nil {
		return "", fmt.Errorf("send webhook notice for event %s: %w: recipient %w", e.EventID, jobboard.ErrMailRejected, err)
	}
	subject, text, html, err := RenderWebhookDisabled(e)
	if err != nil {
		return "", fmt.Errorf("send webhook notice: %w: %w", jobboard.ErrMailRejected, err)
	}
	var tags []types.MessageTag
	if v := tagValue(e.EventID); v != "" {
		tags = []types.MessageTag{{Name: aws.String(TagEventID), Value: aws.String(v)}}
	}
	id, err := s.send(ctx, e.EventID, e.To, subject, text, html, tags)
	if err != nil {
		return "", fmt.Errorf("send webhook notice for event %s: %w", e.EventID, err)
	}
	return id, nil
}
