package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
)

type applicationPage struct {
	Items      []jobboard.Application `json:"items"`
	NextCursor *string                `json:"next_cursor"`
}

type history struct {
	Items []jobboard.HistoryEntry `json:"items"`
}

func TestApplyAndRead(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	app := w.application
	if app.Status != jobboard.StatusSubmitted || app.Version != 1 || app.CandidateID != w.candidate.ID || app.JobID != w.job.ID || app.CoverLetter != "Hello" {
		t.Fatalf("application %+v", app)
	}

	path := fmt.Sprintf("/v1/applications/%d", app.ID)
	for _, u := range []user{w.candidate, w.employer} {
		r := a.do("GET", path, nil, as(u))
		want(t, r, http.StatusOK)
		if r.Header.Get("ETag") != `"1"` {
			t.Fatalf("ETag %q", r.Header.Get("ETag"))
		}
		if got := decodeAs[jobboard.Application](t, r); got != app {
			t.Fatalf("got %+v, want %+v", got, app)
		}
	}

	before := a.counts()
	apply := fmt.Sprintf("/v1/jobs/%d/applications", w.job.ID)
	wantProblem(t, a.do("POST", apply, map[string]any{"cover_letter": "Again"}, as(w.candidate)), http.StatusConflict, "duplicate-application")
	wantProblem(t, a.do("POST", apply, map[string]any{}, as(w.employer)), http.StatusForbidden, "forbidden")
	wantProblem(t, a.do("POST", apply, map[string]any{}), http.StatusUnauthorized, "unauthenticated")
	p := wantProblem(t, a.do("POST", apply, map[string]any{"cover_letter": strings.Repeat("c", 10001)}, as(w.otherCandidate)), http.StatusUnprocessableEntity, "validation")
	if !slices.Equal(p.fields(), []string{"cover_letter"}) {
		t.Fatalf("fields %v", p.fields())
	}
	wantProblem(t, a.do("POST", apply, map[string]any{"cover": "x"}, as(w.otherCandidate)), http.StatusBadRequest, "bad-request")
	wantProblem(t, a.do("POST", "/v1/jobs/999999/applications", map[string]any{}, as(w.otherCandidate)), http.StatusNotFound, "not-found")
	if after := a.counts(); !mapsEqual(before, after) {
		t.Fatalf("refused applications changed rows: %v → %v", before, after)
	}

	// The exact 10,000-character cover letter is accepted.
	r := a.do("POST", apply, map[string]any{"cover_letter": strings.Repeat("é", 10000)}, as(w.otherCandidate))
	want(t, r, http.StatusCreated)
	second := decodeAs[jobboard.Application](t, r)
	if r.Header.Get("ETag") != `"1"` || r.Header.Get("Location") != fmt.Sprintf("/v1/applications/%d", second.ID) {
		t.Fatalf("ETag %q Location %q", r.Header.Get("ETag"), r.Header.Get("Location"))
	}

	// Lists: the job's, for its company; the candidate's own.
	r = a.do("GET", fmt.Sprintf("/v1/jobs/%d/applications?limit=1", w.job.ID), nil, as(w.employer))
	want(t, r, http.StatusOK)
	page := decodeAs[applicationPage](t, r)
	if len(page.Items) != 1 || page.Items[0].ID != second.ID || page.NextCursor == nil {
		t.Fatalf("first page %+v", page)
	}
	r = a.do("GET", fmt.Sprintf("/v1/jobs/%d/applications?limit=1&cursor=%s", w.job.ID, *page.NextCursor), nil, as(w.employer))
	page = decodeAs[applicationPage](t, r)
	if len(page.Items) != 1 || page.Items[0].ID != app.ID || page.NextCursor != nil {
		t.Fatalf("second page %+v", page)
	}
	r = a.do("GET", "/v1/me/applications", nil, as(w.candidate))
	want(t, r, http.StatusOK)
	if page := decodeAs[applicationPage](t, r); len(page.Items) != 1 || page.Items[0].ID != app.ID {
		t.Fatalf("my applications %+v", page)
	}
	wantProblem(t, a.do("GET", "/v1/me/applications", nil, as(w.employer)), http.StatusForbidden, "forbidden")
	wantProblem(t, a.do("GET", "/v1/me/applications?cursor=bad", nil, as(w.candidate)), http.StatusBadRequest, "bad-request")
	wantProblem(t, a.do("GET", fmt.Sprintf("/v1/jobs/%d/applications?limit=500", w.job.ID), nil, as(w.employer)), http.StatusBadRequest, "bad-request")
}

