package mail

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Sender sends status emails through SES v2. It implements jobboard.Mailer
// and is safe for concurrent use.
//
// Retries: the SES client's own retryer still retries transient failures
// (5xx, connection errors) within the caller's context deadline, but
// Sender turns off its retries of throttling (TooManyRequestsException,
// LimitExceededException): the worker answers throttling by rolling back and
// failing the rest of the batch, so SQS redelivers later instead of the
// SDK waiting with a database transaction open.
type Sender struct {
	client *sesv2.Client
	from   string
	// ConfigurationSet, if set, is the SES configuration set every email is
	// sent with (event publishing, suppression settings).
	ConfigurationSet string
}

var _ jobboard.Mailer = (*Sender)(nil)

// NewSender returns a sender whose emails come from the address from, e.g.
// "jobboard <jobs@example.com>". Errors: from is not a valid address, or
// contains CR or LF.
func NewSender(client *sesv2.Client, from string) (*Sender, error) {
	if client == nil {
		return nil, errors.New("new mail sender: nil SES client")
	}
	if err := checkAddress(from); err != nil {
		return nil, fmt.Errorf("new mail sender: from address: %w", err)
	}
	return &Sender{client: client, from: from}, nil
}

// checkAddress accepts an RFC 5322 address, with or without a display name,
// on one line.
func checkAddress(a string) error {
	if strings.ContainsAny(a, "\r\n") {
		return fmt.Errorf("%q contains a line break", a)
	}
	if _, err := mail.ParseAddress(a); err != nil {
		return fmt.Errorf("%q: %w", a, err)
	}
	return nil
}

// SendStatusEmail renders the email for e and sends it to e.To, tagged with
// event_id and new_status so that it can be traced to its event. It returns
// the SES message id. Errors wrap jobboard.ErrMailThrottled (throttled:
// retry later) or jobboard.ErrMailRejected (will never succeed: bad
// recipient address, rejected message, unverified sender, paused or
// suspended account); every other error, a context deadline included, is
// worth a retry. The underlying SDK error stays reachable with errors.As.
func (s *Sender) SendStatusEmail(ctx context.Context, e jobboard.StatusEmail) (messageID string, err error) {
	if err := checkRecipient(e.To); err != nil {
		return "", fmt.Errorf("send status email for event %s: %w: recipient %w", e.EventID, jobboard.ErrMailRejected, err)
	}
	subject, text, html, err := Render(e)
	if err != nil {
		return "", fmt.Errorf("send status email: %w", err)
	}
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(s.from),
		Destination:      &types.Destination{ToAddresses: []string{e.To}},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: &types.Content{Data: aws.String(subject), Charset: aws.String("UTF-8")},
			Body: &types.Body{
				Text: &types.Content{Data: aws.String(text), Charset: aws.String("UTF-8")},
				Html: &types.Content{Data: aws.String(html), Charset: aws.String("UTF-8")},
			},
			Headers: eventHeader(e.EventID),
		}},
		EmailTags: emailTags(e),
	}
	if s.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(s.ConfigurationSet)
	}
	out, err := s.client.SendEmail(ctx, in, withoutThrottleRetries)
	if err != nil {
		return "", fmt.Errorf("send status email for event %s: %w", e.EventID, classify(err))
	}
	return aws.ToString(out.MessageId), nil
}

// checkRecipient accepts only a bare address (no display name): it is the
// candidate's stored email.
func checkRecipient(to string) error {
	if err := checkAddress(to); err != nil {
		return err
	}
	if a, _ := mail.ParseAddress(to); a.Address != to {
		return fmt.Errorf("%q is not a bare address", to)
	}
	return nil
}

// EventIDHeader is the message header that carries the email's event_id, so
// that a received email (and a complaint about it) can be traced to its event.
const EventIDHeader = "X-Jobboard-Event-Id"

// eventHeader returns the event id header; an id that is not printable ASCII
// (never one of ours, which are UUIDs) is sanitised like a tag value.
func eventHeader(eventID string) []types.MessageHeader {
	v := tagValue(eventID)
	if v == "" {
		return nil
	}
	return []types.MessageHeader{{Name: aws.String(EventIDHeader), Value: aws.String(v)}}
}

// Tag names on every email.
const (
	TagEventID   = "event_id"
	TagNewStatus = "new_status"
)

// emailTags returns the tags of an email. SES allows only ASCII letters,
// digits, '_' and '-' in tag values, at most 256 of them: UUIDs and statuses
// pass unchanged, anything else is replaced by '_'. Empty values are left
// out (SES refuses them).
func emailTags(e jobboard.StatusEmail) []types.MessageTag {
	var tags []types.MessageTag
	for _, t := range [...]struct{ name, value string }{
		{TagEventID, e.EventID},
		{TagNewStatus, string(e.NewStatus)},
	} {
		if v := tagValue(t.value); v != "" {
			tags = append(tags, types.MessageTag{Name: aws.String(t.name), Value: aws.String(v)})
		}
	}
	return tags
}

func tagValue(s string) string {
	const maxLen = 256
	b := []byte(s)
	if len(b) > maxLen {
		b = b[:maxLen]
	}
	for i, c := range b {
		if !isIDByte(c) {
			b[i] = '_'
		}
	}
	return string(b)
}

// The SES error codes that mean "slow down" and "never".
var (
	throttleCodes = map[string]bool{
		"TooManyRequestsException": true,
		"LimitExceededException":   true,
	}
	rejectCodes = map[string]bool{
		"MessageRejected":                    true,
		"MailFromDomainNotVerifiedException": true,
		"AccountSuspendedException":          true,
		"SendingPausedException":             true,
		"NotFoundException":                  true,
		"BadRequestException":                true,
	}
)

// classify wraps err with the jobboard mail error kind its SES error code
// stands for. Every modelled SES error (*types.TooManyRequestsException, …)
// and an unmodelled one alike implement smithy.APIError, so one check by
// code covers both.
func classify(err error) error {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return err
	}
	switch code := apiErr.ErrorCode(); {
	case throttleCodes[code]:
		return fmt.Errorf("%w: %w", jobboard.ErrMailThrottled, err)
	case rejectCodes[code]:
		return fmt.Errorf("%w: %w", jobboard.ErrMailRejected, err)
	}
	return err
}

// withoutThrottleRetries makes the client's retryer give up on throttling
// errors for this call (see Sender).
func withoutThrottleRetries(o *sesv2.Options) {
	if o.Retryer != nil {
		o.Retryer = noThrottleRetry{o.Retryer}
	}
}

// noThrottleRetry is a retryer that does not retry throttling errors and
// otherwise defers to the retryer it wraps.
type noThrottleRetry struct{ aws.Retryer }

func (r noThrottleRetry) IsErrorRetryable(err error) bool {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) && throttleCodes[apiErr.ErrorCode()] {
		return false
	}
	return r.Retryer.IsErrorRetryable(err)
}

// GetAttemptToken keeps the wrapped retryer's per-attempt token accounting.
func (r noThrottleRetry) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if v2, ok := r.Retryer.(aws.RetryerV2); ok {
		return v2.GetAttemptToken(ctx)
	}
	return r.GetInitialToken(), nil
}

// isIDByte reports whether c is an ASCII letter, digit, '-' or '_'.
func isIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
