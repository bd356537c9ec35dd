package jobboard_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/jobboard/jobboard/internal/jobboard"
)

func sampleEvent() jobboard.Event {
	return jobboard.Event{
		Type:          jobboard.EventTypeStatusChanged,
		EventID:       "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f",
		OccurredAt:    time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC),
		ApplicationID: 42,
		OldStatus:     jobboard.StatusReviewing,
		NewStatus:     jobboard.StatusInterview,
	}
}

func TestEncodeEventMatchesTheDesign(t *testing.T) {
	t.Parallel()
	ev := sampleEvent()
	// A time in another zone is sent in UTC.
	ev.OccurredAt = ev.OccurredAt.In(time.FixedZone("CET", 3600))
	got, err := jobboard.EncodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"application.status_changed","event_id":"6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f","occurred_at":"2026-12-02T10:00:00Z","application_id":42,"old_status":"reviewing","new_status":"interview"}`
	if string(got) != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	back, err := jobboard.DecodeEvent(got)
	if err != nil {
		t.Fatalf("decode own encoding: %v", err)
	}
	if diff := cmp.Diff(sampleEvent(), back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestDecodeEvent(t *testing.T) {
	t.Parallel()
	valid := sampleEvent()
	tests := []struct {
		name   string
		body   string
		want   jobboard.Event
		reason string // non-empty: want a MalformedError containing it
	}{
		{name: "the design's example", body: `{"type": "application.status_changed", "event_id": "6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f", "occurred_at": "2026-12-02T10:00:00Z",
 "application_id": 42, "old_status": "reviewing", "new_status": "interview"}`, want: valid},
		{name: "unknown fields ignored", body: `{"type":"application.status_changed","event_id":"6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f","occurred_at":"2026-12-02T10:00:00Z","application_id":42,"old_status":"reviewing","new_status":"interview","schema_version":2,"extra":{"a":[1]}}`, want: valid},
		{name: "fields in another order, surrounding space", body: ` {"new_status":"interview","old_status":"reviewing","application_id":42,"occurred_at":"2026-12-02T10:00:00Z","event_id":"6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f","type":"application.status_changed"}` + "\n", want: valid},
		{name: "unknown new status is decoded (generic email)", body: `{"type":"application.status_changed","event_id":"e1","occurred_at":"2026-12-02T10:00:00Z","application_id":1,"new_status":"on_hold"}`,
			want: jobboard.Event{Type: jobboard.EventTypeStatusChanged, EventID: "e1", OccurredAt: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), ApplicationID: 1, NewStatus: "on_hold"}},
		{name: "not JSON", body: `hello`, reason: "not a JSON object"},
		{name: "empty body", body: ``, reason: "not a JSON object"},
		{name: "JSON array", body: `[{"type":"application.status_changed"}]`, reason: "not a JSON object"},
		{name: "JSON null", body: `null`, reason: "not a JSON object"},
		{name: "truncated JSON", body: `{"type":"application.status_changed","event_id":"e1"`, reason: "invalid JSON"},
		{name: "trailing garbage", body: `{"type":"application.status_changed","event_id":"e1","application_id":1,"new_status":"offer"} x`, reason: "invalid JSON"},
		{name: "missing type", body: `{"event_id":"e1","application_id":1,"new_status":"offer"}`, reason: "missing type"},
		{name: "unknown type", body: `{"type":"application.deleted","event_id":"e1","application_id":1,"new_status":"offer"}`, reason: `unknown type "application.deleted"`},
		{name: "missing event_id", body: `{"type":"application.status_changed","application_id":1,"new_status":"offer"}`, reason: "missing event_id"},
		{name: "empty event_id", body: `{"type":"application.status_changed","event_id":"","application_id":1,"new_status":"offer"}`, reason: "missing event_id"},
		{name: "blank event_id", body: `{"type":"application.status_changed","event_id":"  ","application_id":1,"new_status":"offer"}`, reason: "missing event_id"},
		{name: "event_id too long", body: `{"type":"application.status_changed","event_id":"` + strings.Repeat("x", jobboard.MaxEventIDLen+1) + `","application_id":1,"new_status":"offer"}`, reason: "event_id longer"},
		{name: "event_id with a NUL", body: `{"type":"application.status_changed","event_id":"e\u00001","occurred_at":"2026-12-02T10:00:00Z","application_id":1,"new_status":"offer"}`, reason: "not valid UTF-8 text"},
		{name: "event_id of the wrong JSON type", body: `{"type":"application.status_changed","event_id":7,"application_id":1,"new_status":"offer"}`, reason: "invalid JSON"},
		{name: "missing occurred_at", body: `{"type":"application.status_changed","event_id":"e1","application_id":1,"new_status":"offer"}`, reason: "missing occurred_at"},
		{name: "missing application_id", body: `{"type":"application.status_changed","event_id":"e1","occurred_at":"2026-12-02T10:00:00Z","new_status":"offer"}`, reason: "application_id"},
		{name: "negative application_id", body: `{"type":"application.status_changed","event_id":"e1","occurred_at":"2026-12-02T10:00:00Z","application_id":-3,"new_status":"offer"}`, reason: "application_id"},
		{name: "application_id as a string", body: `{"type":"application.status_changed","event_id":"e1","application_id":"42","new_status":"offer"}`, reason: "invalid JSON"},
		{name: "missing new_status", body: `{"type":"application.status_changed","event_id":"e1","occurred_at":"2026-12-02T10:00:00Z","application_id":1}`, reason: "missing new_status"},
		{name: "bad occurred_at", body: `{"type":"application.status_changed","event_id":"e1","application_id":1,"new_status":"offer","occurred_at":"yesterday"}`, reason: "invalid JSON"},

		{name: "password reset for an account", body: `{"type":"user.password_reset_requested","event_id":"e2","occurred_at":"2026-12-02T10:00:00Z","user_id":7}`,
			want: jobboard.Event{Type: jobboard.EventTypePasswordResetRequested, EventID: "e2", OccurredAt: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), UserID: 7}},
		{name: "password reset for an address without an account", body: `{"type":"user.password_reset_requested","event_id":"e3","occurred_at":"2026-12-02T10:00:00Z"}`,
			want: jobboard.Event{Type: jobboard.EventTypePasswordResetRequested, EventID: "e3", OccurredAt: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}},
		{name: "password reset with a negative user_id", body: `{"type":"user.password_reset_requested","event_id":"e4","occurred_at":"2026-12-02T10:00:00Z","user_id":-1}`, reason: "negative user_id"},
		{name: "password reset with user_id as a string", body: `{"type":"user.password_reset_requested","event_id":"e5","occurred_at":"2026-12-02T10:00:00Z","user_id":"7"}`, reason: "invalid JSON"},
		{name: "password reset without event_id", body: `{"type":"user.password_reset_requested","occurred_at":"2026-12-02T10:00:00Z","user_id":7}`, reason: "missing event_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := jobboard.DecodeEvent([]byte(tt.body))
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("DecodeEvent: %v", err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				return
			}
			if !errors.Is(err, jobboard.ErrMalformedEvent) {
				t.Fatalf("error = %v, want one matching ErrMalformed", err)
			}
			var me *jobboard.MalformedEventError
			if !errors.As(err, &me) {
				t.Fatalf("error %T is not a *MalformedError", err)
			}
			if !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("error %q does not say %q", err, tt.reason)
			}
		})
	}
}

func TestMalformedErrorUnwrapsTheJSONError(t *testing.T) {
	t.Parallel()
	_, err := jobboard.DecodeEvent([]byte(`{"type":"application.status_changed","event_id":7}`))
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		t.Fatalf("error %v does not unwrap to *json.UnmarshalTypeError", err)
	}
}

func TestPayloadHash(t *testing.T) {
	t.Parallel()
	base := sampleEvent()
	h := base.PayloadHash()
	if len(h) != 32 {
		t.Fatalf("hash length = %d, want 32 (SHA-256)", len(h))
	}

	// The same change in another encoding hashes the same.
	reencoded, err := jobboard.DecodeEvent([]byte(`{"new_status":"interview","extra":true,"old_status":"reviewing","application_id":42,
		"occurred_at":"2026-12-02T11:00:00.000+01:00","event_id":"6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f","type":"application.status_changed"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(reencoded.PayloadHash(), h) {
		t.Error("the same event re-encoded (order, zone, unknown fields) hashes differently")
	}

	// Any change in a decoded field changes the hash.
	changes := map[string]func(*jobboard.Event){
		"type":           func(e *jobboard.Event) { e.Type = "x" },
		"event_id":       func(e *jobboard.Event) { e.EventID += "0" },
		"occurred_at":    func(e *jobboard.Event) { e.OccurredAt = e.OccurredAt.Add(time.Microsecond) },
		"application_id": func(e *jobboard.Event) { e.ApplicationID++ },
		"old_status":     func(e *jobboard.Event) { e.OldStatus = jobboard.StatusSubmitted },
		"new_status":     func(e *jobboard.Event) { e.NewStatus = jobboard.StatusRejected },
	}
	for field, change := range changes {
		ev := base
		change(&ev)
		if bytes.Equal(ev.PayloadHash(), h) {
			t.Errorf("changing %s leaves the hash unchanged", field)
		}
	}
}

// The retention rule: an event older than the retention less the margin is
// expired; the retention has a floor; RETENTION_DAYS parses to it.
func TestRetention(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ev := sampleEvent()
	for _, tt := range []struct {
		age  time.Duration
		want bool
	}{
		{0, false},
		{28 * 24 * time.Hour, false},
		{29*24*time.Hour - time.Second, false},
		{29*24*time.Hour + time.Second, true},
		{400 * 24 * time.Hour, true},
	} {
		ev.OccurredAt = now.Add(-tt.age)
		if got := ev.Expired(now, jobboard.DefaultRetention); got != tt.want {
			t.Errorf("age %v: expired = %v, want %v", tt.age, got, tt.want)
		}
	}
	if err := jobboard.CheckRetention(14 * 24 * time.Hour); err == nil {
		t.Error("a 14-day retention is accepted, want refused (the DLQ keeps 14 days)")
	}
	for in, want := range map[string]time.Duration{"": jobboard.DefaultRetention, "15": 15 * 24 * time.Hour, "90": 90 * 24 * time.Hour} {
		if got, err := jobboard.ParseRetentionDays(in); err != nil || got != want {
			t.Errorf("ParseRetentionDays(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"14", "0", "-1", "1.5", "a month"} {
		if _, err := jobboard.ParseRetentionDays(bad); err == nil {
			t.Errorf("ParseRetentionDays(%q) succeeded", bad)
		}
	}
}
