package mail

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"net/mail"
	"strings"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Sender sends the worker's emails (status changes, address verification,
// password reset) through SES v2. It implements jobboard.Mailer and is safe for concurrent
// use.
//
// Each email takes exactly one SendEmail request: the SDK's
// retryer is off for it. SES v2 has no idempotency key, so a retry after a
// lost answer (a connection reset or a timeout after SES accepted the email)
// would be a second email. The worker's retry is the SQS redelivery, which
// goes through the claim.
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

// SendStatusEmail renders the email for e and sends it to e.To with one
// SendEmail request, tagged with event_id and new_status and carrying the
// header EventIDHeader, so that it can be traced to its event. It returns
// the SES message id. Errors (see classify) wrap jobboard.ErrMailThrottled,
// jobboard.ErrMailPaused, jobboard.ErrMailRejected (also for a recipient
// that is not a bare address), jobboard.ErrMailRefused (not authorised to
// send) or jobboard.ErrMailAmbiguous (the request was
// sent and its answer lost: SES may have accepted the email); any other
// error means SES did not accept it. The underlying SDK error stays
// reachable with errors.As.
func (s *Sender) SendStatusEmail(ctx context.Context, e jobboard.StatusEmail) (messageID string, err error) {
	if err := checkRecipient(e.To); err != nil {
		return "", fmt.Errorf("send status email for event %s: %w: recipient %w", e.EventID, jobboard.ErrMailRejected, err)
	}
	subject, text, html, err := Render(e)
	if err != nil {
		return "", fmt.Errorf("send status email: %w", err)
	}
	id, err := s.send(ctx, e.EventID, e.To, subject, text, html, emailTags(e))
	if err != nil {
		return "", fmt.Errorf("send status email for event %s: %w", e.EventID, err)
	}
	return id, nil
}

// SendVerificationEmail sends the email with the link that verifies e.To,
// with one SendEmail request, tagged with event_id and carrying the header
// EventIDHeader. It returns the SES message id. Errors as SendStatusEmail's;
// a link that RenderVerification refuses is jobboard.ErrMailRejected.
func (s *Sender) SendVerificationEmail(ctx context.Context, e jobboard.VerificationEmail) (messageID string, err error) {
	return s.sendLink(ctx, "verification", e.EventID, e.To, func() (string, string, string, error) { return RenderVerification(e) })
}

// SendPasswordResetEmail sends the email with the link that resets the
// password of the account with the address e.To, as SendVerificationEmail
// sends its link. Errors as SendVerificationEmail's.
func (s *Sender) SendPasswordResetEmail(ctx context.Context, e jobboard.PasswordResetEmail) (messageID string, err error) {
	return s.sendLink(ctx, "password reset", e.EventID, e.To, func() (string, string, string, error) { return RenderPasswordReset(e) })
}

// sendLink sends an email with a link (rendered by render) to a bare
// address, tagged with event_id and carrying the header EventIDHeader.
func (s *Sender) sendLink(ctx context.Context, kind, eventID, to string, render func() (subject, text, html string, err error)) (string, error) {
	if err := checkRecipient(to); err != nil {
		return "", fmt.Errorf("send %s email for event %s: %w: recipient %w", kind, eventID, jobboard.ErrMailRejected, err)
	}
	subject, text, html, err := render()
	if err != nil {
		return "", fmt.Errorf("send %s email: %w: %w", kind, jobboard.ErrMailRejected, err)
	}
	var tags []types.MessageTag
	if v := tagValue(eventID); v != "" {
		tags = []types.MessageTag{{Name: aws.String(TagEventID), Value: aws.String(v)}}
	}
	id, err := s.send(ctx, eventID, to, subject, text, html, tags)
	if err != nil {
		return "", fmt.Errorf("send %s email for event %s: %w", kind, eventID, err)
	}
	return id, nil
}