func TestStatusWorkflow(t *testing.T) {
	t.Parallel()
	relay := &failingRelay{}
	a := newAPI(t, func(c *httpapi.Config) { c.Relay = relay })
	w := a.world()
	path := fmt.Sprintf("/v1/applications/%d", w.application.ID)
	change := func(u user, status string, opts ...reqOption) response {
		return a.do("PATCH", path, map[string]any{"status": status}, append(opts, as(u))...)
	}

	r := change(w.employer, "reviewing", header("If-Match", `"1"`))
	want(t, r, http.StatusOK)
	got := decodeAs[jobboard.Application](t, r)
	if got.Status != jobboard.StatusReviewing || got.Version != 2 || r.Header.Get("ETag") != `"2"` {
		t.Fatalf("after reviewing: %+v ETag %q", got, r.Header.Get("ETag"))
	}
	evs := relay.got()
	if len(evs) != 1 || evs[0].OldStatus != jobboard.StatusSubmitted || evs[0].NewStatus != jobboard.StatusReviewing || evs[0].ApplicationID != w.application.ID || evs[0].EventID == "" {
		t.Fatalf("relayed %+v", evs)
	}

	// The same status again: 200, nothing changes, no event.
	before := a.counts()
	r = change(w.employer, "reviewing")
	want(t, r, http.StatusOK)
	if got := decodeAs[jobboard.Application](t, r); got.Version != 2 || r.Header.Get("ETag") != `"2"` {
		t.Fatalf("no-op changed the version: %+v", got)
	}
	if len(relay.got()) != 1 {
		t.Fatalf("no-op relayed an event")
	}

	// Refusals change nothing.
	fp := a.jobsFingerprint()
	refusals := []struct {
		name   string
		resp   response
		status int
		kind   string
	}{
		{"candidate moves forward", change(w.candidate, "interview"), 409, "invalid-transition"},
		{"employer withdraws", change(w.employer, "withdrawn"), 409, "invalid-transition"},
		{"employer skips a step", change(w.employer, "offer"), 409, "invalid-transition"},
		{"stale If-Match", change(w.employer, "interview", header("If-Match", `"1"`)), 412, "precondition-failed"},
		{"weak If-Match", change(w.employer, "interview", header("If-Match", `W/"2"`)), 412, "precondition-failed"},
		{"foreign If-Match", change(w.employer, "interview", header("If-Match", `"abc"`)), 412, "precondition-failed"},
		{"stale If-Match list", change(w.employer, "interview", header("If-Match", `"1", "3"`)), 412, "precondition-failed"},
		{"malformed If-Match", change(w.employer, "interview", header("If-Match", `2`)), 400, "bad-request"},
		{"unterminated If-Match", change(w.employer, "interview", header("If-Match", `"2`)), 400, "bad-request"},
		{"unknown status", change(w.employer, "promoted"), 422, "validation"},
		{"missing status", a.do("PATCH", path, map[string]any{}, as(w.employer)), 422, "validation"},
		{"unknown field", a.do("PATCH", path, map[string]any{"status": "interview", "note": "x"}, as(w.employer)), 400, "bad-request"},
		{"status not a string", a.do("PATCH", path, map[string]any{"status": 3}, as(w.employer)), 400, "bad-request"},
		{"bad id", a.do("PATCH", "/v1/applications/x", map[string]any{"status": "interview"}, as(w.employer)), 400, "bad-request"},
		{"body too large", a.do("PATCH", path, raw(`{"status":"interview","x":"`+strings.Repeat("x", 1<<20)+`"}`), as(w.employer)), 413, "body-too-large"},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) { wantProblem(t, tt.resp, tt.status, tt.kind) })
	}
	if after := a.counts(); !mapsEqual(before, after) || a.jobsFingerprint() != fp {
		t.Fatalf("refusals changed rows: %v → %v", before, after)
	}
	if len(relay.got()) != 1 {
		t.Fatalf("refusals relayed events")
	}

	// A list naming the current version matches; so does "*".
	want(t, change(w.employer, "interview", header("If-Match", `"1", "2"`)), http.StatusOK)
	want(t, change(w.employer, "offer", header("If-Match", `*`)), http.StatusOK)
	// The candidate withdraws; then nothing moves any more.
	r = change(w.candidate, "withdrawn", header("If-Match", `"4"`))
	want(t, r, http.StatusOK)
	if r.Header.Get("ETag") != `"5"` {
		t.Fatalf("ETag %q", r.Header.Get("ETag"))
	}
	wantProblem(t, change(w.employer, "hired"), http.StatusConflict, "invalid-transition")

	r = a.do("GET", path+"/history", nil, as(w.candidate))
	want(t, r, http.StatusOK)
	h := decodeAs[history](t, r).Items
	var steps []string
	for _, e := range h {
		steps = append(steps, string(e.OldStatus)+"→"+string(e.NewStatus))
	}
	if want := []string{"submitted→reviewing", "reviewing→interview", "interview→offer", "offer→withdrawn"}; !slices.Equal(steps, want) {
		t.Fatalf("history %v, want %v", steps, want)
	}
	if h[0].ChangedBy != w.employer.ID || h[3].ChangedBy != w.candidate.ID || h[0].EventID != evs[0].EventID {
		t.Fatalf("history entries %+v", h)
	}
	if n := len(relay.got()); n != 4 {
		t.Fatalf("%d events relayed, want 4", n)
	}

	// A fresh application has an empty history, not null.
	other := a.apply(w.otherCandidate, w.job.ID)
	r = a.do("GET", fmt.Sprintf("/v1/applications/%d/history", other.ID), nil, as(w.employer))
	want(t, r, http.StatusOK)
	if !strings.Contains(string(r.Body), `"items":[]`) {
		t.Fatalf("empty history: %s", r.Body)
	}
}

