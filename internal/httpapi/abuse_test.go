package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// NUL characters and invalid UTF-8 are refused where they enter, naming the
// field, before anything is hashed or written: PostgreSQL would reject them
// (SQLSTATE 22021) and the API answered 500.
func TestBadBytesAreClientErrors(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	closedRegistration := `{"email":"nul@example.com","password":"long enough pw","name":"A\u0000B","role":"candidate"}`
	tests := []struct {
		name   string
		method string
		path   string
		body   any
		as     user
		status int
		field  string
	}{
		{"NUL in q", "GET", "/v1/jobs?q=%00", nil, user{}, 400, "q"},
		{"invalid UTF-8 in q", "GET", "/v1/jobs?q=%FF", nil, user{}, 400, "q"},
		{"invalid UTF-8 in location", "GET", "/v1/jobs?location=%C3%28", nil, user{}, 400, "location"},
		{"NUL in a parameter name", "GET", "/v1/jobs?q%00=x", nil, user{}, 400, "q\uFFFD"},
		{"NUL in the name of a registration", "POST", "/v1/auth/register", raw(closedRegistration), user{}, 400, "name"},
		{"NUL in the email of a registration", "POST", "/v1/auth/register",
			raw(`{"email":"a\u0000@example.com","password":"long enough pw","name":"A","role":"candidate"}`), user{}, 400, "email"},
		{"NUL in the password of a registration", "POST", "/v1/auth/register",
			raw(`{"email":"b@example.com","password":"long enough\u0000pw","name":"A","role":"candidate"}`), user{}, 400, "password"},
		{"NUL in a login", "POST", "/v1/auth/login", raw(`{"email":"a\u0000@example.com","password":"x"}`), user{}, 400, "email"},
		{"invalid UTF-8 in a login", "POST", "/v1/auth/login", raw("{\"email\":\"a\xff@example.com\",\"password\":\"x\"}"), user{}, 400, "email"},
		{"NUL in a job title", "POST", fmt.Sprintf("/v1/companies/%d/jobs", w.company.ID),
			raw(`{"title":"Go\u0000","description":"d","employment_type":"full_time"}`), w.employer, 400, "title"},
		{"invalid UTF-8 in a job description", "POST", fmt.Sprintf("/v1/companies/%d/jobs", w.company.ID),
			raw("{\"title\":\"Go\",\"description\":\"\xc3\x28\",\"employment_type\":\"full_time\"}"), w.employer, 400, "description"},
		{"lone surrogate in a salary currency", "POST", fmt.Sprintf("/v1/companies/%d/jobs", w.company.ID),
			raw(`{"title":"Go","description":"d","employment_type":"full_time","salary":{"min":1,"max":2,"currency":"E\ud800R"}}`), w.employer, 400, "salary.currency"},
		{"NUL in a job patch", "PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), raw(`{"title":"x\u0000"}`), w.employer, 400, "title"},
		{"NUL in a job patch's salary", "PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), raw(`{"salary":{"currency":"\u0000"}}`), w.employer, 400, "salary.currency"},
		{"NUL in a cover letter", "POST", fmt.Sprintf("/v1/jobs/%d/applications", w.job.ID), raw(`{"cover_letter":"hi\u0000"}`), w.otherCandidate, 400, "cover_letter"},
		{"NUL in a company name", "POST", "/v1/companies", raw(`{"name":"Acme\u0000"}`), w.employer, 400, "name"},
		{"NUL in a status", "PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID), raw(`{"status":"reviewing\u0000"}`), w.employer, 400, "status"},
		{"NUL in a member name", "POST", "/v1/companies", raw(`{"na\u0000me":"Acme"}`), w.employer, 400, "na\uFFFDme"},
	}
	before, jobs := a.counts(), a.jobsFingerprint()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := a.do(tt.method, tt.path, tt.body, as(tt.as))
			p := wantProblem(t, r, tt.status, "bad-request")
			if !slices.Contains(p.fields(), tt.field) {
				t.Fatalf("fields %v, want %q among them (%s)", p.fields(), tt.field, r)
			}
		})
	}
	if after := a.counts(); !mapsEqual(before, after) {
		t.Fatalf("refused requests changed rows: %v → %v", before, after)
	}
	if after := a.jobsFingerprint(); after != jobs {
		t.Fatalf("refused requests changed jobs:\n%s\n%s", jobs, after)
	}
	for _, line := range logLines(t, a.logs) {
		if line["level"] == "ERROR" {
			t.Errorf("ERROR logged for a client's bad bytes: %v", line)
		}
	}

	// Headers the API reads: If-Match and Authorization.
	r := a.do("PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID), map[string]any{"status": "reviewing"},
		as(w.employer), header("If-Match", "\"1\xff\""))
	if p := wantProblem(t, r, http.StatusBadRequest, "bad-request"); !slices.Contains(p.fields(), "If-Match") {
		t.Fatalf("fields %v, want If-Match", p.fields())
	}
	r = a.do("GET", "/v1/me", nil, header("Authorization", "Bearer \xff\xfe"))
	if p := wantProblem(t, r, http.StatusBadRequest, "bad-request"); !slices.Contains(p.fields(), "Authorization") {
		t.Fatalf("fields %v, want Authorization", p.fields())
	}
}

