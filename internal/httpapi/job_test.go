package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jobboard/jobboard/internal/jobboard"
)

type jobPage struct {
	Items      []jobboard.Job `json:"items"`
	NextCursor *string        `json:"next_cursor"`
}

func TestCreateAndGetJob(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	company := a.company(employer)

	body := jobInput("  Go Engineer ")
	body["salary"] = map[string]any{"min": 50000, "max": 70000, "currency": "eur"}
	r := a.do("POST", fmt.Sprintf("/v1/companies/%d/jobs", company.ID), body, as(employer))
	want(t, r, http.StatusCreated)
	j := decodeAs[jobboard.Job](t, r)
	if j.Title != "Go Engineer" || j.CompanyID != company.ID || j.Status != jobboard.JobOpen || !j.Remote ||
		j.Salary == nil || *j.Salary != (jobboard.Salary{Min: 50000, Max: 70000, Currency: "EUR"}) {
		t.Fatalf("job %+v salary %+v", j, j.Salary)
	}
	if loc := r.Header.Get("Location"); loc != fmt.Sprintf("/v1/jobs/%d", j.ID) {
		t.Fatalf("Location %q", loc)
	}
	r = a.do("GET", fmt.Sprintf("/v1/jobs/%d", j.ID), nil)
	want(t, r, http.StatusOK)
	if got := decodeAs[jobboard.Job](t, r); got.ID != j.ID || got.Title != j.Title {
		t.Fatalf("got %+v", got)
	}

	// A job without salary has "salary": null.
	body = jobInput("Nurse")
	delete(body, "salary")
	r = a.do("POST", fmt.Sprintf("/v1/companies/%d/jobs", company.ID), body, as(employer))
	want(t, r, http.StatusCreated)
	if !strings.Contains(string(r.Body), `"salary":null`) {
		t.Fatalf("no null salary: %s", r.Body)
	}

	before := a.counts()
	path := fmt.Sprintf("/v1/companies/%d/jobs", company.ID)
	tests := []struct {
		name   string
		body   any
		status int
		kind   string
		fields []string
	}{
		{"missing everything", map[string]any{}, 422, "validation", []string{"description", "employment_type", "title"}},
		{"over-long title and location", map[string]any{"title": strings.Repeat("t", 201), "description": "d", "location": strings.Repeat("l", 201), "employment_type": "contract"},
			422, "validation", []string{"location", "title"}},
		{"unknown employment type", map[string]any{"title": "t", "description": "d", "employment_type": "gig"}, 422, "validation", []string{"employment_type"}},
		{"salary max below min, bad currency", map[string]any{"title": "t", "description": "d", "employment_type": "contract",
			"salary": map[string]any{"min": 10, "max": 5, "currency": "euro"}}, 422, "validation", []string{"salary.currency", "salary.max"}},
		{"salary too large", map[string]any{"title": "t", "description": "d", "employment_type": "contract",
			"salary": map[string]any{"min": 1, "max": 100000001, "currency": "EUR"}}, 422, "validation", []string{"salary.max"}},
		{"unknown field", map[string]any{"title": "t", "description": "d", "employment_type": "contract", "status": "closed"}, 400, "bad-request", []string{"status"}},
		{"unknown nested field", map[string]any{"title": "t", "description": "d", "employment_type": "contract",
			"salary": map[string]any{"min": 1, "max": 2, "currency": "EUR", "bonus": 3}}, 400, "bad-request", []string{"salary.bonus"}},
		{"wrong type", map[string]any{"title": "t", "description": "d", "employment_type": "contract", "remote": "yes"}, 400, "bad-request", []string{"remote"}},
		{"nested wrong type", map[string]any{"title": "t", "description": "d", "employment_type": "contract",
			"salary": map[string]any{"min": "1", "max": 2, "currency": "EUR"}}, 400, "bad-request", []string{"salary.min"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := wantProblem(t, a.do("POST", path, tt.body, as(employer)), tt.status, tt.kind)
			if !slices.Equal(p.fields(), tt.fields) {
				t.Fatalf("fields %v, want %v", p.fields(), tt.fields)
			}
		})
	}
	wantProblem(t, a.do("POST", "/v1/companies/abc/jobs", jobInput("x"), as(employer)), http.StatusBadRequest, "bad-request")
	wantProblem(t, a.do("POST", "/v1/companies/999999/jobs", jobInput("x"), as(employer)), http.StatusNotFound, "not-found")
	if after := a.counts(); !mapsEqual(before, after) {
		t.Fatalf("refused requests changed rows: %v → %v", before, after)
	}
}