// A failing relay does not change the answer: the change is committed and
// its outbox row stays for the sweeper.
func TestRelayFailureKeepsAnswer(t *testing.T) {
	t.Parallel()
	relay := &failingRelay{err: fmt.Errorf("sqs: throttled")}
	a := newAPI(t, func(c *httpapi.Config) { c.Relay = relay })
	w := a.world()
	r := a.do("PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID), map[string]any{"status": "rejected"}, as(w.employer))
	want(t, r, http.StatusOK)
	if got := decodeAs[jobboard.Application](t, r); got.Status != jobboard.StatusRejected {
		t.Fatalf("status %s", got.Status)
	}
	if n := a.statusEvents(); n != 1 || len(relay.got()) != 1 {
		t.Fatalf("outbox rows %d, relay calls %d", n, len(relay.got()))
	}
}

// Twenty simultaneous applications of one candidate to one job: one wins,
// nineteen are told they applied already, one row exists.
func TestConcurrentApplications(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	candidate := a.register(jobboard.RoleCandidate)
	j := a.job(employer, a.company(employer).ID, "Go Engineer")

	const n = 20
	results := make([]response, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = a.do("POST", fmt.Sprintf("/v1/jobs/%d/applications", j.ID), map[string]any{"cover_letter": fmt.Sprint(i)}, as(candidate))
		}()
	}
	close(start)
	wg.Wait()
	created, duplicates := 0, 0
	for _, r := range results {
		switch {
		case r.Status == http.StatusCreated:
			created++
		case r.Status == http.StatusConflict && r.problem(t).Type == httpapi.ProblemBase+"duplicate-application":
			duplicates++
		default:
			t.Errorf("unexpected answer %s", r)
		}
	}
	if created != 1 || duplicates != n-1 {
		t.Fatalf("%d created, %d duplicates; want 1 and %d", created, duplicates, n-1)
	}
	if rows := a.counts()["applications"]; rows != 1 {
		t.Fatalf("%d application rows, want 1", rows)
	}
}

// Two simultaneous changes with the same If-Match: one wins, the other gets
// 412, one history entry exists. Repeated over several applications to give
// the race many chances.
func TestConcurrentStatusChangesWithIfMatch(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	company := a.company(employer)
	j := a.job(employer, company.ID, "Go Engineer")
	const rounds = 5
	for round := range rounds {
		candidate := a.register(jobboard.RoleCandidate)
		app := a.apply(candidate, j.ID)
		path := fmt.Sprintf("/v1/applications/%d", app.ID)
		var results [2]response
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, status := range []string{"reviewing", "rejected"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i] = a.do("PATCH", path, map[string]any{"status": status}, as(employer), header("If-Match", `"1"`))
			}()
		}
		close(start)
		wg.Wait()
		statuses := []int{results[0].Status, results[1].Status}
		slices.Sort(statuses)
		if !slices.Equal(statuses, []int{http.StatusOK, http.StatusPreconditionFailed}) {
			t.Fatalf("round %d: statuses %v (%s | %s)", round, statuses, results[0], results[1])
		}
		r := a.do("GET", path+"/history", nil, as(employer))
		if h := decodeAs[history](t, r).Items; len(h) != 1 {
			t.Fatalf("round %d: %d history entries, want 1", round, len(h))
		}
	}
	if n := a.statusEvents(); n != rounds {
		t.Fatalf("%d outbox rows, want %d", n, rounds)
	}
}
