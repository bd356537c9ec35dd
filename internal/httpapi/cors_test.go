package httpapi_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
)

const frontEnd = "http://localhost:5173"

func preflight(origin, method, headers string) []reqOption {
	return []reqOption{header("Origin", origin), header("Access-Control-Request-Method", method),
		header("Access-Control-Request-Headers", headers)}
}

func vary(r response) []string {
	var out []string
	for _, v := range r.Header.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			out = append(out, strings.TrimSpace(f))
		}
	}
	return out
}

// With allowed origins, a preflight from one of them is answered with the
// methods of the path and the request headers the API reads; the actual
// answer names the origin and exposes the headers a client needs.
func TestCORSAllowedOrigin(t *testing.T) {
	t.Parallel()
	a := newAPI(t, func(c *httpapi.Config) { c.CORSAllowedOrigins = []string{"https://app.example.com", frontEnd} })
	employer := a.register(jobboard.RoleEmployer)

	r := a.do("OPTIONS", "/v1/companies", nil, preflight(frontEnd, "POST", "authorization,content-type,idempotency-key")...)
	want(t, r, http.StatusNoContent)
	checks := map[string]string{
		"Access-Control-Allow-Origin":  frontEnd,
		"Access-Control-Allow-Methods": "POST",
		"Access-Control-Allow-Headers": "Authorization, Content-Type, Idempotency-Key, If-Match, If-None-Match",
		"Access-Control-Max-Age":       "600",
	}
	for h, v := range checks {
		if got := r.Header.Get(h); got != v {
			t.Errorf("preflight %s = %q, want %q", h, got, v)
		}
	}
	if r.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Error("credentials allowed")
	}
	if v := vary(r); !slices.Contains(v, "Origin") || !slices.Contains(v, "Access-Control-Request-Method") {
		t.Errorf("preflight Vary %v", v)
	}
	r = a.do("OPTIONS", "/v1/jobs/1", nil, preflight(frontEnd, "PATCH", "")...)
	if got := r.Header.Get("Access-Control-Allow-Methods"); got != "GET, HEAD, PATCH" {
		t.Errorf("methods of /v1/jobs/{id}: %q", got)
	}

	r = a.do("POST", "/v1/companies", map[string]any{"name": "Cors"}, as(employer), header("Origin", frontEnd), withKey(newKey()))
	want(t, r, http.StatusCreated)
	if r.Header.Get("Access-Control-Allow-Origin") != frontEnd || !slices.Contains(vary(r), "Origin") {
		t.Fatalf("actual answer: %v", r.Header)
	}
	exposed := r.Header.Get("Access-Control-Expose-Headers")
	for _, h := range []string{"ETag", "Location", "X-Request-Id", "Idempotent-Replayed", "Retry-After"} {
		if !strings.Contains(exposed, h) {
			t.Errorf("%s not exposed: %q", h, exposed)
		}
	}
	// Problems carry the fields too, so the front end can read them.
	r = a.do("GET", "/v1/me", nil, header("Origin", "HTTPS://APP.EXAMPLE.COM"))
	wantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
	if r.Header.Get("Access-Control-Allow-Origin") != "HTTPS://APP.EXAMPLE.COM" {
		t.Errorf("problem answer: %v", r.Header)
	}
	// A preflight for a path that does not exist is a 404.
	wantProblem(t, a.do("OPTIONS", "/v1/nope", nil, preflight(frontEnd, "GET", "")...), http.StatusNotFound, "not-found")
}

// An origin not in the list gets no Access-Control fields (the browser then
// refuses), but the request itself is answered as usual.
func TestCORSRefusedOrigin(t *testing.T) {
	t.Parallel()
	a := newAPI(t, func(c *httpapi.Config) { c.CORSAllowedOrigins = []string{frontEnd} })
	for _, r := range []response{
		a.do("OPTIONS", "/v1/jobs", nil, preflight("https://evil.example", "GET", "")...),
		a.do("GET", "/v1/jobs", nil, header("Origin", "https://evil.example")),
		a.do("GET", "/v1/jobs", nil, header("Origin", frontEnd+".evil.example")),
	} {
		for h := range r.Header {
			if strings.HasPrefix(h, "Access-Control-") {
				t.Errorf("%s: %s: %v", r, h, r.Header.Values(h))
			}
		}
		if !slices.Contains(vary(r), "Origin") {
			t.Errorf("%s: Vary %v lacks Origin", r, vary(r))
		}
	}
}

// "*" allows any origin, answered as "*".
func TestCORSAnyOrigin(t *testing.T) {
	t.Parallel()
	a := newAPI(t, func(c *httpapi.Config) { c.CORSAllowedOrigins = []string{"*"} })
	r := a.do("GET", "/v1/jobs", nil, header("Origin", "https://anyone.example"))
	want(t, r, http.StatusOK)
	if got := r.Header.Get("Access-Control-Allow-Origin"); got != "*" {
		t.Fatalf("Access-Control-Allow-Origin %q", got)
	}
}

// Without allowed origins nothing changes: no fields, and OPTIONS is a
// method like any other the API does not route (405).
func TestCORSOff(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	r := a.do("OPTIONS", "/v1/jobs", nil, preflight(frontEnd, "GET", "")...)
	wantProblem(t, r, http.StatusMethodNotAllowed, "method-not-allowed")
	r = a.do("GET", "/v1/jobs", nil, header("Origin", frontEnd))
	if r.Header.Get("Access-Control-Allow-Origin") != "" || slices.Contains(vary(r), "Origin") {
		t.Fatalf("CORS fields with CORS off: %v", r.Header)
	}
}

func TestParseAllowedOrigins(t *testing.T) {
	t.Parallel()
	got, err := httpapi.ParseAllowedOrigins(" https://App.Example.com , ,http://localhost:5173,*")
	if err != nil || !slices.Equal(got, []string{"https://app.example.com", "http://localhost:5173", "*"}) {
		t.Fatalf("ParseAllowedOrigins = %v, %v", got, err)
	}
	if got, err := httpapi.ParseAllowedOrigins(""); err != nil || len(got) != 0 {
		t.Fatalf("empty list: %v, %v", got, err)
	}
	for _, bad := range []string{"localhost:5173", "https://app.example.com/", "ftp://files.example", "https://", "https://u:p@app.example.com", "https://app.example.com?x=1"} {
		if _, err := httpapi.ParseAllowedOrigins(bad); err == nil {
			t.Errorf("ParseAllowedOrigins(%q) accepted", bad)
		}
	}
}
