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

	"github.com/jobboard/jobboard/internal/dev/localaws"
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

// newPipelineAPI starts the API over the Env's database, relaying events
// to its queue right after each commit, as in production.
func newPipelineAPI(t *testing.T, e *workertest.Env) *httptest.Server {
	t.Helper()
	api := httptest.NewServer(httpapi.NewServer(httpapi.Config{
		Users: e.DB, Companies: e.DB, Jobs: e.DB, Applications: e.DB,
		Relay:    outbox.NewRelay(e.Publisher(), e.DB),
		TokenKey: []byte("0123456789abcdef0123456789abcdef"),
		Password: httpapi.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1},
	}))
	t.Cleanup(api.Close)
	return api
}

// followVerificationLink finds the one verification email to address and
// posts its token to the API, as the front end's page would.
func followVerificationLink(t *testing.T, e *workertest.Env, base, address string) {
	t.Helper()
	var verification []localaws.Email
	for _, m := range e.EmailsTo(t, address) {
		if m.Subject == verificationSubject {
			verification = append(verification, m)
		}
	}
	if len(verification) != 1 {
		t.Fatalf("verification emails to %s = %d, want 1", address, len(verification))
	}
	var u jobboard.User
	client{t: t, base: base}.call(http.MethodPost, "/v1/auth/verify-email",
		map[string]string{"token": workertest.VerificationToken(t, verification[0])}, &u, http.StatusOK)
	if !u.EmailVerified || u.Email != address {
		t.Fatalf("verified user = %+v, want %s verified", u, address)
	}
}

// verificationSubject is the subject of every verification email.
const verificationSubject = "Confirm your email address for jobboard"

// 1. The normal path, end to end: registration queues a verification
// email, which the worker sends; the candidate follows its link. A status
// change through the API then commits the event to the outbox and relays
// it to SQS; the worker, invoked by the local event source mapping, emails
// the candidate once; the queue is empty and the claim and the outbox row
// record it all.
func TestStatusChangeThroughTheAPIEmailsTheCandidateOnce(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	api := newPipelineAPI(t, e)

	tag := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	email := "sam-" + tag + "@example.com"
	employer := register(t, api.URL, jobboard.RoleEmployer, "acme-"+tag+"@example.com")
	candidate := register(t, api.URL, jobboard.RoleCandidate, email)
	if n := e.Depth(t, e.QueueURL); n != 2 {
		t.Fatalf("queue depth after two registrations = %d, want 2 (their verification emails)", n)
	}
	poller := e.Poller(e.Handler(t, e.Sender))
	e.Drain(t, poller, 30*time.Second)
	followVerificationLink(t, e, api.URL, email)

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
	if err := e.Pool.QueryRow(context.Background(),
		`SELECT published_at IS NOT NULL FROM outbox WHERE event_id = $1`, eventID).Scan(&published); err != nil || !published {
		t.Fatalf("outbox row of %s published = %v, %v; want published", eventID, published, err)
	}
	if n := e.Depth(t, e.QueueURL); n != 1 {
		t.Fatalf("queue depth = %d, want 1", n)
	}

	e.Drain(t, poller, 30*time.Second)

	emails := e.EmailsTo(t, email)
	if len(emails) != 2 {
		t.Fatalf("emails to %s = %d, want 2 (verification, then status)", email, len(emails))
	}
	if want := "Acme is reviewing your application for Backend Engineer"; emails[1].Subject != want {
		t.Errorf("subject = %q, want %q", emails[1].Subject, want)
	}
	wantClaim(t, e, eventID, "sent")
	if n := e.Depth(t, e.DLQURL); n != 0 {
		t.Errorf("DLQ depth = %d, want 0", n)
	}
}

