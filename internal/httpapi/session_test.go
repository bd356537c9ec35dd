package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// endSessions resets the password of u's account: every session issued
// before it ends.
func (a *api) endSessions(clk *clock, u user) {
	a.t.Helper()
	clk.advance(time.Minute)
	want(a.t, a.requestReset(u.Email), http.StatusAccepted)
	want(a.t, a.resetPassword(a.resetToken(u), "brand new password"), http.StatusOK)
}

// wantEndedSession fails the test unless r is the 401 of an ended
// session: unauthenticated, with error="invalid_token".
func wantEndedSession(tb testing.TB, what string, r response) {
	tb.Helper()
	if r.Status != http.StatusUnauthorized || !strings.Contains(r.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		tb.Errorf("%s with an ended session: %d (WWW-Authenticate %q) %s, want 401 invalid_token",
			what, r.Status, r.Header.Get("WWW-Authenticate"), r.Body)
		return
	}
	if p := r.problem(tb); p.Type != httpapi.ProblemBase+"unauthenticated" {
		tb.Errorf("%s with an ended session: problem %q", what, p.Type)
	}
}

// A keyed write replayed after a password reset with the old token is
// refused like any request of the ended session: the stored answer (here
// a webhook signing secret, in clear) is not handed to it.
func TestReplayAfterPasswordResetIsRefused(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now().UTC().Truncate(time.Second)}
	a := newAPI(t, withWebhooks(testSealer(t)), func(c *httpapi.Config) { c.Now = clk.Now })
	w := a.world()
	hook := map[string]any{"url": "https://hooks.acme.example/in", "event_types": []string{"job.closed"}}
	company := map[string]any{"name": "Second company"}
	want(t, a.do("POST", hooksPath(w.company.ID), hook, as(w.employer), withKey("replay-after-reset-hook")), http.StatusCreated)
	want(t, a.do("POST", "/v1/companies", company, as(w.employer), withKey("replay-after-reset-company")), http.StatusCreated)

	a.endSessions(clk, w.employer)
	r := a.do("POST", hooksPath(w.company.ID), hook, as(w.employer), withKey("replay-after-reset-hook"))
	wantEndedSession(t, "a replay of POST …/webhooks", r)
	if strings.Contains(string(r.Body), "whsec_") {
		t.Errorf("the refusal carries the signing secret: %s", r.Body)
	}
	wantEndedSession(t, "a replay of POST /v1/companies",
		a.do("POST", "/v1/companies", company, as(w.employer), withKey("replay-after-reset-company")))
}

// resend-verification acts for the account: an ended session gets 401,
// not a verification email (202) nor, for a verified account, 409.
func TestResendVerificationRefusesAnEndedSession(t *testing.T) {
	t.Parallel()
	a, clk := newClockedAPI(t)
	unverified, verified := a.register(jobboard.RoleCandidate), a.register(jobboard.RoleCandidate)
	want(t, a.do("POST", "/v1/auth/verify-email", map[string]any{"token": a.verificationToken(verified)}), http.StatusOK)
	// An account whose session goes on: it is still served.
	other := a.register(jobboard.RoleCandidate)
	for _, u := range []user{unverified, verified} {
		a.endSessions(clk, u)
	}
	before := a.verificationEvents(unverified) + a.verificationEvents(verified)
	wantEndedSession(t, "resend-verification (address verified by the reset)", a.do("POST", "/v1/auth/resend-verification", nil, as(unverified)))
	wantEndedSession(t, "resend-verification (verified account)", a.do("POST", "/v1/auth/resend-verification", nil, as(verified)))
	if after := a.verificationEvents(unverified) + a.verificationEvents(verified); after != before {
		t.Errorf("ended sessions queued %d verification emails", after-before)
	}
	want(t, a.do("POST", "/v1/auth/resend-verification", nil, as(other)), http.StatusAccepted)
}

// GET /v1/me/applications is a candidate's, but an ended session of an
// employer is told its session ended (401), not that its role may not
// (403).
func TestMyApplicationsRefusesAnEndedEmployerSession(t *testing.T) {
	t.Parallel()
	a, clk := newClockedAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	wantProblem(t, a.do("GET", "/v1/me/applications", nil, as(employer)), http.StatusForbidden, "forbidden")
	a.endSessions(clk, employer)
	wantEndedSession(t, "GET /v1/me/applications (employer)", a.do("GET", "/v1/me/applications", nil, as(employer)))
}

// The routes anyone may call: every other route of the table acts for an
// account. A route added to this list is a decision to review: its
// handler sees no session (public) or may see one (optional sign-in).
var anonymousRoutes = map[string]httpapi.Access{
	"GET /healthz":                         httpapi.Public,
	"GET /readyz":                          httpapi.Public,
	"GET /v1/openapi.json":                 httpapi.Public,
	"POST /v1/auth/register":               httpapi.Public,
	"POST /v1/auth/login":                  httpapi.Public,
	"POST /v1/auth/verify-email":           httpapi.Public,
	"POST /v1/auth/password-reset":         httpapi.Public,
	"POST /v1/auth/password-reset/confirm": httpapi.Public,
	"GET /v1/companies/{id}":               httpapi.OptionalSignIn,
	"GET /v1/jobs":                         httpapi.OptionalSignIn,
	"GET /v1/jobs/{id}":                    httpapi.OptionalSignIn,
}

