package queue

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// TypeAttribute is the name of the String message attribute that carries the
// event type, so consumers and SQS filters can route without parsing bodies.
const TypeAttribute = "type"

// MaxEventIDLen is the longest event_id DecodeStatusEvent accepts. Ours are
// UUIDs (36 characters); the bound keeps a hostile body from becoming a
// huge database key.
const MaxEventIDLen = 128

// ErrMalformed is matched (errors.Is) by every error DecodeStatusEvent
// returns: the body can never be processed, however often it is retried.
var ErrMalformed = errors.New("malformed status event")

// MalformedError says why a message body is not a status event. It matches
// ErrMalformed.
type MalformedError struct {
	// Reason is a short description, e.g. "missing event_id".
	Reason string
	// Err is the JSON error behind the reason, if any.
	Err error
}

func (e *MalformedError) Error() string {
	if e.Err != nil {
		return "malformed status event: " + e.Reason + ": " + e.Err.Error()
	}
	return "malformed status event: " + e.Reason
}

// Unwrap returns the JSON error, if any.
func (e *MalformedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrMalformed) true.
func (e *MalformedError) Is(target error) bool { return target == ErrMalformed }

// EncodeStatusEvent returns the message body of ev: its JSON, with
// occurred_at in UTC.
func EncodeStatusEvent(ev jobboard.StatusChangedEvent) ([]byte, error) {
	ev.OccurredAt = ev.OccurredAt.UTC()
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", ev.EventID, err)
	}
	return b, nil
}

// DecodeStatusEvent reads a message body. Unknown fields are ignored, so a
// producer may add fields before consumers know them. Errors: a
// *MalformedError (matching ErrMalformed) when the body is not a JSON
// object, a field has the wrong JSON type, or type is missing or not
// application.status_changed, event_id is missing, blank or longer than
// MaxEventIDLen, application_id is missing or not positive, or new_status is
// missing. An unknown new_status is not an error: it gets the generic email.
func DecodeStatusEvent(body string) (jobboard.StatusChangedEvent, error) {
	var ev jobboard.StatusChangedEvent
	trimmed := strings.TrimSpace(body)
	if !strings.HasPrefix(trimmed, "{") {
		return ev, &MalformedError{Reason: "body is not a JSON object"}
	}
	if err := json.Unmarshal([]byte(trimmed), &ev); err != nil {
		return jobboard.StatusChangedEvent{}, &MalformedError{Reason: "invalid JSON", Err: err}
	}
	switch {
	case ev.Type == "":
		return ev, &MalformedError{Reason: "missing type"}
	case ev.Type != jobboard.EventTypeStatusChanged:
		return ev, &MalformedError{Reason: fmt.Sprintf("unknown type %q", truncate(ev.Type, 64))}
	case strings.TrimSpace(ev.EventID) == "":
		return ev, &MalformedError{Reason: "missing event_id"}
	case len(ev.EventID) > MaxEventIDLen:
		return ev, &MalformedError{Reason: fmt.Sprintf("event_id longer than %d bytes", MaxEventIDLen)}
	case ev.ApplicationID <= 0:
		return ev, &MalformedError{Reason: "missing or non-positive application_id"}
	case ev.NewStatus == "":
		return ev, &MalformedError{Reason: "missing new_status"}
	}
	return ev, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// PayloadHash returns the SHA-256 of the canonical form of ev: the JSON
// object {"type","event_id","occurred_at","application_id","old_status",
// "new_status"} in that order, occurred_at in UTC with RFC 3339 nanosecond
// precision and no trailing zeros. Only these decoded fields count, so two
// bodies that differ in white space, field order, unknown fields or time
// zone hash the same, and two different changes under one event_id do not.
func PayloadHash(ev jobboard.StatusChangedEvent) []byte {
	canonical := struct {
		Type          string `json:"type"`
		EventID       string `json:"event_id"`
		OccurredAt    string `json:"occurred_at"`
		ApplicationID int64  `json:"application_id"`
		OldStatus     string `json:"old_status"`
		NewStatus     string `json:"new_status"`
	}{ev.Type, ev.EventID, ev.OccurredAt.UTC().Format(time.RFC3339Nano), ev.ApplicationID, string(ev.OldStatus), string(ev.NewStatus)}
	// Marshalling strings and an int64 cannot fail.
	b, _ := json.Marshal(canonical)
	sum := sha256.Sum256(b)
	return sum[:]
}
