package webhook_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/webhook"
)

// The test vector published with the specification's libraries.
func TestSignMatchesThePublishedVector(t *testing.T) {
	t.Parallel()
	key, err := jobboard.WebhookSecretKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	got := webhook.Sign("msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), []byte(`{"test": 2432232314}`), key)
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

// During a rotation both secrets sign: one signature each, space-separated,
// the current one first.
func TestSignWithTwoSecrets(t *testing.T) {
	t.Parallel()
	a, _ := jobboard.WebhookSecretKey(jobboard.NewWebhookSecret())
	b, _ := jobboard.WebhookSecretKey(jobboard.NewWebhookSecret())
	at := time.Unix(1700000000, 0)
	both := webhook.Sign("id", at, []byte("{}"), a, b)
	parts := strings.Split(both, " ")
	if len(parts) != 2 || parts[0] != webhook.Sign("id", at, []byte("{}"), a) || parts[1] != webhook.Sign("id", at, []byte("{}"), b) {
		t.Errorf("two secrets: %q", both)
	}
	if webhook.Sign("id", at, []byte("{}"), a) == webhook.Sign("id", at.Add(time.Second), []byte("{}"), a) {
		t.Error("the timestamp is not signed")
	}
}
