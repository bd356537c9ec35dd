package feedback

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// ErrMalformed means a message is not an SES event this package can read.
// The handler reports it as failed, so that it reaches the dead-letter
// queue intact.
var ErrMalformed = errors.New("malformed SES event")

// TagEventID is the email tag that carries the event an email was sent
// for (mail.TagEventID, which the sender sets).
const TagEventID = "event_id"

// maxRecipients bounds the addresses one event may name: SES sends an
// email to 50 at most.
const maxRecipients = 50

// maxAddress is the longest address accepted (RFC 5321's path limit).
const maxAddress = 320

// sesEvent is the part of an SES event record that the project reads: an
// event published through a configuration set ("eventType") or, read the
// same way, an identity's feedback notification ("notificationType").
type sesEvent struct {
	EventType        string `json:"eventType"`
	NotificationType string `json:"notificationType"`
	Mail             struct {
		MessageID   string              `json:"messageId"`
		Timestamp   time.Time           `json:"timestamp"`
		Destination []string            `json:"destination"`
		Tags        map[string][]string `json:"tags"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string      `json:"bounceType"`
		BounceSubType     string      `json:"bounceSubType"`
		BouncedRecipients []recipient `json:"bouncedRecipients"`
		Timestamp         time.Time   `json:"timestamp"`
		FeedbackID        string      `json:"feedbackId"`
	} `json:"bounce"`
	Complaint *struct {
		ComplainedRecipients  []recipient `json:"complainedRecipients"`
		Timestamp             time.Time   `json:"timestamp"`
		FeedbackID            string      `json:"feedbackId"`
		ComplaintFeedbackType string      `json:"complaintFeedbackType"`
		ComplaintSubType      string      `json:"complaintSubType"`
	} `json:"complaint"`
	Delivery *struct {
		Timestamp  time.Time `json:"timestamp"`
		Recipients []string  `json:"recipients"`
	} `json:"delivery"`
}

type recipient struct {
	EmailAddress string `json:"emailAddress"`
}

// snsEnvelope is an SNS notification as SQS receives it without raw
// message delivery: the SES event is the string Message.
type snsEnvelope struct {
	Type    string  `json:"Type"`
	Message *string `json:"Message"`
}

// Decode reads one SQS message body: an SES event record, as SNS delivers
// it to the queue with raw message delivery (the template's setting), or
// inside SNS's envelope (without it). Event types the project does not
// act on (opens, clicks, rejects, delivery delays, …) decode as
// jobboard.FeedbackIgnored. Errors: ErrMalformed (wrapped), for a body
// that is not JSON, names no event type or no message id, or lacks what
// its type requires.
func Decode(body []byte) (jobboard.Feedback, error) {
	var env snsEnvelope
	if err := json.Unmarshal(body, &env); err != nil {
		return jobboard.Feedback{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if env.Type == "Notification" && env.Message != nil {
		body = []byte(*env.Message)
	}
	var e sesEvent
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&e); err != nil {
		return jobboard.Feedback{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	kind := e.EventType
	if kind == "" {
		kind = e.NotificationType
	}
	if kind == "" {
		return jobboard.Feedback{}, fmt.Errorf("%w: no eventType", ErrMalformed)
	}
	id := strings.TrimSpace(e.Mail.MessageID)
	if id == "" {
		return jobboard.Feedback{}, fmt.Errorf("%w: %s event without mail.messageId", ErrMalformed, kind)
	}
	f := jobboard.Feedback{MessageID: id, At: e.Mail.Timestamp, Kind: jobboard.FeedbackIgnored}
	if v := e.Mail.Tags[TagEventID]; len(v) > 0 {
		f.EventID = v[0]
	}
	var (
		feedbackID string
		addrs      []string
	)
	switch kind {
	case "Send":
		f.Kind, addrs = jobboard.FeedbackSent, e.Mail.Destination
	case "Delivery":
		if e.Delivery == nil {
			return jobboard.Feedback{}, fmt.Errorf("%w: Delivery event without delivery", ErrMalformed)
		}
		f.Kind, f.At, addrs = jobboard.FeedbackDelivered, e.Delivery.Timestamp, e.Delivery.Recipients
	case "Bounce":
		b := e.Bounce
		if b == nil {
			return jobboard.Feedback{}, fmt.Errorf("%w: Bounce event without bounce", ErrMalformed)
		}
		// Only a permanent bounce says the address is no good; a
		// transient or undetermined one may pass.
		f.Kind = jobboard.FeedbackSoftBounced
		if b.BounceType == "Permanent" {
			f.Kind = jobboard.FeedbackBounced
		}
		f.At, f.Detail, feedbackID = b.Timestamp, b.BounceType+"/"+b.BounceSubType, b.FeedbackID
		for _, r := range b.BouncedRecipients {
			addrs = append(addrs, r.EmailAddress)
		}
		if len(addrs) == 0 {
			return jobboard.Feedback{}, fmt.Errorf("%w: bounce without recipients", ErrMalformed)
		}
	case "Complaint":
		c := e.Complaint
		if c == nil {
			return jobboard.Feedback{}, fmt.Errorf("%w: Complaint event without complaint", ErrMalformed)
		}
		f.Kind = jobboard.FeedbackComplained
		if c.ComplaintFeedbackType == "not-spam" {
			f.Kind = jobboard.FeedbackIgnored // the opposite of a complaint
		}
		f.At, f.Detail, feedbackID = c.Timestamp, c.ComplaintFeedbackType, c.FeedbackID
		for _, r := range c.ComplainedRecipients {
			addrs = append(addrs, r.EmailAddress)
		}
		if len(addrs) == 0 {
			return jobboard.Feedback{}, fmt.Errorf("%w: complaint without recipients", ErrMalformed)
		}
	}
	if len(addrs) > maxRecipients {
		return jobboard.Feedback{}, fmt.Errorf("%w: %d recipients, at most %d", ErrMalformed, len(addrs), maxRecipients)
	}
	for _, a := range addrs {
		a = jobboard.NormalizeEmail(a)
		if a == "" || len(a) > maxAddress || !strings.Contains(a, "@") {
			return jobboard.Feedback{}, fmt.Errorf("%w: a recipient that is not an address", ErrMalformed)
		}
		f.Recipients = append(f.Recipients, a)
	}
	// Every copy of one event has the same key: SES's own id of a bounce
	// or complaint, else the event type (one delivery, one send per email).
	f.ID = kind + ":" + id
	if feedbackID != "" {
		f.ID += ":" + feedbackID
	}
	return f, nil
}
