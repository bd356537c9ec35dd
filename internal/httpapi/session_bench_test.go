package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// timedPair runs two requests alternately, b.N times each, and reports
// the time of the second as a ratio of the first's ("x-"+baseline): both
// meet the same machine, so the ratio does not carry the load of a moment.
// Which of the two goes first changes every iteration, so that neither
// always finds what the other left warm.
func timedPair(b *testing.B, h http.Handler, baseline string, first, second func() *http.Request, status int) {
	b.Helper()
	var firstT, secondT time.Duration
	timed := func(total *time.Duration, req *http.Request) {
		start := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		*total += time.Since(start)
		if rec.Code != status {
			b.Fatalf("%s %s: status %d: %s", req.Method, req.URL, rec.Code, rec.Body)
		}
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			timed(&firstT, first())
			timed(&secondT, second())
		} else {
			timed(&secondT, second())
			timed(&firstT, first())
		}
	}
	b.ReportMetric(float64(firstT.Microseconds())/float64(b.N), baseline+"-µs")
	b.ReportMetric(float64(secondT.Microseconds())/float64(b.N), "µs")
	b.ReportMetric(float64(secondT)/float64(firstT), "x-"+baseline)
}

// BenchmarkAuthenticatedRead: signed-in reads, each timed alternately with
// an anonymous GET /v1/jobs/{id} (one statement, no session), served
// in-process over one database. Every signed-in read checks that its
// session was not ended by a password reset, inside the statement it runs
// anyway; "x-anonymous" tells what a signed-in read costs over the
// anonymous one, and run on the commit before the check and after it,
// what the check costs.
func BenchmarkAuthenticatedRead(b *testing.B) {
	ctx := context.Background()
	db := pgtest.NewDB(b)
	h := httpapi.NewServer(httpapi.Config{
		Writes: db, Users: db, Companies: db, Jobs: db, Applications: db, Pinger: db,
		Logger: slog.New(slog.DiscardHandler), TokenKey: testKey, Password: cheapPasswords,
	})
	post := func(path, token string, body any) []byte {
		data, err := json.Marshal(body)
		if err != nil {
			b.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(data))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code/100 != 2 {
			b.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
	type session struct {
		User  jobboard.User `json:"user"`
		Token string        `json:"token"`
	}
	register := func(email string, role jobboard.Role) session {
		var s session
		if err := json.Unmarshal(post("/v1/auth/register", "", map[string]any{
			"email": email, "password": "correct horse battery", "name": "Bench", "role": role}), &s); err != nil {
			b.Fatal(err)
		}
		return s
	}
	employer, candidate := register("bench-employer@example.com", jobboard.RoleEmployer), register("bench-candidate@example.com", jobboard.RoleCandidate)
	var company, job, app struct {
		ID int64 `json:"id"`
	}
	mustJSON := func(data []byte, v any) {
		if err := json.Unmarshal(data, v); err != nil {
			b.Fatal(err)
		}
	}
	mustJSON(post("/v1/companies", employer.Token, map[string]any{"name": "Bench"}), &company)
	mustJSON(post(fmt.Sprintf("/v1/companies/%d/jobs", company.ID), employer.Token, jobInput("Bench Engineer")), &job)
	mustJSON(post(fmt.Sprintf("/v1/jobs/%d/applications", job.ID), candidate.Token, map[string]any{"cover_letter": "Hi"}), &app)
	if _, err := db.Pool.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		b.Fatal(err)
	}

	anonymous := func() *http.Request {
		return httptest.NewRequest(http.MethodGet, fmt.Sprintf("/v1/jobs/%d", job.ID), nil)
	}
	for _, read := range []struct{ name, path, token string }{
		{"application", fmt.Sprintf("/v1/applications/%d", app.ID), candidate.Token},
		{"job applications", fmt.Sprintf("/v1/jobs/%d/applications", job.ID), employer.Token},
		{"me", "/v1/me", candidate.Token},
	} {
		b.Run(read.name, func(b *testing.B) {
			signedIn := func() *http.Request {
				req := httptest.NewRequest(http.MethodGet, read.path, nil)
				req.Header.Set("Authorization", "Bearer "+read.token)
				return req
			}
			timedPair(b, h, "anonymous", anonymous, signedIn, http.StatusOK)
		})
	}
}
