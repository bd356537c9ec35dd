package devstack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/dev/apiclient"
	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// The stack of `make dev`, end to end: a status change through the API
// reaches the candidate as exactly one email, the processes' logs go to the
// log file and nowhere else, and stopping the stack leaves nothing running.
func TestStackEmailsOnceAndStopsCleanly(t *testing.T) {
	cfg := testConfig(t, buildFunctions(t), pgtest.NewURL(t))
	var terminal bytes.Buffer
	cfg.Out = &terminal
	cfg.LogFile = filepath.Join(t.TempDir(), "logs", "dev.log")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan Stack, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, func(st Stack) { ready <- st }) }()
	var st Stack
	select {
	case st = <-ready:
	case err := <-done:
		t.Fatalf("Run ended before ready: %v", err)
	case <-time.After(3 * time.Minute):
		t.Fatal("stack not ready after 3 minutes")
	}

	c := client{&apiclient.Client{BaseURL: st.APIURL}}
	for _, token := range []string{st.Demo.EmployerToken, st.Demo.CandidateToken} {
		var me struct {
			EmailVerified bool `json:"email_verified"`
		}
		if err := c.Do(ctx, http.MethodGet, "/v1/me", token, nil, http.StatusOK, &me); err != nil || !me.EmailVerified {
			t.Fatalf("demo account verified = %v (%v), want true", me.EmailVerified, err)
		}
	}
	var app struct {
		Status string `json:"status"`
	}
	if err := c.Do(ctx, http.MethodPatch, fmt.Sprintf("/v1/applications/%d", st.Demo.ApplicationID),
		st.Demo.EmployerToken, map[string]any{"status": "reviewing"}, http.StatusOK, &app); err != nil {
		t.Fatal(err)
	}
	if app.Status != "reviewing" {
		t.Fatalf("status after PATCH = %q, want reviewing", app.Status)
	}

	// Wait for the email, then for the queue to be drained (the message
	// deleted), and only then count: a second email would have to come
	// from a message that is no longer there. The first email is the
	// verification link the demo followed.
	pollEmails(t, st.SESEndpoint, st.Demo.CandidateEmail, 2)
	waitQueueEmpty(t, st.SQSEndpoint, st.QueueURL)
	emails := pollEmails(t, st.SESEndpoint, st.Demo.CandidateEmail, 2)
	if len(emails) != 2 {
		t.Fatalf("emails to the candidate = %d, want 2 (verification, status)", len(emails))
	}
	if !strings.Contains(emails[0].Body.Text, "verify-email?token=") {
		t.Errorf("first email %q is not the verification email", emails[0].Subject)
	}
	if !strings.Contains(emails[1].Subject, "Senior Go Engineer") {
		t.Errorf("subject %q does not name the job", emails[1].Subject)
	}
	if emails[1].From != MailFrom {
		t.Errorf("from = %q, want %q", emails[1].From, MailFrom)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not stop within a minute of cancel")
	}
	logs, err := os.ReadFile(cfg.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"api     | {", "worker  | {", "sweeper | {", `"msg":"status email sent"`} {
		if !bytes.Contains(logs, []byte(want)) {
			t.Errorf("the log file lacks %q:\n%s", want, logs)
		}
	}
	if terminal.Len() > 0 {
		t.Errorf("with a log file, the processes still wrote to the terminal:\n%s", terminal.String())
	}
	for _, addr := range []string{st.APIURL, st.SQSEndpoint, st.SESEndpoint} {
		host := strings.TrimPrefix(addr, "http://")
		if conn, err := net.DialTimeout("tcp", host, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after the stack stopped", addr)
		}
	}
}

// pollEmails waits until at least min emails to the address are stored.
func pollEmails(t *testing.T, endpoint, to string, minimum int) []localaws.Email {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		mine, err := localaws.EmailsTo(context.Background(), endpoint, to)
		if err != nil {
			t.Fatal(err)
		}
		if len(mine) >= minimum || time.Now().After(deadline) {
			return mine
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// waitQueueEmpty waits until the queue holds no message, visible, in
// flight or delayed.
func waitQueueEmpty(t *testing.T, endpoint, queueURL string) {
	t.Helper()
	client := localaws.NewSQSClient(endpoint)
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := localaws.QueueDepth(context.Background(), client, queueURL)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained: %d messages left", n)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// testWriter sends the stack's output to the test log.
type testWriter struct{ t *testing.T }

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = (*testWriter)(nil)