// Every route of the route table that reads a session refuses an ended
// one (401, invalid_token) and changes nothing, with the candidate's and
// the employer's old sessions alike, and with an Idempotency-Key whose
// answer the live session stored: the routes are enumerated from the
// table, so a route added later is tried too.
func TestEveryRouteRefusesAnEndedSession(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now().UTC().Truncate(time.Second)}
	a := newAPI(t, withWebhooks(testSealer(t)), func(c *httpapi.Config) { c.Now = clk.Now })
	w := a.world()
	r := a.do("POST", hooksPath(w.company.ID), map[string]any{"url": "https://hooks.acme.example/in", "event_types": []string{"job.closed"}}, as(w.employer))
	want(t, r, http.StatusCreated)
	endpoint := decodeAs[jobboard.WebhookSecretReveal](t, r)
	r = a.do("POST", hooksPath(w.company.ID, endpoint.ID, "ping"), nil, as(w.employer))
	want(t, r, http.StatusAccepted)
	delivery := decodeAs[jobboard.WebhookDelivery](t, r)

	ids := map[string]int64{"id": 0, "wid": endpoint.ID, "did": delivery.ID}
	path := func(pattern string) string {
		_, p, _ := strings.Cut(pattern, " ")
		id := w.company.ID
		switch {
		case strings.HasPrefix(p, "/v1/jobs/"):
			id = w.job.ID
		case strings.HasPrefix(p, "/v1/applications/"):
			id = w.application.ID
		}
		ids["id"] = id
		for name, v := range ids {
			p = strings.ReplaceAll(p, "{"+name+"}", fmt.Sprint(v))
		}
		return p
	}
	type obj = map[string]any
	body := map[string]any{
		"POST /v1/me/email-delivery/resume":                    obj{"withdraw_complaint": true},
		"POST /v1/companies":                                   obj{"name": "Another company"},
		"POST /v1/companies/{id}/jobs":                         jobInput("Posted"),
		"PATCH /v1/jobs/{id}":                                  obj{"title": "Renamed"},
		"POST /v1/jobs/{id}/applications":                      obj{"cover_letter": "Hello"},
		"PATCH /v1/applications/{id}":                          obj{"status": "withdrawn"},
		"POST /v1/companies/{id}/webhooks":                     obj{"url": "https://other.acme.example/in", "event_types": []string{"job.closed"}},
		"PATCH /v1/companies/{id}/webhooks/{wid}":              obj{"enabled": false},
		"POST /v1/companies/{id}/webhooks/{wid}/rotate-secret": obj{"overlap_seconds": 60},
	}
	routes := httpapi.RouteAccess()
	for pattern, acc := range anonymousRoutes {
		if routes[pattern] != acc {
			t.Errorf("%s: access %q, want %q", pattern, routes[pattern], acc)
		}
	}
	var tried []string
	for pattern, acc := range routes {
		if _, anonymous := anonymousRoutes[pattern]; !anonymous && acc != httpapi.SignedIn {
			t.Errorf("%s: access %q; a route that is not listed as anonymous acts for an account", pattern, acc)
		}
		if acc != httpapi.Public {
			tried = append(tried, pattern)
		}
	}

	// Each keyed write, once with the live session of the account it is
	// for: its answer, when a success, is stored under the key.
	key := func(pattern string) string {
		return "ended-" + strings.NewReplacer(" ", "-", "{", "", "}", "").Replace(pattern)
	}
	owner := func(pattern string) user {
		if strings.Contains(pattern, "/applications") && !strings.HasPrefix(pattern, "GET /v1/jobs/") || strings.Contains(pattern, "verification") {
			return w.candidate
		}
		return w.employer
	}
	for _, pattern := range tried {
		method, _, _ := strings.Cut(pattern, " ")
		if method == "GET" || method == "DELETE" {
			continue
		}
		a.do(method, path(pattern), body[pattern], as(owner(pattern)), withKey(key(pattern)))
	}

	for _, u := range []user{w.candidate, w.employer} {
		a.endSessions(clk, u)
	}
	before, jobsBefore, hooksBefore := a.counts(), a.jobsFingerprint(), a.webhooksFingerprint()
	for _, pattern := range tried {
		method, _, _ := strings.Cut(pattern, " ")
		for _, session := range []user{w.candidate, w.employer} {
			wantEndedSession(t, pattern+" as "+string(session.Role), a.do(method, path(pattern), body[pattern], as(session)))
			if method != "GET" && method != "DELETE" {
				wantEndedSession(t, pattern+" as "+string(session.Role)+" with the key of a stored answer",
					a.do(method, path(pattern), body[pattern], as(session), withKey(key(pattern))))
			}
		}
	}
	if !mapsEqual(before, a.counts()) || a.jobsFingerprint() != jobsBefore || a.webhooksFingerprint() != hooksBefore {
		t.Fatalf("ended sessions changed rows")
	}
	if len(tried) < 20 {
		t.Fatalf("only %d routes tried: %v", len(tried), tried)
	}
}
