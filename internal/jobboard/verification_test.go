package jobboard_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// The verification event on the wire: its one field is user_id, and a
// missing or bad one makes it malformed.
func TestVerificationEventOnTheWire(t *testing.T) {
	t.Parallel()
	ev := jobboard.Event{Type: jobboard.EventTypeEmailVerificationRequested, EventID: "0b9e2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f",
		OccurredAt: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), UserID: 7}
	got, err := jobboard.EncodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"user.email_verification_requested","event_id":"0b9e2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f","occurred_at":"2026-12-02T10:00:00Z","user_id":7}`
	if string(got) != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	back, err := jobboard.DecodeEvent(got)
	if err != nil || back != ev {
		t.Fatalf("DecodeEvent = %+v, %v", back, err)
	}
	for _, body := range []string{
		`{"type":"user.email_verification_requested","event_id":"e","occurred_at":"2026-12-02T10:00:00Z"}`,
		`{"type":"user.email_verification_requested","event_id":"e","occurred_at":"2026-12-02T10:00:00Z","user_id":0}`,
		`{"type":"user.email_verification_requested","event_id":"e","occurred_at":"2026-12-02T10:00:00Z","user_id":-1}`,
		`{"type":"user.email_verification_requested","event_id":"e","occurred_at":"2026-12-02T10:00:00Z","application_id":3}`,
	} {
		if _, err := jobboard.DecodeEvent([]byte(body)); !errors.Is(err, jobboard.ErrMalformedEvent) || !strings.Contains(err.Error(), "user_id") {
			t.Errorf("DecodeEvent(%s) = %v; want malformed, naming user_id", body, err)
		}
	}
}

func TestVerificationTokens(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		token, hash := jobboard.NewVerificationToken()
		if seen[token] {
			t.Fatalf("token %s made twice", token)
		}
		seen[token] = true
		raw, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil || len(raw) != 32 || len(token) != jobboard.VerificationTokenLen || !jobboard.ValidVerificationToken(token) {
			t.Fatalf("token %q: %d bytes, %v; want 32 random bytes as base64url", token, len(raw), err)
		}
		if !bytes.Equal(hash, jobboard.HashVerificationToken(token)) || len(hash) != 32 || bytes.Contains(hash, []byte(token)) {
			t.Fatalf("hash %x of %s is not its SHA-256", hash, token)
		}
	}
	token, _ := jobboard.NewVerificationToken()
	for _, bad := range []string{"", token[1:], token + "A", strings.Repeat("=", len(token)), token[:42] + "+", token[:42] + "/"} {
		if jobboard.ValidVerificationToken(bad) {
			t.Errorf("ValidVerificationToken(%q) = true", bad)
		}
	}
}

func TestVerificationPolicyWait(t *testing.T) {
	t.Parallel()
	p := jobboard.VerificationPolicy{Cooldown: time.Minute, Window: time.Hour, PerAccount: 3, PerAddress: 2}
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name  string
		h     jobboard.VerificationHistory
		wait  time.Duration
		bound string
	}{
		{"nothing yet", jobboard.VerificationHistory{}, 0, ""},
		{"cooldown", jobboard.VerificationHistory{LastForAccount: now.Add(-20 * time.Second), AccountCount: 1, AccountOldest: now.Add(-20 * time.Second)},
			40 * time.Second, "cooldown"},
		{"cooldown over", jobboard.VerificationHistory{LastForAccount: now.Add(-time.Minute), AccountCount: 2, AccountOldest: now.Add(-2 * time.Minute)}, 0, ""},
		{"account full", jobboard.VerificationHistory{LastForAccount: now.Add(-5 * time.Minute), AccountCount: 3, AccountOldest: now.Add(-50 * time.Minute)},
			10 * time.Minute, "account"},
		{"address full", jobboard.VerificationHistory{AddressCount: 2, AddressOldest: now.Add(-55 * time.Minute)}, 5 * time.Minute, "address"},
		{"the longest wins", jobboard.VerificationHistory{LastForAccount: now.Add(-30 * time.Second), AccountCount: 3, AccountOldest: now.Add(-59 * time.Minute),
			AddressCount: 2, AddressOldest: now.Add(-10 * time.Minute)}, 50 * time.Minute, "address"},
	} {
		wait, bound := p.Wait(tt.h, now)
		if wait != tt.wait || bound != tt.bound {
			t.Errorf("%s: Wait = %v, %q; want %v, %q", tt.name, wait, bound, tt.wait, tt.bound)
		}
	}
	if !errors.Is(&jobboard.VerificationThrottledError{RetryAfter: time.Second, Bound: "cooldown"}, jobboard.ErrVerificationThrottled) {
		t.Error("VerificationThrottledError does not match ErrVerificationThrottled")
	}
}
