package httpapi_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/secret"
)

// testSealer seals the webhook secrets of the servers under test.
func testSealer(t testing.TB) *secret.Sealer {
	t.Helper()
	s, err := secret.NewSealer([]byte(strings.Repeat("w", 40)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// withWebhooks gives the server its webhook store and sealer.
func withWebhooks(sealer *secret.Sealer) func(*httpapi.Config) {
	return func(c *httpapi.Config) {
		c.Webhooks = c.Users.(jobboard.WebhookStore)
		c.WebhookSealer = sealer
	}
}

type endpointList struct {
	Items []jobboard.WebhookEndpoint `json:"items"`
}

type deliveryPage struct {
	Items      []jobboard.WebhookDelivery `json:"items"`
	NextCursor *string                    `json:"next_cursor"`
}

func hooksPath(companyID int64, rest ...any) string {
	p := fmt.Sprintf("/v1/companies/%d/webhooks", companyID)
	for _, r := range rest {
		p += fmt.Sprintf("/%v", r)
	}
	return p
}

func TestWebhookEndpoints(t *testing.T) {
	t.Parallel()
	sealer := testSealer(t)
	a := newAPI(t, withWebhooks(sealer))
	w := a.world()
	in := map[string]any{"url": "https://hooks.acme.example/jobboard", "event_types": []string{"job.closed", "application.submitted"}, "description": "ATS"}

	r := a.do("POST", hooksPath(w.company.ID), in, as(w.employer))
	want(t, r, http.StatusCreated)
	created := decodeAs[jobboard.WebhookSecretReveal](t, r)
	if !strings.HasPrefix(created.Secret, "whsec_") || !created.Enabled || created.CompanyID != w.company.ID ||
		strings.Join(created.EventTypes, ",") != "application.submitted,job.closed" || r.Header.Get("Location") != hooksPath(w.company.ID, created.ID) {
		t.Fatalf("created %+v, Location %q", created, r.Header.Get("Location"))
	}
	// At rest only its sealed form, which opens to it.
	var sealed []byte
	if err := a.db.Pool.QueryRow(context.Background(), `SELECT secret FROM webhook_endpoints WHERE id = $1`, created.ID).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte(strings.TrimPrefix(created.Secret, "whsec_"))) {
		t.Fatal("the secret is stored in clear")
	}
	if opened, err := sealer.Open(sealed, jobboard.WebhookSecretContext(w.company.ID)); err != nil || string(opened) != created.Secret {
		t.Fatalf("the stored secret opens to %q, %v", opened, err)
	}

	// Reads never show a secret.
	r = a.do("GET", hooksPath(w.company.ID, created.ID), nil, as(w.employer))
	want(t, r, http.StatusOK)
	if strings.Contains(string(r.Body), "secret") && strings.Contains(string(r.Body), "whsec_") {
		t.Fatalf("a read shows the secret: %s", r.Body)
	}
	r = a.do("GET", hooksPath(w.company.ID), nil, as(w.employer))
	want(t, r, http.StatusOK)
	if l := decodeAs[endpointList](t, r); len(l.Items) != 1 || l.Items[0].ID != created.ID {
		t.Fatalf("list %+v", l)
	}

	// Changes.
	r = a.do("PATCH", hooksPath(w.company.ID, created.ID), map[string]any{"enabled": false}, as(w.employer))
	want(t, r, http.StatusOK)
	if e := decodeAs[jobboard.WebhookEndpoint](t, r); e.Enabled || e.DisabledReason != jobboard.DisabledByMember {
		t.Fatalf("disabled %+v", e)
	}
	wantProblem(t, a.do("POST", hooksPath(w.company.ID, created.ID, "ping"), nil, as(w.employer)), http.StatusConflict, "webhook-endpoint-disabled")
	r = a.do("PATCH", hooksPath(w.company.ID, created.ID), map[string]any{"enabled": true, "url": "https://other.acme.example/in"}, as(w.employer))
	want(t, r, http.StatusOK)
	if e := decodeAs[jobboard.WebhookEndpoint](t, r); !e.Enabled || e.URL != "https://other.acme.example/in" {
		t.Fatalf("enabled %+v", e)
	}
	r = a.do("POST", hooksPath(w.company.ID, created.ID, "rotate-secret"), map[string]any{"overlap_seconds": 3600}, as(w.employer))
	want(t, r, http.StatusOK)
	rotated := decodeAs[jobboard.WebhookSecretReveal](t, r)
	if rotated.Secret == created.Secret || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.PreviousSecretExpiresAt == nil {
		t.Fatalf("rotated %+v", rotated)
	}

	// Refusals, which change nothing.
	bad := []struct {
		body   map[string]any
		fields string
	}{
		{map[string]any{"url": "http://hooks.acme.example/in", "event_types": []string{"job.closed"}}, "url"},
		{map[string]any{"url": "https://hooks.acme.example:8443/in", "event_types": []string{"job.closed"}}, "url"},
		{map[string]any{"url": "https://169.254.169.254/latest", "event_types": []string{"job.closed"}}, "url"},
		{map[string]any{"url": "https://[::ffff:10.0.0.1]/in", "event_types": []string{"job.closed"}}, "url"},
		{map[string]any{"url": "https://localhost/in", "event_types": []string{"job.closed"}}, "url"},
		{map[string]any{"url": "https://hooks.acme.example/in", "event_types": []string{"user.created"}}, "event_types"},
		{map[string]any{"url": "https://hooks.acme.example/in", "event_types": []string{}}, "event_types"},
	}
	for _, b := range bad {
		p := wantProblem(t, a.do("POST", hooksPath(w.company.ID), b.body, as(w.employer)), http.StatusUnprocessableEntity, "validation")
		if strings.Join(p.fields(), ",") != b.fields {
			t.Errorf("%v: fields %v, want %s", b.body, p.fields(), b.fields)
		}
	}
	wantProblem(t, a.do("PATCH", hooksPath(w.company.ID, created.ID), map[string]any{"url": "https://10.1.1.1/"}, as(w.employer)), http.StatusUnprocessableEntity, "validation")
	wantProblem(t, a.do("PATCH", hooksPath(w.company.ID, created.ID), map[string]any{}, as(w.employer)), http.StatusUnprocessableEntity, "validation")
	wantProblem(t, a.do("POST", hooksPath(w.company.ID, created.ID, "rotate-secret"), map[string]any{"overlap_seconds": -1}, as(w.employer)), http.StatusUnprocessableEntity, "validation")
	wantProblem(t, a.do("POST", hooksPath(w.company.ID), map[string]any{"url": "https://x.example", "event_types": []string{"job.closed"}, "secret": "mine"}, as(w.employer)), http.StatusBadRequest, "bad-request")

	// Members only: 404 to everyone else, 401 without a token.
	for _, u := range []user{w.otherEmployer, w.candidate, w.otherCandidate} {
		wantProblem(t, a.do("GET", hooksPath(w.company.ID), nil, as(u)), http.StatusNotFound, "not-found")
		wantProblem(t, a.do("GET", hooksPath(w.company.ID, created.ID), nil, as(u)), http.StatusNotFound, "not-found")
		wantProblem(t, a.do("POST", hooksPath(w.company.ID), in, as(u)), http.StatusNotFound, "not-found")
		wantProblem(t, a.do("PATCH", hooksPath(w.company.ID, created.ID), map[string]any{"enabled": false}, as(u)), http.StatusNotFound, "not-found")
		wantProblem(t, a.do("DELETE", hooksPath(w.company.ID, created.ID), nil, as(u)), http.StatusNotFound, "not-found")
		wantProblem(t, a.do("POST", hooksPath(w.company.ID, created.ID, "rotate-secret"), map[string]any{}, as(u)), http.StatusNotFound, "not-found")
		wantProblem(t, a.do("GET", hooksPath(w.company.ID, created.ID, "deliveries"), nil, as(u)), http.StatusNotFound, "not-found")
	}
	// The other employer's own company does not open this endpoint either.
	wantProblem(t, a.do("GET", hooksPath(w.otherCompany.ID, created.ID), nil, as(w.otherEmployer)), http.StatusNotFound, "not-found")
	wantProblem(t, a.do("GET", hooksPath(w.company.ID), nil), http.StatusUnauthorized, "unauthenticated")
	wantProblem(t, a.do("GET", hooksPath(w.company.ID, "x"), nil, as(w.employer)), http.StatusBadRequest, "bad-request")

	r = a.do("DELETE", hooksPath(w.company.ID, created.ID), nil, as(w.employer))
	want(t, r, http.StatusNoContent)
	wantProblem(t, a.do("DELETE", hooksPath(w.company.ID, created.ID), nil, as(w.employer)), http.StatusNotFound, "not-found")

	for i := range jobboard.MaxWebhookEndpoints {
		want(t, a.do("POST", hooksPath(w.company.ID), map[string]any{"url": fmt.Sprintf("https://h%d.acme.example", i), "event_types": []string{"job.closed"}}, as(w.employer)), http.StatusCreated)
	}
	wantProblem(t, a.do("POST", hooksPath(w.company.ID), in, as(w.employer)), http.StatusConflict, "too-many-webhook-endpoints")
}

// A keyed create replays the same secret, and the idempotency store keeps
// it only sealed.
func TestWebhookCreateWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	a := newAPI(t, withWebhooks(testSealer(t)))
	w := a.world()
	in := map[string]any{"url": "https://hooks.acme.example/in", "event_types": []string{"job.closed"}}
	key := header("Idempotency-Key", "create-webhook-0001")
	first := a.do("POST", hooksPath(w.company.ID), in, as(w.employer), key)
	want(t, first, http.StatusCreated)
	again := a.do("POST", hooksPath(w.company.ID), in, as(w.employer), key)
	want(t, again, http.StatusCreated)
	one, two := decodeAs[jobboard.WebhookSecretReveal](t, first), decodeAs[jobboard.WebhookSecretReveal](t, again)
	if one.Secret != two.Secret || one.ID != two.ID || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %+v / %+v (replayed %q)", one, two, again.Header.Get("Idempotent-Replayed"))
	}
	var stored []byte
	if err := a.db.Pool.QueryRow(context.Background(), `SELECT body FROM idempotency_keys`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(stored, []byte(strings.TrimPrefix(one.Secret, "whsec_"))) || !bytes.Contains(stored, []byte("secret_sealed")) {
		t.Fatalf("stored answer: %s", stored)
	}
	var n int
	_ = a.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_endpoints`).Scan(&n)
	if n != 1 {
		t.Errorf("%d endpoints after a replay, want 1", n)
	}
}

// The write paths relay the deliveries they dispatch; the log shows them;
// ping and replay dispatch more.
func TestWebhookDeliveryLogPingAndReplay(t *testing.T) {
	t.Parallel()
	relay := &failingRelay{}
	a := newAPI(t, withWebhooks(testSealer(t)), func(c *httpapi.Config) { c.Relay = relay })
	w := a.world()
	deliveries := func() []jobboard.Event {
		var out []jobboard.Event
		for _, ev := range relay.all() {
			if ev.Type == jobboard.EventTypeWebhookDelivery {
				out = append(out, ev)
			}
		}
		return out
	}
	// Without an endpoint, a change relays no delivery.
	want(t, a.do("PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID), map[string]any{"status": "reviewing"}, as(w.employer)), http.StatusOK)
	if n := len(deliveries()); n != 0 {
		t.Fatalf("%d deliveries relayed without endpoints", n)
	}
	r := a.do("POST", hooksPath(w.company.ID), map[string]any{"url": "https://hooks.acme.example/in",
		"event_types": jobboard.WebhookEventTypes}, as(w.employer))
	want(t, r, http.StatusCreated)
	e := decodeAs[jobboard.WebhookSecretReveal](t, r)

	a.apply(w.otherCandidate, w.job.ID)
	want(t, a.do("PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID), map[string]any{"status": "withdrawn"}, as(w.candidate)), http.StatusOK)
	want(t, a.do("PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), map[string]any{"status": "closed"}, as(w.employer)), http.StatusOK)
	r = a.do("POST", hooksPath(w.company.ID, e.ID, "ping"), nil, as(w.employer))
	want(t, r, http.StatusAccepted)
	ping := decodeAs[jobboard.WebhookDelivery](t, r)
	if ping.EventType != jobboard.WebhookPing || ping.State != jobboard.DeliveryPending || ping.Attempts != 0 {
		t.Fatalf("ping %+v", ping)
	}
	// submitted, status_changed + withdrawn, job.closed, ping.
	if n := len(deliveries()); n != 5 {
		t.Fatalf("%d deliveries relayed, want 5", n)
	}

	r = a.do("GET", hooksPath(w.company.ID, e.ID, "deliveries"), nil, as(w.employer))
	want(t, r, http.StatusOK)
	page := decodeAs[deliveryPage](t, r)
	var types []string
	for _, d := range page.Items {
		types = append(types, d.EventType)
	}
	if got := strings.Join(types, ","); got != "webhook.ping,job.closed,application.withdrawn,application.status_changed,application.submitted" {
		t.Fatalf("log: %s", got)
	}
	r = a.do("GET", hooksPath(w.company.ID, e.ID, "deliveries")+"?limit=2&state=pending", nil, as(w.employer))
	want(t, r, http.StatusOK)
	first := decodeAs[deliveryPage](t, r)
	if len(first.Items) != 2 || first.NextCursor == nil {
		t.Fatalf("first page %+v", first)
	}
	r = a.do("GET", hooksPath(w.company.ID, e.ID, "deliveries")+"?limit=2&cursor="+*first.NextCursor, nil, as(w.employer))
	want(t, r, http.StatusOK)
	if next := decodeAs[deliveryPage](t, r); len(next.Items) != 2 || next.Items[0].ID >= first.Items[1].ID {
		t.Fatalf("second page %+v", next)
	}
	r = a.do("GET", hooksPath(w.company.ID, e.ID, "deliveries")+"?state=delivered", nil, as(w.employer))
	want(t, r, http.StatusOK)
	if p := decodeAs[deliveryPage](t, r); len(p.Items) != 0 {
		t.Fatalf("delivered: %+v", p)
	}
	for _, q := range []string{"?state=lost", "?limit=0", "?cursor=nope", "?page=2"} {
		wantProblem(t, a.do("GET", hooksPath(w.company.ID, e.ID, "deliveries")+q, nil, as(w.employer)), http.StatusBadRequest, "bad-request")
	}

	r = a.do("POST", hooksPath(w.company.ID, e.ID, "deliveries", ping.ID, "replay"), nil, as(w.employer))
	want(t, r, http.StatusAccepted)
	if re := decodeAs[jobboard.WebhookDelivery](t, r); re.ID != ping.ID || re.EventID != ping.EventID {
		t.Fatalf("replay %+v", re)
	}
	evs := deliveries()
	if last := evs[len(evs)-1]; last.DeliveryID != ping.ID || last.Generation != 2 {
		t.Fatalf("replay relayed %+v", last)
	}
	wantProblem(t, a.do("POST", hooksPath(w.company.ID, e.ID, "deliveries", ping.ID+1000, "replay"), nil, as(w.employer)), http.StatusNotFound, "not-found")
	wantProblem(t, a.do("POST", hooksPath(w.company.ID, e.ID, "deliveries", ping.ID, "replay"), nil, as(w.otherEmployer)), http.StatusNotFound, "not-found")
	want(t, a.do("PATCH", hooksPath(w.company.ID, e.ID), map[string]any{"enabled": false}, as(w.employer)), http.StatusOK)
	wantProblem(t, a.do("POST", hooksPath(w.company.ID, e.ID, "deliveries", ping.ID, "replay"), nil, as(w.employer)), http.StatusConflict, "webhook-endpoint-disabled")
}

func TestWebhooksNotConfigured(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	wantProblem(t, a.do("GET", hooksPath(w.company.ID), nil, as(w.employer)), http.StatusServiceUnavailable, "unavailable")
}

// webhooksFingerprint is every webhook row a member's request could
// change, to show that a refused one changed nothing.
func (a *api) webhooksFingerprint() string {
	a.t.Helper()
	var s string
	err := a.db.Pool.QueryRow(context.Background(), `SELECT concat_ws('|',
		(SELECT string_agg(concat_ws(',', id, url, event_types, enabled, md5(secret), md5(previous_secret), updated_at), ';' ORDER BY id) FROM webhook_endpoints),
		(SELECT string_agg(concat_ws(',', id, generation, state, dispatched_at), ';' ORDER BY id) FROM webhook_deliveries),
		(SELECT count(*) FROM webhook_events),
		(SELECT count(*) FROM outbox))`).Scan(&s)
	if err != nil {
		a.t.Fatalf("fingerprint webhooks: %v", err)
	}
	return s
}

// Every webhook route refuses a session issued before the account's
// password was reset (401, invalid_token), and changes nothing; a session
// of the new password is served.
func TestWebhookRoutesRefuseEndedSessions(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now().UTC().Truncate(time.Second)}
	a := newAPI(t, withWebhooks(testSealer(t)), func(c *httpapi.Config) { c.Now = clk.Now })
	w := a.world()
	r := a.do("POST", hooksPath(w.company.ID), map[string]any{"url": "https://hooks.acme.example/in", "event_types": []string{"job.closed"}}, as(w.employer))
	want(t, r, http.StatusCreated)
	e := decodeAs[jobboard.WebhookSecretReveal](t, r)
	r = a.do("POST", hooksPath(w.company.ID, e.ID, "ping"), nil, as(w.employer))
	want(t, r, http.StatusAccepted)
	ping := decodeAs[jobboard.WebhookDelivery](t, r)
	routes := []struct {
		method, path string
		body         any
	}{
		{"POST", hooksPath(w.company.ID), map[string]any{"url": "https://other.acme.example/in", "event_types": []string{"job.closed"}}},
		{"GET", hooksPath(w.company.ID), nil},
		{"GET", hooksPath(w.company.ID, e.ID), nil},
		{"GET", hooksPath(w.company.ID, e.ID, "deliveries"), nil},
		{"POST", hooksPath(w.company.ID, e.ID, "ping"), nil},
		{"POST", hooksPath(w.company.ID, e.ID, "deliveries", ping.ID, "replay"), nil},
		{"POST", hooksPath(w.company.ID, e.ID, "rotate-secret"), map[string]any{"overlap_seconds": 60}},
		{"PATCH", hooksPath(w.company.ID, e.ID), map[string]any{"enabled": false}},
		{"DELETE", hooksPath(w.company.ID, e.ID), nil},
	}

	clk.advance(time.Minute)
	want(t, a.requestReset(w.employer.Email), http.StatusAccepted)
	want(t, a.resetPassword(a.resetToken(w.employer), "brand new password"), http.StatusOK)
	before := a.webhooksFingerprint()
	for _, rt := range routes {
		r := a.do(rt.method, rt.path, rt.body, as(w.employer))
		wantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
		if got := r.Header.Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) {
			t.Errorf("%s %s: WWW-Authenticate %q, want invalid_token", rt.method, rt.path, got)
		}
	}
	if after := a.webhooksFingerprint(); after != before {
		t.Fatalf("ended sessions changed webhook rows:\n%s\n→ %s", before, after)
	}

	fresh := user{ID: w.employer.ID, Role: w.employer.Role, Token: a.login(w.employer.Email, "brand new password")}
	for _, rt := range routes {
		if r := a.do(rt.method, rt.path, rt.body, as(fresh)); r.Status >= 300 {
			t.Errorf("%s %s with the new session: %d %s", rt.method, rt.path, r.Status, r.Body)
		}
	}
}
