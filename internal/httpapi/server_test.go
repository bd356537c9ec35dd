package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/core"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/jobboard/jobboard/internal/dev/syncio"
	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/httpapi/openapitest"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
)

// The document and routes.go describe the same set of endpoints.
func TestOpenAPIDocumentMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc, _ := openapitest.Spec(t)
	var documented []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			documented = append(documented, method+" "+path)
		}
	}
	routes := httpapi.RoutePatterns()
	slices.Sort(documented)
	slices.Sort(routes)
	if !slices.Equal(documented, routes) {
		t.Fatalf("documented operations and routes differ:\ndocumented %v\nroutes     %v", documented, routes)
	}
	// Every operation documents its 500 (and every problem response uses
	// the problem schema), so that any answer a test meets is described.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			if path == "/healthz" || path == "/v1/openapi.json" {
				continue
			}
			if op.Responses.Status(http.StatusInternalServerError) == nil && path != "/readyz" {
				t.Errorf("%s %s does not document 500", method, path)
			}
		}
	}
}

// The validator itself rejects responses that differ from the document, so
// a passing suite means something.
func TestResponseValidatorRejectsMismatches(t *testing.T) {
	t.Parallel()
	h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r1"}}
	problemHeader := http.Header{"Content-Type": {"application/problem+json"}, "X-Request-Id": {"r1"}}
	okUser := `{"id":1,"email":"a@example.com","name":"A","role":"candidate","created_at":"2026-12-02T10:00:00Z","email_verified":false,"email_delivery":{"deliverable":true}}`
	tests := []struct {
		name, method, path string
		status             int
		header             http.Header
		body               string
		ok                 bool
	}{
		{"the control", "GET", "/v1/me", 200, h, okUser, true},
		{"wrong member type", "GET", "/v1/me", 200, h, strings.Replace(okUser, `"id":1`, `"id":"1"`, 1), false},
		{"undocumented member", "GET", "/v1/me", 200, h, strings.Replace(okUser, `{`, `{"password_hash":"x",`, 1), false},
		{"undocumented status", "GET", "/v1/me", 409, problemHeader, `{"type":"https://jobboard.example/problems/x","title":"Conflict","status":409}`, false},
		{"missing X-Request-Id", "GET", "/v1/me", 200, http.Header{"Content-Type": {"application/json"}}, okUser, false},
		{"problem as plain JSON", "GET", "/v1/me", 401, h, `{"type":"https://jobboard.example/problems/unauthenticated","title":"Unauthorized","status":401}`, false},
		{"bad role", "GET", "/v1/me", 200, h, strings.Replace(okUser, "candidate", "admin", 1), false},
		{"unknown path must be 404", "GET", "/v1/nope", 200, h, `{}`, false},
		{"unknown path 404 problem", "GET", "/v1/nope", 404, problemHeader, `{"type":"https://jobboard.example/problems/not-found","title":"Not Found","status":404}`, true},
		{"304 without ETag", "GET", "/v1/jobs/1", 304, http.Header{"X-Request-Id": {"r1"}, "Cache-Control": {"private, no-cache"}, "Vary": {"Authorization"}}, ``, false},
		{"304 control", "GET", "/v1/jobs/1", 304, http.Header{"X-Request-Id": {"r1"}, "Etag": {`"x1"`}, "Cache-Control": {"private, no-cache"}, "Vary": {"Authorization"}}, ``, true},
		{"304 where no ETag is given", "GET", "/v1/me", 304, http.Header{"X-Request-Id": {"r1"}, "Etag": {`"x1"`}}, ``, false},
		{"Idempotent-Replayed not true", "POST", "/v1/companies", 201,
			http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"r1"}, "Location": {"/v1/companies/1"}, "Idempotent-Replayed": {"yes"}},
			`{"id":1,"name":"A","description":"","website":"","created_by":1,"created_at":"2026-12-02T10:00:00Z"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, tt.path, nil)
			err := openapitest.Check(t, req, tt.status, tt.header, []byte(tt.body))
			if (err == nil) != tt.ok {
				t.Fatalf("validation error %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	r := a.do("GET", "/v1/openapi.json", nil)
	want(t, r, http.StatusOK)
	var doc map[string]any
	if err := json.Unmarshal(r.Body, &doc); err != nil || doc["openapi"] != "3.0.3" {
		t.Fatalf("served document: %v, openapi=%v", err, doc["openapi"])
	}
	if string(r.Body) != string(httpapi.OpenAPI()) {
		t.Fatal("served document differs from the embedded one")
	}
}

func TestUnknownRoutesAndMethods(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	wantProblem(t, a.do("GET", "/v1/nope", nil), http.StatusNotFound, "not-found")
	wantProblem(t, a.do("GET", "/v1/jobs/", nil), http.StatusNotFound, "not-found")
	// The mux's catch-all answers these; it must not pass for a route that
	// takes every method.
	wantProblem(t, a.do("GET", "/", nil), http.StatusNotFound, "not-found")
	wantProblem(t, a.do("POST", "/v1", raw(`{}`)), http.StatusNotFound, "not-found")
	r := a.do("DELETE", "/v1/jobs/1", nil)
	wantProblem(t, r, http.StatusMethodNotAllowed, "method-not-allowed")
	if got := r.Header.Get("Allow"); got != "GET, HEAD, PATCH" {
		t.Fatalf("Allow %q", got)
	}
	r = a.do("PUT", "/v1/companies", raw(`{}`))
	wantProblem(t, r, http.StatusMethodNotAllowed, "method-not-allowed")
	if got := r.Header.Get("Allow"); got != "POST" {
		t.Fatalf("Allow %q", got)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	want(t, a.do("GET", "/healthz", nil), http.StatusOK)
	want(t, a.do("GET", "/readyz", nil), http.StatusOK)

	// A pool that is closed cannot ping: 503, while liveness stays 200.
	closed, err := postgres.Open(context.Background(), a.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	down := newAPIOn(t, a.db, func(c *httpapi.Config) { c.Pinger = closed })
	wantProblem(t, down.do("GET", "/readyz", nil), http.StatusServiceUnavailable, "unavailable")
	want(t, down.do("GET", "/healthz", nil), http.StatusOK)
	if lines := logLines(t, down.logs); !slices.ContainsFunc(lines, func(l map[string]any) bool { return l["level"] == "WARN" && l["error"] != nil }) {
		t.Fatalf("failed ping not logged: %v", lines)
	}

	none := newAPIOn(t, a.db, func(c *httpapi.Config) { c.Pinger = nil })
	wantProblem(t, none.do("GET", "/readyz", nil), http.StatusServiceUnavailable, "unavailable")
}

// failingJobs makes Job fail (or panic) to inject an unexpected error.
type failingJobs struct {
	jobboard.JobStore
	panic bool
}

var errInjected = errors.New("injected failure: connection reset by peer at 10.0.0.7")

func (f failingJobs) Job(context.Context, *jobboard.Actor, int64) (jobboard.Job, error) {
	if f.panic {
		panic("injected panic")
	}
	return jobboard.Job{}, fmt.Errorf("job: %w", errInjected)
}

// failingRelay records events and fails.
type failingRelay struct {
	mu     sync.Mutex
	events []jobboard.Event
	err    error
}

func (f *failingRelay) Relay(_ context.Context, ev jobboard.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
	return f.err
}

// got returns the status events relayed (registrations relay verification
// events too; all returns those as well).
func (f *failingRelay) got() []jobboard.Event {
	var out []jobboard.Event
	for _, ev := range f.all() {
		if ev.Type == jobboard.EventTypeStatusChanged {
			out = append(out, ev)
		}
	}
	return out
}

func (f *failingRelay) all() []jobboard.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// An unexpected error answers a generic 500 and its cause is logged, with
// the request id, at ERROR; a panic is recovered the same way.
func TestUnexpectedErrorsAndPanics(t *testing.T) {
	t.Parallel()
	for _, panics := range []bool{false, true} {
		t.Run(fmt.Sprintf("panic=%v", panics), func(t *testing.T) {
			t.Parallel()
			a := newAPI(t, func(c *httpapi.Config) { c.Jobs = failingJobs{JobStore: c.Jobs, panic: panics} })
			r := a.do("GET", "/v1/jobs/1", nil)
			p := wantProblem(t, r, http.StatusInternalServerError, "internal")
			if strings.Contains(string(r.Body), "10.0.0.7") || strings.Contains(string(r.Body), "panic") {
				t.Fatalf("500 leaks its cause: %s", r.Body)
			}
			var logged bool
			for _, line := range logLines(t, a.logs) {
				if line["level"] == "ERROR" && line["request_id"] == p.RequestID && line["msg"] != "request" {
					text := fmt.Sprint(line)
					logged = strings.Contains(text, "10.0.0.7") || strings.Contains(text, "injected panic")
				}
			}
			if !logged {
				t.Fatalf("cause not logged at ERROR with request id %s:\n%v", p.RequestID, logLines(t, a.logs))
			}
			// The server still serves after a panic.
			want(t, a.do("GET", "/healthz", nil), http.StatusOK)
		})
	}
}

// With Metrics set, every request writes one EMF line, by function
// version: Requests 1, ServerErrors 1 for a 5xx answer (a recovered panic
// too, which Lambda never counts as an error), 0 otherwise.
func TestRequestsWriteAMetricLine(t *testing.T) {
	t.Parallel()
	metrics := &syncio.Buffer{}
	a := newAPI(t, func(c *httpapi.Config) {
		c.Jobs = failingJobs{JobStore: c.Jobs, panic: true}
		c.Metrics, c.FunctionVersion = metrics, "3"
	})
	wantProblem(t, a.do("GET", "/v1/jobs/1", nil), http.StatusInternalServerError, "internal")
	want(t, a.do("GET", "/healthz", nil), http.StatusOK)
	wantProblem(t, a.do("GET", "/v1/nowhere", nil), http.StatusNotFound, "not-found")

	var requests, serverErrors float64
	lines := logLines(t, metrics)
	for _, m := range lines {
		if m["Service"] != "api" || m["FunctionVersion"] != "3" || m["_aws"] == nil {
			t.Errorf("line %v; want Service api, FunctionVersion 3, an EMF directive", m)
		}
		requests += m["Requests"].(float64)
		serverErrors += m["ServerErrors"].(float64)
	}
	if len(lines) != 3 || requests != 3 || serverErrors != 1 {
		t.Errorf("%d lines, Requests %v, ServerErrors %v; want 3, 3, 1: %v", len(lines), requests, serverErrors, lines)
	}
}

// Every log line of a request carries its request id: the access line,
// errors, and the relay warning; requests that come through API Gateway use
// API Gateway's request id, given by Config.RequestID (as functions/api
// gives it).
func TestRequestIDInEveryLogLine(t *testing.T) {
	t.Parallel()
	relay := &failingRelay{err: errors.New("queue unavailable")}
	a := newAPI(t, func(c *httpapi.Config) {
		c.Relay = relay
		c.Jobs = failingJobsOnly{JobStore: c.Jobs, failID: 999}
		c.RequestID = func(r *http.Request) string {
			gw, _ := core.GetAPIGatewayV2ContextFromContext(r.Context())
			return gw.RequestID
		}
	})
	w := a.world()
	setupLines := len(logLines(t, a.logs))
	responses := []response{
		a.do("GET", "/v1/jobs?q=engineer", nil),
		a.do("GET", "/v1/jobs/999", nil), // 500, logged at ERROR
		a.do("PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID), map[string]any{"status": "reviewing"}, as(w.employer)), // relay WARN
		a.do("GET", "/v1/nope", nil),
	}
	// Through the Lambda adapter, with API Gateway's request id.
	gw := proxy(t, a.handler, events.APIGatewayV2HTTPRequest{
		RawPath:        fmt.Sprintf("/v1/jobs/%d", w.job.ID),
		RequestContext: events.APIGatewayV2HTTPRequestContext{RequestID: "gw-request-7", HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: fmt.Sprintf("/v1/jobs/%d", w.job.ID)}},
	})
	if gw.Status != http.StatusOK || gw.Header.Get("X-Request-Id") != "gw-request-7" {
		t.Fatalf("through API Gateway: %s, X-Request-Id %q", gw, gw.Header.Get("X-Request-Id"))
	}
	responses = append(responses, gw)

	lines := logLines(t, a.logs)[setupLines:]
	perID := map[string][]map[string]any{}
	for _, line := range lines {
		id, _ := line["request_id"].(string)
		if id == "" {
			t.Fatalf("log line without request_id: %v", line)
		}
		perID[id] = append(perID[id], line)
	}
	for i, r := range responses {
		id := r.Header.Get("X-Request-Id")
		got := perID[id]
		var access, other int
		for _, line := range got {
			if line["msg"] == "request" {
				access++
				if line["status"] != float64(r.Status) || line["method"] == nil || line["pattern"] == nil || line["duration"] == nil {
					t.Errorf("access line %v for %s", line, r)
				}
			} else {
				other++
			}
		}
		if wantPattern := map[int]string{3: "unmatched", 4: "GET /v1/jobs/{id}", 2: "PATCH /v1/applications/{id}"}[i]; wantPattern != "" {
			for _, line := range got {
				if line["msg"] == "request" && line["pattern"] != wantPattern {
					t.Errorf("response %d: pattern %v, want %q", i, line["pattern"], wantPattern)
				}
			}
		}
		if access != 1 {
			t.Errorf("response %d (%s): %d access lines for request %s, want 1", i, r, access, id)
		}
		// The 500 and the relay failure add one line each.
		if (i == 1 || i == 2) && other != 1 {
			t.Errorf("response %d: %d non-access lines, want 1: %v", i, other, got)
		}
	}
	if evs := relay.got(); len(evs) != 1 {
		t.Fatalf("relay saw %d events, want 1", len(evs))
	}
	for _, line := range perID[responses[2].Header.Get("X-Request-Id")] {
		if line["msg"] != "request" && (line["level"] != "WARN" || line["event_id"] != relay.got()[0].EventID) {
			t.Fatalf("relay failure line %v", line)
		}
	}
	// Request ids differ between requests.
	if len(perID) != len(responses) {
		t.Fatalf("%d distinct request ids in the log for %d requests", len(perID), len(responses))
	}
}

// failingJobsOnly fails Job for one id only.
// At LOG_LEVEL info the access lines of the requests that went right (2xx,
// and the client's errors) are not written: the HTTP API's access log has
// them on AWS. A 5xx still is, at ERROR, beside the error it logs.
func TestAccessLinesOfGoodRequestsAreDebug(t *testing.T) {
	t.Parallel()
	logs := &syncio.Buffer{}
	a := newAPI(t, func(c *httpapi.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		c.Jobs = failingJobsOnly{JobStore: c.Jobs, failID: 999}
	})
	w := a.world()
	setupLines := len(logLines(t, logs))
	ok := a.do("GET", fmt.Sprintf("/v1/jobs/%d", w.job.ID), nil)
	want(t, ok, http.StatusOK)
	wantProblem(t, a.do("GET", "/v1/nope", nil), http.StatusNotFound, "not-found")
	failed := a.do("GET", "/v1/jobs/999", nil)
	want(t, failed, http.StatusInternalServerError)

	var access []map[string]any
	for _, line := range logLines(t, logs)[setupLines:] {
		if line["msg"] == "request" {
			access = append(access, line)
		}
	}
	if len(access) != 1 || access[0]["level"] != "ERROR" || access[0]["status"] != float64(http.StatusInternalServerError) ||
		access[0]["request_id"] != failed.Header.Get("X-Request-Id") {
		t.Fatalf("access lines at INFO: %v; want only the 500's, at ERROR", access)
	}
}

type failingJobsOnly struct {
	jobboard.JobStore
	failID int64
}

func (f failingJobsOnly) Job(ctx context.Context, actor *jobboard.Actor, id int64) (jobboard.Job, error) {
	if id == f.failID {
		return jobboard.Job{}, errInjected
	}
	return f.JobStore.Job(ctx, actor, id)
}

// proxy sends an API Gateway HTTP API (payload v2) event through the Lambda
// adapter and validates the answer against the document like every other.
func proxy(t *testing.T, h http.Handler, ev events.APIGatewayV2HTTPRequest) response {
	t.Helper()
	out, err := httpadapter.NewV2(h).ProxyWithContext(context.Background(), ev)
	if err != nil {
		t.Fatalf("proxy: %v", err)
	}
	hdr := http.Header{}
	for k, v := range out.Headers {
		hdr.Set(k, v)
	}
	req := httptest.NewRequest(ev.RequestContext.HTTP.Method, ev.RawPath, nil)
	if err := openapitest.Check(t, req, out.StatusCode, hdr, []byte(out.Body)); err != nil {
		t.Errorf("proxied %s %s → %d does not match the OpenAPI document: %v", req.Method, ev.RawPath, out.StatusCode, err)
	}
	return response{Status: out.StatusCode, Header: hdr, Body: []byte(out.Body)}
}
