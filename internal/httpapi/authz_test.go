package httpapi_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// For every endpoint that needs a particular caller, the callers who are
// not it get 401 (anonymous), 404 (cannot see the target) or 403 (their role
// may never do this), and nothing changes.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	// A closed job of the employer's company: invisible to outsiders.
	closed := a.job(w.employer, w.company.ID, "Closed job")
	want(t, a.do("PATCH", fmt.Sprintf("/v1/jobs/%d", closed.ID), map[string]any{"status": "closed"}, as(w.employer)), http.StatusOK)

	anonymous := user{}
	app := fmt.Sprintf("/v1/applications/%d", w.application.ID)
	endpoints := []struct {
		name, method, path string
		body               any
		// wants per caller: anonymous, the other candidate, the other employer.
		anonymous, otherCandidate, otherEmployer int
	}{
		{"me", "GET", "/v1/me", nil, 401, 200, 200},
		{"my applications", "GET", "/v1/me/applications", nil, 401, 200, 403},
		{"create company", "POST", "/v1/companies", map[string]any{"name": "X"}, 401, 403, 201},
		{"post job", "POST", fmt.Sprintf("/v1/companies/%d/jobs", w.company.ID), jobInput("X"), 401, 404, 404},
		{"get closed job", "GET", fmt.Sprintf("/v1/jobs/%d", closed.ID), nil, 404, 404, 404},
		{"patch job", "PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), map[string]any{"title": "Hacked"}, 401, 404, 404},
		{"close job", "PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), map[string]any{"status": "closed"}, 401, 404, 404},
		{"apply", "POST", fmt.Sprintf("/v1/jobs/%d/applications", w.job.ID), map[string]any{}, 401, 201, 403},
		{"apply to closed job", "POST", fmt.Sprintf("/v1/jobs/%d/applications", closed.ID), map[string]any{}, 401, 404, 403},
		{"job's applications", "GET", fmt.Sprintf("/v1/jobs/%d/applications", w.job.ID), nil, 401, 404, 404},
		{"application", "GET", app, nil, 401, 404, 404},
		{"history", "GET", app + "/history", nil, 401, 404, 404},
		{"move application", "PATCH", app, map[string]any{"status": "reviewing"}, 401, 404, 404},
		{"withdraw application", "PATCH", app, map[string]any{"status": "withdrawn"}, 401, 404, 404},
		{"move application with If-Match", "PATCH", app, map[string]any{"status": "rejected"}, 401, 404, 404},
	}
	kinds := map[int]string{401: "unauthenticated", 403: "forbidden", 404: "not-found", 409: "job-closed"}
	for _, ep := range endpoints {
		for _, c := range []struct {
			who  string
			u    user
			want int
		}{{"anonymous", anonymous, ep.anonymous}, {"other candidate", w.otherCandidate, ep.otherCandidate}, {"other employer", w.otherEmployer, ep.otherEmployer}} {
			t.Run(ep.name+"/"+c.who, func(t *testing.T) {
				before, fp := a.counts(), a.jobsFingerprint()
				opts := []reqOption{as(c.u)}
				if ep.name == "move application with If-Match" {
					opts = append(opts, header("If-Match", `"1"`))
				}
				r := a.do(ep.method, ep.path, ep.body, opts...)
				if kind, refused := kinds[c.want]; refused {
					wantProblem(t, r, c.want, kind)
					if after := a.counts(); !mapsEqual(before, after) || a.jobsFingerprint() != fp {
						t.Fatalf("refused request changed rows: %v → %v", before, after)
					}
					return
				}
				want(t, r, c.want)
			})
		}
	}
	// The owners still see everything unchanged.
	r := a.do("GET", app, nil, as(w.candidate))
	if got := decodeAs[jobboard.Application](t, r); got != w.application {
		t.Fatalf("application changed: %+v", got)
	}
	r = a.do("GET", fmt.Sprintf("/v1/jobs/%d", w.job.ID), nil)
	if got := decodeAs[jobboard.Job](t, r); got.Title != w.job.Title || got.Status != jobboard.JobOpen {
		t.Fatalf("job changed: %+v", got)
	}
}
