package jobboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
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
//	 "application_id":42,"old_status":"reviewing","new_status":"interview"}
type Event struct {
	Type       string    `json:"type"`
	EventID    string    `json:"event_id"`
	OccurredAt time.Time `json:"occurred_at"`

	// application.status_changed: the application and its change.
	ApplicationID int64             `json:"application_id,omitempty"`
	OldStatus     ApplicationStatus `json:"old_status,omitempty"`
	NewStatus     ApplicationStatus `json:"new_status,omitempty"`
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
		}
		// An unknown new_status is not an error: it gets the generic email.
		return ""
	},
}

// ErrMalformedEvent is matched (errors.Is) by every error DecodeEvent and
// Event.Validate return: the body can never be processed, however often it
// is retried.
var ErrMalformedEvent = errors.New("malformed event")

// MalformedEventError says why a message body is not an event. It matches
// ErrMalformedEvent.
type MalformedEventError struct {
	// Reason is a short description, e.g. "missing event_id".
	Reason string
	// Err is the JSON error behind the reason, if any.
	Err error
}

func (e *MalformedEventError) Error() string {
	if e.Err != nil {
		return "malformed event: " + e.Reason + ": " + e.Err.Error()
	}
	return "malformed event: " + e.Reason
}

// Unwrap returns the JSON error, if any.
func (e *MalformedEventError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrMalformedEvent) true.
func (e *MalformedEventError) Is(target error) bool { return target == ErrMalformedEvent }

// Validate checks what every consumer relies on: a known type, an event_id
// that is not blank and at most MaxEventIDLen bytes, and the fields of the
// type. Errors: a *MalformedEventError.
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
