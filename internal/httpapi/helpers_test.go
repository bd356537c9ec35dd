package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jobboard/jobboard/internal/dev/syncio"
	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/httpapi/openapitest"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// testKey signs the tokens of the servers under test.
var testKey = []byte("httpapi-test-signing-key-32bytes")

// cheapPasswords keeps argon2id fast in tests; production uses
// httpapi.DefaultPasswordParams.
var cheapPasswords = httpapi.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}

// logLines decodes the server's JSON log lines collected in b.
func logLines(tb testing.TB, b *syncio.Buffer) []map[string]any {
	tb.Helper()
	lines, err := b.JSONLines()
	if err != nil {
		tb.Fatal(err)
	}
	return lines
}

// api is a server under test over a fresh database, and a client whose
// every response is validated against the OpenAPI document.
type api struct {
	t       *testing.T
	db      *pgtest.DB
	handler http.Handler
	base    string
	client  *http.Client
	logs    *syncio.Buffer
}

// newAPI starts the API over a fresh migrated database. adjust may change
// the configuration (e.g. to inject a failing store).
func newAPI(t *testing.T, adjust ...func(*httpapi.Config)) *api {
	t.Helper()
	return newAPIOn(t, pgtest.NewDB(t), adjust...)
}

// newAPIOn starts another server over an existing database.
func newAPIOn(t *testing.T, db *pgtest.DB, adjust ...func(*httpapi.Config)) *api {
	t.Helper()
	logs := &syncio.Buffer{}
	cfg := httpapi.Config{
		Writes: db, Users: db, Companies: db, Jobs: db, Applications: db, Pinger: db, Logins: db, Suppressions: db,
		Logger:        slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		TokenKey:      testKey,
		Password:      cheapPasswords,
		ClientAddress: testClientAddress,
	}
	for _, f := range adjust {
		f(&cfg)
	}
	h := httpapi.NewServer(cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: openapitest.Transport(t, srv.Client().Transport)}
	return &api{t: t, db: db, handler: h, base: srv.URL, client: client, logs: logs}
}

// response is a received response, body read.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// problem is the decoded problem body.
type problem struct {
	Type      string                `json:"type"`
	Title     string                `json:"title"`
	Status    int                   `json:"status"`
	Detail    string                `json:"detail"`
	Instance  string                `json:"instance"`
	Errors    []jobboard.FieldError `json:"errors"`
	RequestID string                `json:"request_id"`
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.Status, r.Body) }

// problem decodes a problem response, failing the test if it is not one.
func (r response) problem(tb testing.TB) problem {
	tb.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type %q, want application/problem+json (%s)", ct, r)
	}
	var p problem
	if err := json.Unmarshal(r.Body, &p); err != nil {
		tb.Fatalf("decode problem: %v (%s)", err, r)
	}
	return p
}

// decodeAs decodes a JSON response body.
func decodeAs[T any](tb testing.TB, r response) T {
	tb.Helper()
	var v T
	if err := json.Unmarshal(r.Body, &v); err != nil {
		tb.Fatalf("decode %T: %v (%s)", v, err, r)
	}
	return v
}

// reqOption adjusts a request.
type reqOption func(*http.Request)

