package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/functions/api/settings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/httpapi/openapitest"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// withDB is m with a DATABASE_URL (unless it has one), as the settings
// want one.
func withDB(m map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := m[k]; ok || k != "DATABASE_URL" {
			return v
		}
		return "postgres://127.0.0.1:1/none"
	}
}

// staticKeys signs every token with key.
func staticKeys(key []byte) httpapi.TokenKeySource {
	return func(context.Context, bool) (httpapi.TokenKeys, error) { return httpapi.TokenKeys{Current: key}, nil }
}

// openHandler opens the database of src as wire does (in the settings'
// statement timeout, options adjusting the pool) and builds the API's
// handler over it with keys and no webhook sealer; the pool is closed when
// t ends.
func openHandler(t testing.TB, s settings.Settings, src database.Source, keys httpapi.TokenKeySource, options ...func(*pgxpool.Config)) http.Handler {
	t.Helper()
	db, err := src.Open(context.Background(), append([]func(*pgxpool.Config){postgres.WithStatementTimeout(s.StatementTimeout)}, options...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return newHandler(context.Background(), s, db, keys, nil, slog.New(slog.DiscardHandler), nil)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	url := "postgres://127.0.0.1:1/none"
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no database", []string{"api"}, map[string]string{}, "DATABASE_URL"},
		{"no secret in Lambda", []string{"api"}, map[string]string{"DATABASE_URL": url, "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}, "JWT_SECRET"},
		{"the insecure webhook switch in Lambda", []string{"api"}, map[string]string{"DATABASE_URL": url, "JWT_SECRET": strings.Repeat("k", 32),
			"WEBHOOK_SEALING_KEY": strings.Repeat("w", 64), "AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "WEBHOOK_ALLOW_INSECURE": "true"}, "WEBHOOK_ALLOW_INSECURE"},
		{"short secret", []string{"api"}, map[string]string{"DATABASE_URL": url, "JWT_SECRET": "short"}, "at least 32"},
		{"bad log level", []string{"api"}, map[string]string{"DATABASE_URL": url, "LOG_LEVEL": "loud"}, "LOG_LEVEL"},
		{"bad statement timeout", []string{"api"}, map[string]string{"DATABASE_URL": url, "DATABASE_STATEMENT_TIMEOUT": "5"}, "DATABASE_STATEMENT_TIMEOUT"},
		{"zero statement timeout", []string{"api"}, map[string]string{"DATABASE_URL": url, "DATABASE_STATEMENT_TIMEOUT": "0s"}, "DATABASE_STATEMENT_TIMEOUT"},
		{"bad query exec mode", []string{"api"}, map[string]string{"DATABASE_URL": url, "DATABASE_QUERY_EXEC_MODE": "prepared"}, "DATABASE_QUERY_EXEC_MODE"},
		{"bad CORS origin", []string{"api"}, map[string]string{"DATABASE_URL": url, "CORS_ALLOWED_ORIGINS": "http://localhost:5173,localhost:3000"}, "CORS_ALLOWED_ORIGINS"},
		{"bad cache max age", []string{"api"}, map[string]string{"DATABASE_URL": url, "CACHE_MAX_AGE": "30"}, "CACHE_MAX_AGE"},
		{"tiny stale-while-revalidate", []string{"api"}, map[string]string{"DATABASE_URL": url, "CACHE_STALE_WHILE_REVALIDATE": "10ms"}, "CACHE_STALE_WHILE_REVALIDATE"},
		{"zero password hashes", []string{"api"}, map[string]string{"DATABASE_URL": url, "PASSWORD_HASH_CONCURRENCY": "0"}, "PASSWORD_HASH_CONCURRENCY"},
		{"bad password hashes", []string{"api"}, map[string]string{"DATABASE_URL": url, "PASSWORD_HASH_CONCURRENCY": "many"}, "PASSWORD_HASH_CONCURRENCY"},
		{"unknown command", []string{"api", "serve"}, map[string]string{"DATABASE_URL": url}, "unknown command"},
		{"migrate is its own command", []string{"api", "migrate"}, map[string]string{"DATABASE_URL": url}, "make migrate"},
		{"unreachable database", []string{"api"}, map[string]string{"DATABASE_URL": url, "JWT_SECRET": strings.Repeat("k", 32)}, "connect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, env(tt.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run: %v, want an error mentioning %q", err, tt.want)
			}
		})
	}
}

// DATABASE_STATEMENT_TIMEOUT reaches the pool: the API's connections carry
// it as their statement_timeout, 5s unless set.
func TestStatementTimeoutSetting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	for _, tt := range []struct{ value, want string }{{"", "5s"}, {"1500ms", "1500ms"}, {"2m", "2min"}} {
		cfg, err := settings.Load(withDB(map[string]string{"DATABASE_STATEMENT_TIMEOUT": tt.value}))
		if err != nil {
			t.Fatal(err)
		}
		// Each connection of the store's pool reports its setting as it
		// opens; Open's ping opens the first.
		var mu sync.Mutex
		var got string
		report := func(c *pgxpool.Config) {
			c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
				mu.Lock()
				defer mu.Unlock()
				return conn.QueryRow(ctx, "SHOW statement_timeout").Scan(&got)
			}
		}
		db, err := postgres.Open(ctx, url, postgres.WithStatementTimeout(cfg.StatementTimeout), report)
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		mu.Lock()
		seen := got
		mu.Unlock()
		if seen != tt.want {
			t.Errorf("DATABASE_STATEMENT_TIMEOUT=%q: statement_timeout %q, want %q", tt.value, seen, tt.want)
		}
	}
}