// The abuse this rule stops, end to end through the API, the relay, SQS,
// the worker and SES: someone registers a candidate with a victim's
// address, an employer company named like a bank's security team, a job
// whose title is a phishing lure, applies, and moves the application
// through four statuses. Before, that queued four emails with the lure to
// the victim. Now the victim gets one email, the verification link, in
// which nothing the attacker typed appears; the four status events are
// finished as recipient_unverified (INFO, counted). Once the address's
// owner follows the link, status emails reach it.
func TestUnverifiedAddressGetsNoStatusEmail(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	api := newPipelineAPI(t, e)
	poller := e.Poller(e.Handler(t, e.Sender))

	tag := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	victim := "victim-" + tag + "@example.com"
	const (
		lureName    = "Dear customer, your account is locked"
		lureCompany = "PayPal Security"
		lureTitle   = "ACTION REQUIRED: verify your account at https://evil.example/login"
	)
	employer := register(t, api.URL, jobboard.RoleEmployer, "attacker-"+tag+"@example.com")
	var s struct {
		Token string        `json:"token"`
		User  jobboard.User `json:"user"`
	}
	client{t: t, base: api.URL}.call(http.MethodPost, "/v1/auth/register", map[string]string{
		"email": victim, "password": "correct horse battery", "name": lureName, "role": "candidate"}, &s, http.StatusCreated)
	if s.User.EmailVerified {
		t.Fatal("a new account is verified")
	}
	candidate := client{t: t, base: api.URL, token: s.Token}
	var company, job, app struct {
		ID int64 `json:"id"`
	}
	employer.call(http.MethodPost, "/v1/companies", map[string]string{"name": lureCompany}, &company, http.StatusCreated)
	employer.call(http.MethodPost, fmt.Sprintf("/v1/companies/%d/jobs", company.ID), map[string]any{
		"title": lureTitle, "description": "x", "employment_type": "full_time"}, &job, http.StatusCreated)
	// Applying does not need a verified address.
	candidate.call(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/applications", job.ID), map[string]string{}, &app, http.StatusCreated)
	for _, status := range []string{"reviewing", "interview", "offer", "hired"} {
		employer.call(http.MethodPatch, fmt.Sprintf("/v1/applications/%d", app.ID), map[string]string{"status": status}, nil, http.StatusOK)
	}
	e.Drain(t, poller, 30*time.Second)

	got := e.EmailsTo(t, victim)
	if len(got) != 1 || got[0].Subject != verificationSubject {
		t.Fatalf("emails to the victim = %+v, want only the verification email", got)
	}
	for _, part := range []string{got[0].Subject, got[0].Body.Text, got[0].Body.HTML} {
		for _, lure := range []string{lureName, lureCompany, lureTitle, "evil.example", "PayPal", "ACTION REQUIRED", "locked"} {
			if strings.Contains(part, lure) {
				t.Errorf("the verification email carries %q:\n%s", lure, part)
			}
		}
	}
	if link := workertest.VerificationLink(t, got[0]); link.Host != "app.example" {
		t.Errorf("verification link %s, want one to the front end of VERIFY_EMAIL_URL", link)
	}

	// The four status events: claimed, finished as recipient_unverified,
	// logged at INFO, counted.
	var history struct {
		Items []jobboard.HistoryEntry `json:"items"`
	}
	candidate.call(http.MethodGet, fmt.Sprintf("/v1/applications/%d/history", app.ID), nil, &history, http.StatusOK)
	if len(history.Items) != 4 {
		t.Fatalf("history = %+v, want four changes", history.Items)
	}
	unverified := 0
	for _, h := range history.Items {
		wantClaim(t, e, h.EventID, "recipient_unverified")
	}
	for _, l := range e.Logs.Records(t) {
		if l["outcome"] == "recipient_unverified" {
			unverified++
			if l["level"] != "INFO" {
				t.Errorf("recipient_unverified logged at %v, want INFO", l["level"])
			}
		}
	}
	if unverified != 4 {
		t.Errorf("recipient_unverified lines = %d, want 4", unverified)
	}
	counted := 0.0
	for _, m := range e.Logs.Metrics(t) {
		n, _ := m["UnverifiedRecipients"].(float64)
		counted += n
	}
	if counted != 4 {
		t.Errorf("UnverifiedRecipients = %v, want 4", counted)
	}

	// The address's owner follows the link: from now on, status emails
	// reach it.
	followVerificationLink(t, e, api.URL, victim)
	var second struct {
		ID int64 `json:"id"`
	}
	employer.call(http.MethodPost, fmt.Sprintf("/v1/companies/%d/jobs", company.ID), map[string]any{
		"title": "Backend Engineer", "description": "Go.", "employment_type": "full_time"}, &job, http.StatusCreated)
	candidate.call(http.MethodPost, fmt.Sprintf("/v1/jobs/%d/applications", job.ID), map[string]string{}, &second, http.StatusCreated)
	employer.call(http.MethodPatch, fmt.Sprintf("/v1/applications/%d", second.ID), map[string]string{"status": "reviewing"}, nil, http.StatusOK)
	e.Drain(t, poller, 30*time.Second)
	got = e.EmailsTo(t, victim)
	if len(got) != 2 || got[1].Subject != lureCompany+" is reviewing your application for Backend Engineer" {
		t.Fatalf("emails to the verified address = %d (%+v), want the verification and one status email", len(got), got)
	}
}
