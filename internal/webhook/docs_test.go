package webhook_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/webhook"
)

// snippetMarker precedes the Go block of docs/webhooks.md that this test
// compiles and runs.
const snippetMarker = "<!-- verify.go"

// The verification function of docs/webhooks.md, which uses only the
// standard library, accepts what the delivery function signs (with one
// secret, and with two during a rotation) and refuses a wrong secret, a
// changed body, an old timestamp and missing headers. It is compiled and
// run as it stands in the document, in a module of its own.
func TestTheDocumentedVerifierWorks(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "webhooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), snippetMarker)
	if !ok {
		t.Fatalf("docs/webhooks.md has no %q block", snippetMarker)
	}
	_, rest, _ = strings.Cut(rest, "```go\n")
	code, _, ok := strings.Cut(rest, "```")
	if !ok || !strings.HasPrefix(code, "package ") {
		t.Fatal("the block after the marker is not a Go file")
	}

	secret, other := jobboard.NewWebhookSecret(), jobboard.NewWebhookSecret()
	key, _ := jobboard.WebhookSecretKey(secret)
	otherKey, _ := jobboard.WebhookSecretKey(other)
	now := time.Now()
	body := `{"type":"job.closed","timestamp":"2026-12-02T10:00:00Z","data":{"company_id":3,"job_id":12}}`
	type vector struct {
		name, secret, id, ts, sig, body string
		ok                              bool
	}
	ts := fmt.Sprint(now.Unix())
	old := now.Add(-10 * time.Minute)
	vectors := []vector{
		{"signed", secret, "evt-1", ts, webhook.Sign("evt-1", now, []byte(body), key), body, true},
		{"rotation, new secret", secret, "evt-1", ts, webhook.Sign("evt-1", now, []byte(body), otherKey, key), body, true},
		{"rotation, old secret", other, "evt-1", ts, webhook.Sign("evt-1", now, []byte(body), otherKey, key), body, true},
		{"wrong secret", other, "evt-1", ts, webhook.Sign("evt-1", now, []byte(body), key), body, false},
		{"changed body", secret, "evt-1", ts, webhook.Sign("evt-1", now, []byte(body), key), body + " ", false},
		{"other id", secret, "evt-2", ts, webhook.Sign("evt-1", now, []byte(body), key), body, false},
		{"old timestamp", secret, "evt-1", fmt.Sprint(old.Unix()), webhook.Sign("evt-1", old, []byte(body), key), body, false},
		{"no signature", secret, "evt-1", ts, "", body, false},
		{"the published vector", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330",
			"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", `{"test": 2432232314}`, true},
	}
	var cases strings.Builder
	for _, v := range vectors {
		at := "now"
		if v.name == "the published vector" {
			at = "time.Unix(1614265330, 0)"
		}
		fmt.Fprintf(&cases, "\t{%q, %q, %q, %q, %q, %q, %s, %t},\n", v.name, v.secret, v.id, v.ts, v.sig, v.body, at, v.ok)
	}
	test := `package webhooks

import (
	"net/http"
	"testing"
	"time"
)

func TestVerify(t *testing.T) {
	now := time.Now()
	for _, c := range []struct {
		name, secret, id, ts, sig, body string
		at                              time.Time
		ok                              bool
	}{
` + cases.String() + `	} {
		h := http.Header{}
		h.Set("webhook-id", c.id)
		h.Set("webhook-timestamp", c.ts)
		if c.sig != "" {
			h.Set("webhook-signature", c.sig)
		}
		if err := Verify(c.secret, h, []byte(c.body), c.at); (err == nil) != c.ok {
			t.Errorf("%s: Verify = %v, want ok %v", c.name, err, c.ok)
		}
	}
}
`
	dir := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":         "module example.com/webhooks\n\ngo 1.22\n",
		"verify.go":      code,
		"verify_test.go": test,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "test", "-count=1", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the documented verifier: %v\n%s", err, out)
	}
}
