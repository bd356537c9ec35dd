package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// The probe of issue 29: 30 pings of one endpoint in a row, and a
// delivered delivery replayed again and again. A ping while one is
// pending is that one (one delivery, one outbound request, whatever the
// count); the replays are bounded per endpoint, then refused with 429
// and Retry-After, dispatching nothing more.
func TestPingsAndReplaysAreBounded(t *testing.T) {
	t.Parallel()
	a := newAPI(t, withWebhooks(testSealer(t)))
	w := a.world()
	r := a.do("POST", hooksPath(w.company.ID), map[string]any{"url": "https://hooks.acme.example/in", "event_types": []string{"job.closed"}}, as(w.employer))
	want(t, r, http.StatusCreated)
	e := decodeAs[jobboard.WebhookSecretReveal](t, r)
	ctx := context.Background()
	deliveries := func() int {
		var n int
		if err := a.db.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE event_type = 'webhook.delivery_requested'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	var first int64
	for i := range 30 {
		r := a.do("POST", hooksPath(w.company.ID, e.ID, "ping"), nil, as(w.employer))
		want(t, r, http.StatusAccepted)
		d := decodeAs[jobboard.WebhookDelivery](t, r)
		if i == 0 {
			first = d.ID
		} else if d.ID != first {
			t.Fatalf("ping %d while the first is pending: delivery %d, want the first (%d)", i+1, d.ID, first)
		}
	}
	if n := deliveries(); n != 1 {
		t.Fatalf("30 pings dispatched %d deliveries, want 1", n)
	}

	// The ping delivered, it is replayed until the endpoint's bound.
	if _, err := a.db.Pool.Exec(ctx, `UPDATE webhook_deliveries SET state = 'delivered', delivered_at = now() WHERE id = $1`, first); err != nil {
		t.Fatal(err)
	}
	replay := hooksPath(w.company.ID, e.ID, "deliveries", first, "replay")
	bound := jobboard.DefaultWebhookDispatchPolicy.PerEndpoint
	for i := 1; i < bound; i++ { // the ping counted once
		want(t, a.do("POST", replay, nil, as(w.employer)), http.StatusAccepted)
	}
	before := deliveries()
	for _, path := range []string{replay, hooksPath(w.company.ID, e.ID, "ping")} {
		r := a.do("POST", path, nil, as(w.employer))
		wantProblem(t, r, http.StatusTooManyRequests, "too-many-webhook-dispatches")
		if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || s > 3600 {
			t.Errorf("POST %s: Retry-After %q, want 1 to 3600 seconds", path, r.Header.Get("Retry-After"))
		}
	}
	if after := deliveries(); after != before {
		t.Errorf("refused dispatches dispatched %d deliveries", after-before)
	}
}

// An employer creates at most jobboard.MaxCompaniesPerEmployer companies:
// the endpoint and dispatch bounds are per company, so without it they
// bound nothing.
func TestCompaniesPerEmployerAreBounded(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	for i := range jobboard.MaxCompaniesPerEmployer {
		want(t, a.do("POST", "/v1/companies", map[string]any{"name": fmt.Sprintf("Company %d", i)}, as(employer)), http.StatusCreated)
	}
	wantProblem(t, a.do("POST", "/v1/companies", map[string]any{"name": "One too many"}, as(employer)), http.StatusConflict, "too-many-companies")
	if n := a.counts()["companies"]; n != jobboard.MaxCompaniesPerEmployer {
		t.Errorf("%d companies, want %d", n, jobboard.MaxCompaniesPerEmployer)
	}
	// Another employer is not bounded by the first's.
	want(t, a.do("POST", "/v1/companies", map[string]any{"name": "Theirs"}, as(a.register(jobboard.RoleEmployer))), http.StatusCreated)
}

// The dispatch bounds are the server's to set (Config.WebhookDispatches):
// per company, across its endpoints.
func TestWebhookDispatchesPerCompany(t *testing.T) {
	t.Parallel()
	a := newAPI(t, withWebhooks(testSealer(t)), func(c *httpapi.Config) {
		c.WebhookDispatches = jobboard.WebhookDispatchPolicy{Window: 3600e9, PerEndpoint: 5, PerCompany: 3}
	})
	w := a.world()
	var ids []int64
	for i := range 4 {
		r := a.do("POST", hooksPath(w.company.ID), map[string]any{"url": fmt.Sprintf("https://hooks%d.acme.example/in", i), "event_types": []string{"job.closed"}}, as(w.employer))
		want(t, r, http.StatusCreated)
		ids = append(ids, decodeAs[jobboard.WebhookSecretReveal](t, r).ID)
	}
	for _, id := range ids[:3] {
		want(t, a.do("POST", hooksPath(w.company.ID, id, "ping"), nil, as(w.employer)), http.StatusAccepted)
	}
	wantProblem(t, a.do("POST", hooksPath(w.company.ID, ids[3], "ping"), nil, as(w.employer)), http.StatusTooManyRequests, "too-many-webhook-dispatches")
	// Another company's bound is its own.
	r := a.do("POST", hooksPath(w.otherCompany.ID), map[string]any{"url": "https://other.example/in", "event_types": []string{"job.closed"}}, as(w.otherEmployer))
	want(t, r, http.StatusCreated)
	want(t, a.do("POST", hooksPath(w.otherCompany.ID, decodeAs[jobboard.WebhookSecretReveal](t, r).ID, "ping"), nil, as(w.otherEmployer)), http.StatusAccepted)
}