func bearer(token string) reqOption {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

func header(k, v string) reqOption {
	return func(r *http.Request) { r.Header.Set(k, v) }
}

// testClientHeader names the client a test request comes from (see from):
// the servers under test take it as the address API Gateway would give.
const testClientHeader = "X-Test-Client"

// testClientAddress is the servers' Config.ClientAddress: the test's
// client, or "" (the connection's address, 127.0.0.1).
func testClientAddress(r *http.Request) string { return r.Header.Get(testClientHeader) }

// from sends the request as if from the client address addr.
func from(addr string) reqOption {
	return func(r *http.Request) { r.Header.Set(testClientHeader, addr) }
}

// as signs the request in as u (no header for the zero user: anonymous).
func as(u user) reqOption {
	return func(r *http.Request) {
		if u.Token != "" {
			r.Header.Set("Authorization", "Bearer "+u.Token)
		}
	}
}

// raw is a request body sent as is.
type raw string

// do sends a request. body is nil (none), a raw string, or a value to
// encode as JSON. It may run on any goroutine: a failure to send is
// reported with Errorf and answers a zero response.
func (a *api) do(method, path string, body any, opts ...reqOption) response {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case raw:
		rd = strings.NewReader(string(b))
	default:
		data, err := json.Marshal(b)
		if err != nil {
			a.t.Errorf("encode request: %v", err)
			return response{}
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(context.Background(), method, a.base+path, rd)
	if err != nil {
		a.t.Errorf("new request: %v", err)
		return response{}
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, o := range opts {
		o(req)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		a.t.Errorf("%s %s: %v", method, path, err)
		return response{}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		a.t.Errorf("read response: %v", err)
		return response{}
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: data}
}

// want fails the test unless r has the status.
func want(tb testing.TB, r response, status int) {
	tb.Helper()
	if r.Status != status {
		tb.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
}

// wantProblem fails the test unless r is a problem with the status and the
// type https://jobboard.example/problems/<kind>.
func wantProblem(tb testing.TB, r response, status int, kind string) problem {
	tb.Helper()
	if r.Status != status {
		tb.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	p := r.problem(tb)
	if want := httpapi.ProblemBase + kind; p.Type != want {
		tb.Fatalf("problem type %q, want %q", p.Type, want)
	}
	if p.Status != status {
		tb.Fatalf("problem status member %d, want %d", p.Status, status)
	}
	if p.RequestID == "" || p.RequestID != r.Header.Get("X-Request-Id") {
		tb.Fatalf("problem request_id %q, header %q", p.RequestID, r.Header.Get("X-Request-Id"))
	}
	return p
}

// fields returns the field names of a problem's errors member.
func (p problem) fields() []string {
	var out []string
	for _, f := range p.Errors {
		out = append(out, f.Field)
	}
	return out
}

// user is a registered account and its token.
type user struct {
	ID    int64
	Email string
	Token string
	Role  jobboard.Role
}

var emailSeq atomic.Int64

// register creates an account through the API.
func (a *api) register(role jobboard.Role) user {
	a.t.Helper()
	email := fmt.Sprintf("%s%d@example.com", role, emailSeq.Add(1))
	r := a.do("POST", "/v1/auth/register", map[string]any{
		"email": email, "password": "correct horse battery", "name": "Test " + string(role), "role": role})
	want(a.t, r, http.StatusCreated)
	s := decodeAs[struct {
		User  jobboard.User `json:"user"`
		Token string        `json:"token"`
	}](a.t, r)
	return user{ID: s.User.ID, Email: email, Token: s.Token, Role: role}
}

// company creates a company of the employer through the API.
func (a *api) company(employer user) jobboard.Company {
	a.t.Helper()
	r := a.do("POST", "/v1/companies", map[string]any{"name": "Acme " + employer.Email, "website": "https://acme.example"}, as(employer))
	want(a.t, r, http.StatusCreated)
	return decodeAs[jobboard.Company](a.t, r)
}

// jobInput is a valid job body.
func jobInput(title string) map[string]any {
	return map[string]any{
		"title": title, "description": "Build and run services in Go.", "location": "Berlin",
		"remote": true, "employment_type": "full_time",
		"salary": map[string]any{"min": 60000, "max": 80000, "currency": "EUR"},
	}
}

// job posts a job through the API.
func (a *api) job(employer user, companyID int64, title string) jobboard.Job {
	a.t.Helper()
	r := a.do("POST", fmt.Sprintf("/v1/companies/%d/jobs", companyID), jobInput(title), as(employer))
	want(a.t, r, http.StatusCreated)
	return decodeAs[jobboard.Job](a.t, r)
}

// apply applies to a job through the API.
func (a *api) apply(candidate user, jobID int64) jobboard.Application {
	a.t.Helper()
	r := a.do("POST", fmt.Sprintf("/v1/jobs/%d/applications", jobID), map[string]any{"cover_letter": "Hello"}, as(candidate))
	want(a.t, r, http.StatusCreated)
	return decodeAs[jobboard.Application](a.t, r)
}

// world is a small cast: an employer with a company and an open job, a
// candidate who applied to it, and outsiders of both kinds.
type world struct {
	employer, candidate           user
	otherEmployer, otherCandidate user
	company, otherCompany         jobboard.Company
	job                           jobboard.Job
	application                   jobboard.Application
}

func (a *api) world() world {
	a.t.Helper()
	var w world
	w.employer = a.register(jobboard.RoleEmployer)
	w.candidate = a.register(jobboard.RoleCandidate)
	w.otherEmployer = a.register(jobboard.RoleEmployer)
	w.otherCandidate = a.register(jobboard.RoleCandidate)
	w.company = a.company(w.employer)
	w.otherCompany = a.company(w.otherEmployer)
	w.job = a.job(w.employer, w.company.ID, "Go Engineer")
	w.application = a.apply(w.candidate, w.job.ID)
	return w
}

// counts returns the number of rows in every table the API writes, to show
// that a refused request changed nothing.
func (a *api) counts() map[string]int {
	a.t.Helper()
	out := map[string]int{}
	for _, table := range []string{"users", "companies", "company_members", "jobs", "applications", "application_status_history", "outbox"} {
		var n int
		if err := a.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			a.t.Fatalf("count %s: %v", table, err)
		}
		out[table] = n
	}
	return out
}

// statusEvents counts the status events in the outbox.
func (a *api) statusEvents() int {
	a.t.Helper()
	var n int
	if err := a.db.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM outbox WHERE event_type = $1", jobboard.EventTypeStatusChanged).Scan(&n); err != nil {
		a.t.Fatalf("count status events: %v", err)
	}
	return n
}

// jobsFingerprint is every job row's mutable content, to show that a
// refused PATCH changed nothing.
func (a *api) jobsFingerprint() string {
	a.t.Helper()
	var s string
	err := a.db.Pool.QueryRow(context.Background(),
		`SELECT coalesce(string_agg(concat_ws('|', id, title, description, location, remote, employment_type,
			salary_min, salary_max, salary_currency, status, updated_at), ';' ORDER BY id), '') FROM jobs`).Scan(&s)
	if err != nil {
		a.t.Fatalf("fingerprint jobs: %v", err)
	}
	var apps string
	err = a.db.Pool.QueryRow(context.Background(),
		`SELECT coalesce(string_agg(concat_ws('|', id, status, version), ';' ORDER BY id), '') FROM applications`).Scan(&apps)
	if err != nil {
		a.t.Fatalf("fingerprint applications: %v", err)
	}
	return s + "/" + apps
}