// send makes the one SendEmail request of an email and returns the SES
// message id. Errors: see classify.
func (s *Sender) send(ctx context.Context, eventID, to, subject, text, html string, tags []types.MessageTag) (string, error) {
	in := &sesv2.SendEmailInput{
		FromEmailAddress: aws.String(s.from),
		Destination:      &types.Destination{ToAddresses: []string{to}},
		Content: &types.EmailContent{Simple: &types.Message{
			Subject: &types.Content{Data: aws.String(subject), Charset: aws.String("UTF-8")},
			Body: &types.Body{
				Text: &types.Content{Data: aws.String(text), Charset: aws.String("UTF-8")},
				Html: &types.Content{Data: aws.String(html), Charset: aws.String("UTF-8")},
			},
			Headers: eventHeader(eventID),
		}},
		EmailTags: tags,
	}
	if s.ConfigurationSet != "" {
		in.ConfigurationSetName = aws.String(s.ConfigurationSet)
	}
	var sent atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				sent.Store(true)
			}
		},
	})
	out, err := s.client.SendEmail(ctx, in, withoutRetries)
	if err != nil {
		return "", classify(err, sent.Load())
	}
	return aws.ToString(out.MessageId), nil
}

// withoutRetries makes the SDK send the request once (see Sender).
func withoutRetries(o *sesv2.Options) { o.Retryer = aws.NopRetryer{} }

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

// The SES v2 SendEmail errors by what they mean for a retry (from the SES v2
// API reference, SendEmail, "Errors"):
//   - throttleCodes: too many requests, or the sending quota is used up:
//     retry later;
//   - pauseCodes: the account cannot send at all until someone acts
//     (sending paused, suspended, MAIL FROM domain not verified, or a
//     configuration set that does not exist): not this email's fault, and
//     temporary once fixed, so retry with a long backoff and alarm;
//   - rejectCodes: this message is refused (its content, its recipient):
//     retrying cannot help;
//   - refusalCodes, and any 403: the caller is not authorised (IAM's
//     AccessDeniedException: the role may not send as this identity,
//     through this configuration set, or, in the sandbox, to this
//     recipient; or the request's credentials are refused). The AWS-wide
//     errors (https://docs.aws.amazon.com/ses/latest/APIReference/CommonErrors.html)
//     rather than SendEmail's own. Someone must change the permissions.
var (
	throttleCodes = map[string]bool{
		"TooManyRequestsException": true,
		"LimitExceededException":   true,
	}
	pauseCodes = map[string]bool{
		"SendingPausedException":             true,
		"AccountSuspendedException":          true,
		"MailFromDomainNotVerifiedException": true,
		"NotFoundException":                  true,
	}
	rejectCodes = map[string]bool{
		"MessageRejected":     true,
		"BadRequestException": true,
	}
	refusalCodes = map[string]bool{
		"AccessDeniedException":       true,
		"AccessDenied":                true,
		"NotAuthorized":               true,
		"InvalidClientTokenId":        true,
		"UnrecognizedClientException": true,
		"MissingAuthenticationToken":  true,
		"IncompleteSignature":         true,
		"InvalidSignatureException":   true,
		"SignatureDoesNotMatch":       true,
		"ExpiredTokenException":       true,
	}
)

// classify wraps err with the jobboard mail error kind it stands for.
// Every modelled SES error (*types.TooManyRequestsException, ...) and an
// unmodelled one alike implement smithy.APIError, so one check by code
// covers both. An error without an answer from SES (a connection reset, a
// timeout, a cancelled context) after the request was written is
// ambiguous: SES may have accepted the email.
func classify(err error, requestSent bool) error {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		switch code := apiErr.ErrorCode(); {
		case throttleCodes[code]:
			return fmt.Errorf("%w: %w", jobboard.ErrMailThrottled, err)
		case pauseCodes[code]:
			return fmt.Errorf("%w: %w", jobboard.ErrMailPaused, err)
		case rejectCodes[code]:
			return fmt.Errorf("%w: %w", jobboard.ErrMailRejected, err)
		case refusalCodes[code]:
			return fmt.Errorf("%w: %w", jobboard.ErrMailRefused, err)
		}
	}
	// A transport failure comes wrapped in a ResponseError too, with no
	// status code: only a status code means SES answered.
	var respErr *smithyhttp.ResponseError
	answered := errors.As(err, &respErr) && respErr.HTTPStatusCode() != 0
	if answered && respErr.HTTPStatusCode() == http.StatusForbidden {
		return fmt.Errorf("%w: %w", jobboard.ErrMailRefused, err)
	}
	if requestSent && !answered {
		return fmt.Errorf("%w: %w", jobboard.ErrMailAmbiguous, err)
	}
	return err
}

// isIDByte reports whether c is an ASCII letter, digit, '-' or '_'.
func isIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}