func TestUpdateJobMergePatch(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	company := a.company(employer)
	j := a.job(employer, company.ID, "Go Engineer")
	path := fmt.Sprintf("/v1/jobs/%d", j.ID)

	patch := func(body any) jobboard.Job {
		t.Helper()
		r := a.do("PATCH", path, body, as(employer), header("Content-Type", "application/merge-patch+json"))
		want(t, r, http.StatusOK)
		return decodeAs[jobboard.Job](t, r)
	}

	// Absent members stay; given ones change.
	got := patch(map[string]any{"title": " Senior Go Engineer ", "remote": false})
	if got.Title != "Senior Go Engineer" || got.Remote || got.Description != j.Description || got.Location != j.Location || *got.Salary != *j.Salary {
		t.Fatalf("after title patch: %+v", got)
	}
	// A partial salary merges into the current one.
	got = patch(map[string]any{"salary": map[string]any{"max": 90000}})
	if *got.Salary != (jobboard.Salary{Min: 60000, Max: 90000, Currency: "EUR"}) {
		t.Fatalf("after salary merge: %+v", got.Salary)
	}
	// null removes the salary and empties the location.
	got = patch(map[string]any{"salary": nil, "location": nil})
	if got.Salary != nil || got.Location != "" {
		t.Fatalf("after nulls: %+v", got)
	}
	// A partial salary on a job without one cannot be completed.
	before := a.jobsFingerprint()
	p := wantProblem(t, a.do("PATCH", path, map[string]any{"salary": map[string]any{"min": 1}}, as(employer)), http.StatusUnprocessableEntity, "validation")
	if !slices.Equal(p.fields(), []string{"salary.currency", "salary.max"}) {
		t.Fatalf("fields %v", p.fields())
	}
	if after := a.jobsFingerprint(); after != before {
		t.Fatalf("refused patch changed the job:\n%s\n%s", before, after)
	}
	got = patch(map[string]any{"salary": map[string]any{"min": 1000, "max": 2000, "currency": "usd"}})
	if *got.Salary != (jobboard.Salary{Min: 1000, Max: 2000, Currency: "USD"}) {
		t.Fatalf("after full salary: %+v", got.Salary)
	}
	// An empty patch changes nothing and answers the job.
	if got2 := patch(map[string]any{}); got2.Title != got.Title || *got2.Salary != *got.Salary {
		t.Fatalf("empty patch: %+v", got2)
	}

	before = a.jobsFingerprint()
	tests := []struct {
		name   string
		body   any
		status int
		kind   string
		fields []string
	}{
		{"null title", map[string]any{"title": nil}, 422, "validation", []string{"title"}},
		{"over-long title", map[string]any{"title": strings.Repeat("t", 201)}, 422, "validation", []string{"title"}},
		{"bad status", map[string]any{"status": "archived"}, 422, "validation", []string{"status"}},
		{"bad employment type", map[string]any{"employment_type": "gig"}, 422, "validation", []string{"employment_type"}},
		{"salary max below min", map[string]any{"salary": map[string]any{"max": 1}}, 422, "validation", []string{"salary.max"}},
		{"null salary member", map[string]any{"salary": map[string]any{"min": nil}}, 422, "validation", []string{"salary.min"}},
		{"unknown member", map[string]any{"company_id": 2}, 400, "bad-request", []string{"company_id"}},
		{"unknown salary member", map[string]any{"salary": map[string]any{"bonus": 2}}, 400, "bad-request", []string{"salary.bonus"}},
		{"wrong type", map[string]any{"remote": "no"}, 400, "bad-request", []string{"remote"}},
		{"salary not an object", map[string]any{"salary": 5}, 400, "bad-request", []string{"salary"}},
		{"not an object", raw(`[]`), 400, "bad-request", nil},
		{"malformed", raw(`{"title": }`), 400, "bad-request", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := wantProblem(t, a.do("PATCH", path, tt.body, as(employer)), tt.status, tt.kind)
			if !slices.Equal(p.fields(), tt.fields) {
				t.Fatalf("fields %v, want %v", p.fields(), tt.fields)
			}
		})
	}
	if after := a.jobsFingerprint(); after != before {
		t.Fatalf("refused patches changed jobs:\n%s\n%s", before, after)
	}

	// Closing: the job disappears for everyone but its company's members.
	got = patch(map[string]any{"status": "closed"})
	if got.Status != jobboard.JobClosed {
		t.Fatalf("status %s", got.Status)
	}
	wantProblem(t, a.do("GET", path, nil), http.StatusNotFound, "not-found")
	want(t, a.do("GET", path, nil, as(employer)), http.StatusOK)
	candidate := a.register(jobboard.RoleCandidate)
	wantProblem(t, a.do("GET", path, nil, as(candidate)), http.StatusNotFound, "not-found")
	wantProblem(t, a.do("POST", path+"/applications", map[string]any{}, as(candidate)), http.StatusNotFound, "not-found")
	// A member listing its own company sees the closed job; others do not.
	r := a.do("GET", fmt.Sprintf("/v1/jobs?company_id=%d", company.ID), nil, as(employer))
	want(t, r, http.StatusOK)
	if page := decodeAs[jobPage](t, r); len(page.Items) != 1 || page.Items[0].Status != jobboard.JobClosed {
		t.Fatalf("member's listing %+v", page)
	}
	r = a.do("GET", fmt.Sprintf("/v1/jobs?company_id=%d", company.ID), nil)
	if page := decodeAs[jobPage](t, r); len(page.Items) != 0 {
		t.Fatalf("anonymous listing shows a closed job: %+v", page)
	}
	// Reopen.
	if got = patch(map[string]any{"status": "open"}); got.Status != jobboard.JobOpen {
		t.Fatalf("status %s", got.Status)
	}
}

