package jobboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Event types: on the wire (the body's "type") and in the SQS message
// attribute "type".
const (
	// EventTypeStatusChanged is emitted by every real status change.
	EventTypeStatusChanged = "application.status_changed"
)

// MaxEventIDLen is the longest event_id DecodeEvent accepts. Ours are UUIDs
// (36 characters); the bound keeps a hostile body from becoming a huge
// database key.
const MaxEventIDLen = 128

// Event is one message of the event pipeline: written to the outbox in the
// transaction of the change it describes, carried to the worker by SQS as
// the message body (EncodeEvent), and read back there (DecodeEvent).
// EventID identifies the change itself, not a delivery, and is the worker's
// idempotency key. Which of the other fields an event carries depends on its
// Type; the rest are empty and left out of its JSON.
//
//	{"type":"application.status_changed","event_id":"6f1c…","occurred_at":"2026-12-02T10:00:00Z",
//	 "application_id":42,"old_status":"reviewing","new_status":"interview","version":3}
//	{"type":"user.email_verification_requested","event_id":"0b9e…","occurred_at":"2026-12-02T10:00:00Z",
//	 "user_id":7}
//	{"type":"user.password_reset_requested","event_id":"5d2a…","occurred_at":"2026-12-02T10:00:00Z",
//	 "user_id":7}
type Event struct {
	Type       string    `json:"type"`
	EventID    string    `json:"event_id"`
	OccurredAt time.Time `json:"occurred_at"`

	// application.status_changed: the application and its change.
	ApplicationID int64             `json:"application_id,omitempty"`
	OldStatus     ApplicationStatus `json:"old_status,omitempty"`
	NewStatus     ApplicationStatus `json:"new_status,omitempty"`
	// Version is the application's version after the change: its place in
	// the application's status history (the first change makes version
	// 2). The worker never emails a status older than one it has emailed
	// about the application. Zero in events written before versions
	// existed: the worker then reads the place from the history row of
	// the change (see docs/design.md, Order).
	Version int64 `json:"version,omitempty"`

	// user.email_verification_requested: the account whose address to
	// verify. user.password_reset_requested: the account whose password to
	// reset, or zero when no account had the address.
	// webhook.endpoint_disabled: the member to tell.
	UserID int64 `json:"user_id,omitempty"`

	// webhook.delivery_requested: the delivery to attempt, and the dispatch
	// (Generation) this message belongs to. webhook.endpoint_disabled: the
	// endpoint and its company. See webhook_event.go.
	DeliveryID int64  `json:"delivery_id,omitempty"`
	Generation int64  `json:"generation,omitempty"`
	EndpointID int64  `json:"endpoint_id,omitempty"`
	CompanyID  int64  `json:"company_id,omitempty"`
	Reason     string `json:"reason,omitempty"`
}

// requiredFields checks, per event type, the fields that type must carry;
// it returns why an event is malformed, or "". A type missing here is
// unknown.
var requiredFields = map[string]func(Event) string{
	EventTypeStatusChanged: func(ev Event) string {
		switch {
		case ev.ApplicationID <= 0:
			return "missing or non-positive application_id"
		case ev.NewStatus == "":
			return "missing new_status"
		case ev.Version < 0:
			return "negative version"
		}
		// An unknown new_status is not an error: it gets the generic email.
		return ""
	},
	EventTypeEmailVerificationRequested: func(ev Event) string {
		if ev.UserID <= 0 {
			return "missing or non-positive user_id"
		}
		return ""
	},
	EventTypePasswordResetRequested: func(ev Event) string {
		if ev.UserID < 0 {
			return "negative user_id" // absent: no account had the address
		}
		return ""
	},
}

// Validate checks what every consumer relies on: a known type, an event_id
// that is not blank, at most MaxEventIDLen bytes of UTF-8 without NUL, an
// occurred_at, and the fields of the type. Errors: a *MalformedEventError.
func (ev Event) Validate() error {
	switch {
	case ev.Type == "":
		return &MalformedEventError{Reason: "missing type"}
	case requiredFields[ev.Type] == nil:
		return &MalformedEventError{Reason: fmt.Sprintf("unknown type %q", truncate(ev.Type, 64))}
	case strings.TrimSpace(ev.EventID) == "":
		return &MalformedEventError{Reason: "missing event_id"}
	case len(ev.EventID) > MaxEventIDLen:
		return &MalformedEventError{Reason: fmt.Sprintf("event_id longer than %d bytes", MaxEventIDLen)}
	case !utf8.ValidString(ev.EventID) || strings.ContainsRune(ev.EventID, 0):
		// PostgreSQL could not store it as a claim's key.
		return &MalformedEventError{Reason: "event_id is not valid UTF-8 text"}
	case ev.OccurredAt.IsZero():
		// The retention rule (Expired) needs the event's age.
		return &MalformedEventError{Reason: "missing occurred_at"}
	}
	if reason := requiredFields[ev.Type](ev); reason != "" {
		return &MalformedEventError{Reason: reason}
	}
	return nil
}

// EncodeEvent returns the wire form of ev: its JSON, with occurred_at in
// UTC. The encoding is canonical: two equal events encode to the same bytes.
// Errors: encoding failed.
func EncodeEvent(ev Event) ([]byte, error) {
	ev.OccurredAt = ev.OccurredAt.UTC()
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", ev.EventID, err)
	}
	return b, nil
}