// lineWatcher is an io.Writer that reports the "listening" log line's
// address on a channel.
type lineWatcher struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	addrs chan string
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	for _, line := range bytes.Split(p, []byte("\n")) {
		var m struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &m) == nil && m.Msg == "listening" {
			w.addrs <- m.Addr
		}
	}
	return len(p), nil
}

func (w *lineWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// Locally, run serves HTTP on loopback (over a database that make migrate
// brought to the schema), and shuts down cleanly when its context ends.
func TestRunServesLocallyAndShutsDown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &lineWatcher{addrs: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"api"}, env(map[string]string{"DATABASE_URL": pgtest.NewURL(t), "PORT": "0", "LOG_LEVEL": "debug"}), out)
	}()
	var base string
	select {
	case base = <-out.addrs:
	case err := <-done:
		t.Fatalf("run returned before listening: %v\n%s", err, out)
	case <-time.After(30 * time.Second):
		t.Fatalf("not listening after 30s:\n%s", out)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("listening on %q, want loopback", base)
	}
	client := &http.Client{Transport: openapitest.Transport(t, nil)}
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
	}
	resp, err := client.Post(base+"/v1/auth/register", "application/json",
		strings.NewReader(`{"email":"local@example.com","password":"correct horse battery","name":"L","role":"candidate"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("register: %d", resp.StatusCode)
	}
	if !strings.Contains(out.String(), "JWT_SECRET is not set") {
		t.Fatalf("no warning about the generated secret:\n%s", out)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after shutdown: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
	if resp, err := client.Get(base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("still serving after shutdown")
	}
}

// The sample events in events/ go through the same adapter as in Lambda,
// against a fresh database. The samples name fixed ids: in a fresh database
// the first users, company, job and application get id 1, so the test
// creates, in order, an employer (user 1), a candidate (user 2), the
// employer's company (1) and an open remote "Go Engineer" job (1); the
// apply sample then creates application 1, which the change-status sample
// moves to reviewing with If-Match "1". The bearer token placeholders
// {{candidate_token}} and {{employer_token}} are replaced with tokens of
// those users. To try a sample against a deployed or local API, do the same.
func TestSampleEvents(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := []byte(strings.Repeat("k", 32))
	h := openHandler(t, settings.Settings{}, database.Source{URL: pgtest.NewURL(t)}, staticKeys(key))

	call := func(method, path, token string, body any) []byte {
		t.Helper()
		data, _ := json.Marshal(body)
		req := httptest.NewRequest(method, path, bytes.NewReader(data))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if err := openapitest.Check(t, req, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
			t.Errorf("%s %s does not match the OpenAPI document: %v", method, path, err)
		}
		if rec.Code >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	type session struct {
		User  jobboard.User `json:"user"`
		Token string        `json:"token"`
	}
	var employer, candidate session
	_ = json.Unmarshal(call("POST", "/v1/auth/register", "", map[string]any{"email": "boss@example.com", "password": "correct horse battery", "name": "Boss", "role": "employer"}), &employer)
	_ = json.Unmarshal(call("POST", "/v1/auth/register", "", map[string]any{"email": "cand@example.com", "password": "correct horse battery", "name": "Cand", "role": "candidate"}), &candidate)
	var company jobboard.Company
	_ = json.Unmarshal(call("POST", "/v1/companies", employer.Token, map[string]any{"name": "Acme"}), &company)
	var job jobboard.Job
	_ = json.Unmarshal(call("POST", "/v1/companies/1/jobs", employer.Token, map[string]any{
		"title": "Go Engineer", "description": "Build services in Go.", "remote": true, "employment_type": "full_time"}), &job)
	if employer.User.ID != 1 || candidate.User.ID != 2 || company.ID != 1 || job.ID != 1 {
		t.Fatalf("ids: employer %d candidate %d company %d job %d; the samples assume 1, 2, 1, 1",
			employer.User.ID, candidate.User.ID, company.ID, job.ID)
	}

	adapter := httpadapter.NewV2(h)
	tests := []struct {
		file   string
		status int
		check  func(t *testing.T, body string)
	}{
		{"api-list-jobs.json", http.StatusOK, func(t *testing.T, body string) {
			var page struct{ Items []jobboard.Job }
			if err := json.Unmarshal([]byte(body), &page); err != nil || len(page.Items) != 1 || page.Items[0].ID != 1 {
				t.Fatalf("page %s (%v)", body, err)
			}
		}},
		{"api-apply.json", http.StatusCreated, func(t *testing.T, body string) {
			var app jobboard.Application
			if err := json.Unmarshal([]byte(body), &app); err != nil || app.ID != 1 || app.CandidateID != 2 || app.Status != jobboard.StatusSubmitted {
				t.Fatalf("application %s (%v)", body, err)
			}
		}},
		{"api-change-status.json", http.StatusOK, func(t *testing.T, body string) {
			var app jobboard.Application
			if err := json.Unmarshal([]byte(body), &app); err != nil || app.Status != jobboard.StatusReviewing || app.Version != 2 {
				t.Fatalf("application %s (%v)", body, err)
			}
		}},
	}
	for _, tt := range tests { // in order: each sample builds on the previous one
		data, err := os.ReadFile(filepath.Join("..", "..", "events", tt.file))
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("{{candidate_token}}"), []byte(candidate.Token))
		data = bytes.ReplaceAll(data, []byte("{{employer_token}}"), []byte(employer.Token))
		var ev events.APIGatewayV2HTTPRequest
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ev); err != nil {
			t.Fatalf("%s is not an API Gateway v2 event: %v", tt.file, err)
		}
		resp, err := adapter.ProxyWithContext(ctx, ev)
		if err != nil {
			t.Fatalf("%s: %v", tt.file, err)
		}
		hdr := http.Header{}
		for k, v := range resp.Headers {
			hdr.Set(k, v)
		}
		req := httptest.NewRequest(ev.RequestContext.HTTP.Method, ev.RawPath, nil)
		if err := openapitest.Check(t, req, resp.StatusCode, hdr, []byte(resp.Body)); err != nil {
			t.Errorf("%s: the answer does not match the OpenAPI document: %v", tt.file, err)
		}
		if resp.StatusCode != tt.status {
			t.Fatalf("%s: status %d, want %d: %s", tt.file, resp.StatusCode, tt.status, resp.Body)
		}
		if got := resp.Headers["X-Request-Id"]; got != ev.RequestContext.RequestID {
			t.Fatalf("%s: X-Request-Id %q, want API Gateway's %q", tt.file, got, ev.RequestContext.RequestID)
		}
		tt.check(t, resp.Body)
	}
}

// A request that is still waiting answerMargin before the invocation's
// deadline answers 503 itself: here GET /v1/jobs waits on a lock that a
// test transaction holds, longer than the request may, and the handler
// wrapped as runLambda wraps it answers a problem in time, while the
// database's statement timeout (5 s) would have been too late.
func TestRequestsAnswerBeforeTheInvocationDeadline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	key := []byte(strings.Repeat("k", 32))
	h := openHandler(t, settings.Settings{StatementTimeout: 5 * time.Second}, database.Source{URL: url}, staticKeys(key))

	lock := pgtest.Pool(t, url)
	tx, err := lock.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // the lock is released when the test ends
	if _, err := tx.Exec(ctx, "LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	const invocation = 1500 * time.Millisecond
	deadline := time.Now().Add(invocation)
	invocationCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	req := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil).WithContext(invocationCtx)
	rec := httptest.NewRecorder()
	withAnswerMargin(h, answerMargin).ServeHTTP(rec, req)
	answered := time.Now()

	if rec.Code != http.StatusServiceUnavailable || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/problem+json") {
		t.Fatalf("answer %d %s %s; want a 503 problem", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
	if answered.After(deadline) {
		t.Errorf("answered %v after the invocation's deadline", answered.Sub(deadline))
	}
	if err := openapitest.Check(t, req, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
		t.Errorf("the 503 does not match the OpenAPI document: %v", err)
	}
}