func TestSearchJobsFilters(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	company := a.company(employer)
	other := a.register(jobboard.RoleEmployer)
	otherCompany := a.company(other)

	mk := func(e user, companyID int64, title, location string, remote bool, et string, salary any) int64 {
		body := map[string]any{"title": title, "description": "A job doing " + title + ".", "location": location,
			"remote": remote, "employment_type": et, "salary": salary}
		r := a.do("POST", fmt.Sprintf("/v1/companies/%d/jobs", companyID), body, as(e))
		want(t, r, http.StatusCreated)
		return decodeAs[jobboard.Job](t, r).ID
	}
	sal := func(lo, hi int) map[string]any { return map[string]any{"min": lo, "max": hi, "currency": "EUR"} }
	goBerlin := mk(employer, company.ID, "Go Engineer", "Berlin", false, "full_time", sal(50000, 70000))
	goRemote := mk(employer, company.ID, "Senior Go Engineer", "Lisbon", true, "contract", sal(90000, 120000))
	nurse := mk(other, otherCompany.ID, "Registered Nurse", "Berlin", false, "part_time", nil)
	closed := mk(other, otherCompany.ID, "Go Engineer, closed", "Berlin", false, "full_time", nil)
	want(t, a.do("PATCH", fmt.Sprintf("/v1/jobs/%d", closed), map[string]any{"status": "closed"}, as(other)), http.StatusOK)

	ids := func(query string) []int64 {
		t.Helper()
		r := a.do("GET", "/v1/jobs"+query, nil)
		want(t, r, http.StatusOK)
		var out []int64
		for _, j := range decodeAs[jobPage](t, r).Items {
			out = append(out, j.ID)
		}
		return out
	}
	tests := []struct {
		query string
		want  []int64
	}{
		{"", []int64{nurse, goRemote, goBerlin}},
		{"?q=engineer", []int64{goRemote, goBerlin}},
		{"?q=" + url.QueryEscape(`"registered nurse"`), []int64{nurse}},
		{"?location=berlin", []int64{nurse, goBerlin}},
		{"?remote=true", []int64{goRemote}},
		{"?remote=false&q=go", []int64{goBerlin}},
		{"?employment_type=contract", []int64{goRemote}},
		{"?salary_min=80000", []int64{goRemote}},
		{"?salary_min=60000", []int64{goRemote, goBerlin}},
		{fmt.Sprintf("?company_id=%d", otherCompany.ID), []int64{nurse}},
		{"?q=zebra", nil},
		{"?limit=1", []int64{nurse}},
	}
	for _, tt := range tests {
		if got := ids(tt.query); !slices.Equal(got, tt.want) {
			t.Errorf("GET /v1/jobs%s: ids %v, want %v", tt.query, got, tt.want)
		}
	}

	bad := []struct {
		query  string
		fields []string
	}{
		{"?limit=0", []string{"limit"}},
		{"?limit=101", []string{"limit"}},
		{"?limit=ten", []string{"limit"}},
		{"?remote=yes", []string{"remote"}},
		{"?employment_type=gig", []string{"employment_type"}},
		{"?salary_min=-1", []string{"salary_min"}},
		{"?company_id=0", []string{"company_id"}},
		{"?cursor=garbage", []string{"cursor"}},
		{"?cursor=" + "djE6MA", []string{"cursor"}},  // "v1:0"
		{"?cursor=" + "djI6MTA", []string{"cursor"}}, // "v2:10"
		{"?salary_minimum=5", []string{"salary_minimum"}},
		{"?q=a&q=b", []string{"q"}},
		{"?q=" + strings.Repeat("x", 201), []string{"q"}},
		{"?limit=0&remote=maybe", []string{"limit", "remote"}},
		{"?q=%zz", nil},
	}
	for _, tt := range bad {
		p := wantProblem(t, a.do("GET", "/v1/jobs"+tt.query, nil), http.StatusBadRequest, "bad-request")
		if !slices.Equal(p.fields(), tt.fields) {
			t.Errorf("GET /v1/jobs%s: fields %v, want %v", tt.query, p.fields(), tt.fields)
		}
	}
}