// DecodeEvent reads the wire form of an event and validates it. Unknown
// fields are ignored, so a producer may add fields before consumers know
// them. Errors: a *MalformedEventError when the body is not a JSON object,
// a field has the wrong JSON type, or Validate refuses the event.
func DecodeEvent(body []byte) (Event, error) {
	var ev Event
	trimmed := bytes.TrimSpace(body)
	if !bytes.HasPrefix(trimmed, []byte("{")) {
		return ev, &MalformedEventError{Reason: "body is not a JSON object"}
	}
	if err := json.Unmarshal(trimmed, &ev); err != nil {
		return Event{}, &MalformedEventError{Reason: "invalid JSON", Err: err}
	}
	return ev, ev.Validate()
}

// PayloadHash returns the SHA-256 of ev's canonical encoding. Only the
// decoded fields count, so two bodies that differ in white space, field
// order, unknown fields or time zone hash the same, and two different
// changes under one event_id do not.
func (ev Event) PayloadHash() []byte {
	// Encoding strings, integers and a time cannot fail.
	b, _ := EncodeEvent(ev)
	sum := sha256.Sum256(b)
	return sum[:]
}

// The retention of claims, and the age beyond which an event is never
// emailed or published.
//
// A claim is useful only while a copy of its event can still arrive. SQS
// keeps a message 14 days at most, but a dead-letter-queue redrive starts a
// new retention period, and the outbox may publish a row long after it was
// written; so the age of a copy is not bounded by SQS. Instead, an event
// older than the retention less RetentionMargin is refused by the worker
// and never published by the sweeper: then a claim older than the retention
// can no longer meet a copy of its event, and deleting it is safe.
const (
	// DefaultRetention is 30 days: any message a redrive can bring back
	// from the dead-letter queue (which keeps it at most 14 days) is still
	// emailed, with two weeks to spare for noticing and redriving.
	DefaultRetention = 30 * 24 * time.Hour
	// MinRetention is 15 days: the dead-letter queue's 14 days plus the
	// margin.
	MinRetention = 15 * 24 * time.Hour
	// RetentionMargin covers the difference between the clocks of the
	// worker, the API and the database, and the sweeper's schedule.
	RetentionMargin = 24 * time.Hour
)

// MaxEventAge is the age beyond which an event is never emailed or
// published, for a claim retention: the retention less RetentionMargin.
func MaxEventAge(retention time.Duration) time.Duration { return retention - RetentionMargin }

// Expired reports whether ev is too old, at now, to be emailed when claims
// are kept for retention: its claim may have been deleted already.
func (ev Event) Expired(now time.Time, retention time.Duration) bool {
	return now.Sub(ev.OccurredAt) > MaxEventAge(retention)
}

// CheckRetention reports whether a claim retention is allowed.
// Errors: shorter than MinRetention.
func CheckRetention(retention time.Duration) error {
	if retention < MinRetention {
		return fmt.Errorf("retention %v is shorter than the minimum %v (the dead-letter queue's 14 days plus a day's margin)",
			retention, MinRetention)
	}
	return nil
}

// ParseRetentionDays reads a retention given in whole days (the
// RETENTION_DAYS setting); "" means DefaultRetention. Errors: not a whole
// number, or shorter than MinRetention.
func ParseRetentionDays(days string) (time.Duration, error) {
	if days == "" {
		return DefaultRetention, nil
	}
	n, err := strconv.Atoi(days)
	if err != nil || n < int(MinRetention/(24*time.Hour)) {
		return 0, fmt.Errorf("retention of %q days: want a whole number of days, at least %d",
			days, MinRetention/(24*time.Hour))
	}
	return time.Duration(n) * 24 * time.Hour, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// EventPublisher sends events to the queue.
type EventPublisher interface {
	// Publish sends events, at most ten per call, and returns the ids of the
	// ones the queue accepted. An error means none may have been accepted.
	Publish(ctx context.Context, events []Event) (accepted []string, err error)
}
