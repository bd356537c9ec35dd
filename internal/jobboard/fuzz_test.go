package jobboard

import (
	"errors"
	"testing"
	"time"
)

// FuzzDecodeEvent: an SQS message body is an event that survives a round
// trip through its wire form, or a malformed event (which the worker sends
// to the dead-letter queue); never a panic. The seed corpus is in
// testdata/fuzz/FuzzDecodeEvent.
func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"type":"application.status_changed","event_id":"e1","occurred_at":"2026-12-02T10:00:00Z","application_id":1,"new_status":"reviewing"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := DecodeEvent(body)
		if err != nil {
			if !errors.Is(err, ErrMalformedEvent) {
				t.Fatalf("DecodeEvent: %v, not ErrMalformedEvent", err)
			}
			return
		}
		if err := ev.Validate(); err != nil {
			t.Fatalf("decoded event does not validate: %v", err)
		}
		wire, err := EncodeEvent(ev)
		if err != nil {
			t.Fatalf("EncodeEvent: %v", err)
		}
		again, err := DecodeEvent(wire)
		if err != nil {
			t.Fatalf("the wire form of a decoded event does not decode: %v\n%s", err, wire)
		}
		if !again.OccurredAt.Equal(ev.OccurredAt) {
			t.Fatalf("occurred_at %v → %v", ev.OccurredAt, again.OccurredAt)
		}
		again.OccurredAt, ev.OccurredAt = time.Time{}, time.Time{}
		if again != ev {
			t.Fatalf("round trip %+v → %+v", ev, again)
		}
	})
}
