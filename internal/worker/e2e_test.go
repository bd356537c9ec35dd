package worker_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/outbox"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// client is a signed-in user of the API under test.
type client struct {
	t     *testing.T
	base  string
	token string
}

// call sends a JSON request and decodes the JSON answer into out, failing
// the test unless the status is want.
func (c client) call(method, path string, in, out any, want int) {
	c.t.Helper()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			c.t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, c.base+path, body)
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// register signs up a user through the API and returns it signed in.
func register(t *testing.T, base string, role jobboard.Role, email string) client {
	t.Helper()
	var s struct {
		Token string `json:"token"`
	}
	client{t: t, base: base}.call(http.MethodPost, "/v1/auth/register",
		map[string]string{"email": email, "password": "correct horse battery", "name": "Sam Candidate", "role": string(role)},
		&s, http.StatusCreated)
	return client{t: t, base: base, token: s.Token}
}

// 1. The normal path, end to end: a status change through the API commits
// the event to the outbox and relays it to SQS; the worker, invoked by the
// local event source mapping, emails the candidate once; the queue is empty
// and the claim and the outbox row record it all.
func TestStatusChangeThroughTheAPIEmailsTheCandidateOnce(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	relay := outbox.NewRelay(e.Publisher(), e.DB)
	api := httptest.NewServer(httpapi.NewServer(httpapi.Config{
		Users: e.DB, Companies: e.DB, Jobs: e.DB, Applications: e.DB,
		Relay:    relay,
		TokenKey: []byte("0123456789abcdef0123456789abcdef"),
		Password: httpapi.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1},
	}))
	defer api.Close()

	tag := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	email := "sam-" + tag + "@example.com"
	employer := register(t, api.URL, jobboard.RoleEmployer, "acme-"+tag+"@example.com")
	candidate := register(t, api.URL, jobboard.RoleCandidate, email)
	var company, job, app struct {
		ID int64 `json:"id"`
	}
	employer.call(http.MethodPost, "/v1/companies", map[string]string{"name": "Acme"}, &company, http.StatusCreated)
	employer.call(http.MethodPost, fmt.Sprintf("/v1/companies/%d/jobs", company.ID), map[string]any{
		"title": "Backend Engineer", "description": "Go and PostgreSQL.", "employment_type": "full_time"}, &job, http.StatusCreated)
	candidate.call(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/applications", job.ID), map[string]string{}, &app, http.StatusCreated)
	employer.call(http.MethodPatch, fmt.Sprintf("/v1/applications/%d", app.ID),
		map[string]string{"status": "interview"}, nil, http.StatusConflict) // not allowed from submitted
	employer.call(http.MethodPatch, fmt.Sprintf("/v1/applications/%d", app.ID),
		map[string]string{"status": "reviewing"}, nil, http.StatusOK)

	var history struct {
		Items []jobboard.HistoryEntry `json:"items"`
	}
	candidate.call(http.MethodGet, fmt.Sprintf("/v1/applications/%d/history", app.ID), nil, &history, http.StatusOK)
	if len(history.Items) != 1 {
		t.Fatalf("history = %+v, want one change", history.Items)
	}
	eventID := history.Items[0].EventID

	// The relay published it and marked the outbox row.
	var published bool
	if err := e.DB.Pool().QueryRow(context.Background(),
		`SELECT published_at IS NOT NULL FROM outbox WHERE event_id = $1`, eventID).Scan(&published); err != nil || !published {
		t.Fatalf("outbox row of %s published = %v, %v; want published", eventID, published, err)
	}
	if n := e.Depth(t, e.QueueURL); n != 1 {
		t.Fatalf("queue depth = %d, want 1", n)
	}

	e.Drain(t, e.Poller(e.Handler(t, e.Sender)), 30*time.Second)

	emails := e.EmailsTo(t, email)
	if len(emails) != 1 {
		t.Fatalf("emails to %s = %d, want 1", email, len(emails))
	}
	if want := "Acme is reviewing your application for Backend Engineer"; emails[0].Subject != want {
		t.Errorf("subject = %q, want %q", emails[0].Subject, want)
	}
	wantClaim(t, e, eventID, "sent")
	if n := e.Depth(t, e.DLQURL); n != 0 {
		t.Errorf("DLQ depth = %d, want 0", n)
	}
}