// Walking the cursors visits every matching open job exactly once, newest
// first, even while new jobs are posted during the walk.
func TestSearchCursorWalk(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	company := a.company(employer)
	if err := a.db.SeedJobs(context.Background(), company.ID, 500); err != nil {
		t.Fatal(err)
	}
	// The expected set, straight from the database.
	var wantIDs []int64
	rows, err := a.db.Pool.Query(context.Background(),
		`SELECT id FROM jobs WHERE status = 'open' AND search @@ websearch_to_tsquery('english', 'engineer') ORDER BY id DESC`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		wantIDs = append(wantIDs, id)
	}
	if rows.Err() != nil || len(wantIDs) < 100 {
		t.Fatalf("seeded %d matching jobs (%v); want a few pages", len(wantIDs), rows.Err())
	}

	// Post new matching jobs concurrently with the walk.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			r := a.do("POST", fmt.Sprintf("/v1/companies/%d/jobs", company.ID), jobInput(fmt.Sprintf("Engineer %d", i)), as(employer))
			if r.Status != http.StatusCreated {
				t.Errorf("post during walk: %s", r)
				return
			}
			if i >= 30 {
				return
			}
		}
	}()

	var got []int64
	seen := map[int64]bool{}
	cursor := ""
	pages := 0
	for {
		q := "/v1/jobs?q=engineer&limit=17"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := a.do("GET", q, nil)
		want(t, r, http.StatusOK)
		page := decodeAs[jobPage](t, r)
		pages++
		for _, j := range page.Items {
			if seen[j.ID] {
				t.Fatalf("job %d seen twice", j.ID)
			}
			seen[j.ID] = true
			if j.ID <= wantIDs[0] { // jobs posted during the walk are newer: never on later pages
				got = append(got, j.ID)
			}
			if j.Status != jobboard.JobOpen {
				t.Fatalf("closed job %d listed", j.ID)
			}
		}
		if page.NextCursor == nil {
			break
		}
		if len(page.Items) != 17 {
			t.Fatalf("page %d has %d items but a next cursor", pages, len(page.Items))
		}
		cursor = *page.NextCursor
	}
	close(stop)
	wg.Wait()
	if !slices.Equal(got, wantIDs) {
		t.Fatalf("walk found %d jobs, want %d (first difference matters)", len(got), len(wantIDs))
	}
	if pages < (len(wantIDs)+16)/17 {
		t.Fatalf("%d pages for %d jobs", pages, len(wantIDs))
	}
}