// A registration refused for its bytes spends no argon2 time: the server
// under test cannot hash at all (argon2 panics on zero threads), so a hash
// before the check would answer 500.
func TestBadBytesRefusedBeforeHashing(t *testing.T) {
	t.Parallel()
	a := newAPI(t, func(c *httpapi.Config) { c.Password = httpapi.PasswordParams{MemoryKiB: 64, Time: 1, Threads: 0} })
	r := a.do("POST", "/v1/auth/register", raw(`{"email":"nul@example.com","password":"long enough pw","name":"A\u0000","role":"candidate"}`))
	wantProblem(t, r, http.StatusBadRequest, "bad-request")
	r = a.do("POST", "/v1/auth/login", raw(`{"email":"nul@example.com","password":"long enough\u0000"}`))
	wantProblem(t, r, http.StatusBadRequest, "bad-request")
}

// JSON members are matched exactly: encoding/json alone would accept "Title"
// for "title", and a repeated member would silently take the last value.
func TestJSONMembersMatchExactly(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	tests := []struct {
		name, method, path, body string
		as                       user
		field                    string
	}{
		{"case of a member", "POST", fmt.Sprintf("/v1/companies/%d/jobs", w.company.ID),
			`{"Title":"Go","description":"d","employment_type":"full_time"}`, w.employer, "Title"},
		{"case of a nested member", "POST", fmt.Sprintf("/v1/companies/%d/jobs", w.company.ID),
			`{"title":"Go","description":"d","employment_type":"full_time","salary":{"MIN":1,"max":2,"currency":"EUR"}}`, w.employer, "salary.MIN"},
		{"repeated role", "POST", "/v1/auth/register",
			`{"email":"dup@example.com","password":"long enough pw","name":"A","role":"candidate","role":"employer"}`, user{}, "role"},
		{"repeated email in a login", "POST", "/v1/auth/login", `{"email":"a@example.com","email":"b@example.com","password":"x"}`, user{}, "email"},
		{"case in a login", "POST", "/v1/auth/login", `{"EMAIL":"a@example.com","password":"x"}`, user{}, "EMAIL"},
		{"repeated member of a patch", "PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), `{"status":"closed","status":"open"}`, w.employer, "status"},
		{"repeated salary member of a patch", "PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), `{"salary":{"min":1,"min":2}}`, w.employer, "salary.min"},
		{"case in a patch", "PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), `{"Status":"closed"}`, w.employer, "Status"},
		{"repeated cover letter", "POST", fmt.Sprintf("/v1/jobs/%d/applications", w.job.ID), `{"cover_letter":"a","cover_letter":"b"}`, w.otherCandidate, "cover_letter"},
		{"case of a status change", "PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID), `{"STATUS":"reviewing"}`, w.employer, "STATUS"},
	}
	before, jobs := a.counts(), a.jobsFingerprint()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := a.do(tt.method, tt.path, raw(tt.body), as(tt.as))
			p := wantProblem(t, r, http.StatusBadRequest, "bad-request")
			if !slices.Equal(p.fields(), []string{tt.field}) {
				t.Fatalf("fields %v, want [%s]", p.fields(), tt.field)
			}
		})
	}
	if after := a.counts(); !mapsEqual(before, after) {
		t.Fatalf("refused requests changed rows: %v → %v", before, after)
	}
	if after := a.jobsFingerprint(); after != jobs {
		t.Fatalf("refused requests changed jobs:\n%s\n%s", jobs, after)
	}
}

// A statement that runs past the pool's statement_timeout answers 503 with
// a problem, not 500. The search is held up by a lock that another
// connection keeps on the jobs table, so it cannot finish in time.
func TestStatementTimeoutAnswers503(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	db := pgtest.Open(t, url, func(c *pgxpool.Config) {
		c.ConnConfig.RuntimeParams["statement_timeout"] = "200"
	})
	a := newAPIOn(t, db)
	w := a.world()

	locker, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(locker.Close)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, "LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/jobs?q=engineer", "/v1/jobs", fmt.Sprintf("/v1/jobs/%d", w.job.ID)} {
		r := a.do("GET", path, nil)
		p := wantProblem(t, r, http.StatusServiceUnavailable, "query-timeout")
		if p.Detail == "" {
			t.Errorf("%s: no detail", path)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	want(t, a.do("GET", "/v1/jobs?q=engineer", nil), http.StatusOK)
	for _, line := range logLines(t, a.logs) {
		if line["level"] == "ERROR" {
			t.Errorf("ERROR logged for a statement timeout: %v", line)
		}
	}
}

// A query of only negated words could only be answered by reading every
// open job; it is refused, naming q.
func TestSearchRefusesOnlyNegations(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	for _, q := range []string{"-engineer", "-engineer -python", `-"go engineer"`, "engineer or -python"} {
		r := a.do("GET", "/v1/jobs?q="+urlQueryEscape(q), nil)
		p := wantProblem(t, r, http.StatusBadRequest, "bad-request")
		if !slices.Equal(p.fields(), []string{"q"}) {
			t.Fatalf("q=%s: fields %v, want [q]", q, p.fields())
		}
	}
	// A word to search for makes negations fine.
	want(t, a.do("GET", "/v1/jobs?q="+urlQueryEscape("engineer -python"), nil), http.StatusOK)
}

// loginFreeAttempts is how many failed logins an account gets before the
// backoff starts (httpapi's policy).
const loginFreeAttempts = 5

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

func upper(s string) string { return strings.ToUpper(s) }

// After repeated failures an account's logins are refused with 429 and
// Retry-After for a while, whether or not the account exists, and before
// any password is hashed; a success clears the count.
func TestLoginBackoff(t *testing.T) {
	t.Parallel()
	var clock = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := newAPI(t, func(c *httpapi.Config) { c.Now = func() time.Time { return clock } })
	u := a.register(jobboard.RoleCandidate)
	login := func(email, password string) response {
		return a.do("POST", "/v1/auth/login", map[string]any{"email": email, "password": password})
	}
	for _, email := range []string{u.Email, "nobody@example.com"} {
		for range loginFreeAttempts {
			wantProblem(t, login(email, "wrong password"), http.StatusUnauthorized, "invalid-credentials")
		}
	}
	var answers []response
	for _, email := range []string{u.Email, "nobody@example.com"} {
		r := login(email, "correct horse battery")
		p := wantProblem(t, r, http.StatusTooManyRequests, "too-many-attempts")
		secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || secs < 1 {
			t.Fatalf("%s: Retry-After %q", email, r.Header.Get("Retry-After"))
		}
		if p.Detail == "" {
			t.Fatalf("no detail: %s", r)
		}
		answers = append(answers, r)
	}
	// The existing and the unknown account get the same answer.
	if answers[0].Header.Get("Retry-After") != answers[1].Header.Get("Retry-After") ||
		answers[0].problem(t).Detail != answers[1].problem(t).Detail {
		t.Fatalf("answers differ: %s / %s", answers[0], answers[1])
	}
	// The email is compared as the login compares it.
	wantProblem(t, login("  "+upper(u.Email), "correct horse battery"), http.StatusTooManyRequests, "too-many-attempts")

	// Once the delay has passed, the right password works and clears the
	// count: the next wrong password is a plain 401 again.
	secs, _ := strconv.Atoi(answers[0].Header.Get("Retry-After"))
	clock = clock.Add(time.Duration(secs) * time.Second)
	want(t, login(u.Email, "correct horse battery"), http.StatusOK)
	wantProblem(t, login(u.Email, "wrong password"), http.StatusUnauthorized, "invalid-credentials")

	// Each further failure while over the limit doubles the delay.
	clock = clock.Add(time.Duration(secs) * time.Second)
	wantProblem(t, login("nobody@example.com", "wrong password"), http.StatusUnauthorized, "invalid-credentials")
	r := login("nobody@example.com", "wrong password")
	wantProblem(t, r, http.StatusTooManyRequests, "too-many-attempts")
	if again, _ := strconv.Atoi(r.Header.Get("Retry-After")); again != 2*secs {
		t.Fatalf("Retry-After after one more failure %d, want %d", again, 2*secs)
	}
}

// Wrong passwords sent in parallel get no more tries than sent one after
// the other: the check of the block and the count are one step, so exactly
// the free attempts are answered 401 (their passwords checked) and every
// other one 429, for an existing and for an unknown account alike.
func TestLoginBackoffHoldsUnderParallelAttempts(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := newAPI(t, func(c *httpapi.Config) { c.Now = func() time.Time { return clock } })
	u := a.register(jobboard.RoleCandidate)
	const parallel = 24
	for i, email := range []string{u.Email, "nobody@example.com"} {
		client := fmt.Sprintf("198.51.100.%d", i+1) // each burst from its own client, whose own limit is looser
		counts := statusCounts(parallel, func(int) response {
			return a.do("POST", "/v1/auth/login", map[string]any{"email": email, "password": "wrong password"}, from(client))
		})
		if counts[http.StatusUnauthorized] != loginFreeAttempts || counts[http.StatusTooManyRequests] != parallel-loginFreeAttempts {
			t.Errorf("%s: %d parallel wrong passwords answered %v; want %d × 401 and the rest 429",
				email, parallel, counts, loginFreeAttempts)
		}
	}
}

// Applying to a closed job answers 404 to anyone who may not see the job,
// exactly like GET of it, so that the answer does not reveal that it exists.
func TestApplyToClosedJobLooksMissing(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	want(t, a.do("PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), map[string]any{"status": "closed"}, as(w.employer)), http.StatusOK)
	wantProblem(t, a.do("GET", fmt.Sprintf("/v1/jobs/%d", w.job.ID), nil, as(w.otherCandidate)), http.StatusNotFound, "not-found")
	missing := wantProblem(t, a.do("POST", "/v1/jobs/999999/applications", map[string]any{}, as(w.otherCandidate)), http.StatusNotFound, "not-found")
	closed := wantProblem(t, a.do("POST", fmt.Sprintf("/v1/jobs/%d/applications", w.job.ID), map[string]any{}, as(w.otherCandidate)), http.StatusNotFound, "not-found")
	if closed.Detail != missing.Detail || closed.Title != missing.Title {
		t.Fatalf("closed job %+v, missing job %+v", closed, missing)
	}
}
