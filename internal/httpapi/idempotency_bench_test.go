package httpapi_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// benchEmployer registers an employer through h and returns its token and
// a company of it.
func benchEmployer(b *testing.B, h http.Handler) (token string, companyID int64) {
	b.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/auth/register", strings.NewReader(
		`{"email":"keys@example.com","password":"correct horse battery","name":"Keys","role":"employer"}`)))
	var s struct{ Token string }
	if rec.Code != http.StatusCreated || json.Unmarshal(rec.Body.Bytes(), &s) != nil {
		b.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	body := post(b, h, "/v1/companies", `{"name":"Bench"}`, s.Token, "", http.StatusCreated)
	var c struct{ ID int64 }
	if err := json.Unmarshal(body, &c); err != nil {
		b.Fatal(err)
	}
	return s.Token, c.ID
}

// post sends one in-process POST, optionally keyed, and checks its status.
func post(b *testing.B, h http.Handler, path, body, token, key string, status int) []byte {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != status {
		b.Fatalf("POST %s: %d %s", path, rec.Code, rec.Body)
	}
	return rec.Body.Bytes()
}

// keyBenchServer is the API over a fresh database (1,000 seeded jobs) whose
// connections commit as configured: durably (synchronous_commit on, as in
// production) or not, which leaves the key's own work (statements and
// round trips) without the disk's flush time.
func keyBenchServer(b *testing.B, durable bool) http.Handler {
	b.Helper()
	ctx := context.Background()
	db, err := postgres.Open(ctx, pgtest.NewURL(b), func(c *pgxpool.Config) {
		if !durable {
			c.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	return httpapi.NewServer(httpapi.Config{
		Users: db, Companies: db, Jobs: db, Applications: db, Pinger: db, Idempotency: db,
		Logger: slog.New(slog.DiscardHandler), TokenKey: testKey, Password: cheapPasswords,
	})
}

// BenchmarkIdempotencyKey: what an Idempotency-Key costs a write, and what
// a replay costs. For two writes (POST /v1/companies: two inserts in one
// transaction; POST /v1/companies/{id}/jobs: one insert), each iteration
// sends the write without a key and with a fresh key, alternately, so that
// both meet the same disk; "×nokey" is the keyed write's time over the
// unkeyed one's. Then "replay" repeats one keyed write ("×first": its time
// over the keyed first write's). Both with durable commits (the disk's
// flush dominates on this machine, and varies with its load) and with
// synchronous_commit off (the key's own work stands out).
func BenchmarkIdempotencyKey(b *testing.B) {
	for _, durable := range []bool{true, false} {
		commit := "durable"
		if !durable {
			commit = "async-commit"
		}
		h := keyBenchServer(b, durable)
		token, companyID := benchEmployer(b, h)
		for _, w := range []struct{ name, path, body string }{
			{"company", "/v1/companies", `{"name":"Bench Keyed"}`},
			{"job", fmt.Sprintf("/v1/companies/%d/jobs", companyID),
				`{"title":"Bench job","description":"Benchmarked.","employment_type":"full_time"}`},
		} {
			var firstNs float64
			b.Run(commit+"/"+w.name+"/first", func(b *testing.B) {
				var noKey, keyed time.Duration
				for b.Loop() {
					start := time.Now()
					post(b, h, w.path, w.body, token, "", http.StatusCreated)
					mid := time.Now()
					post(b, h, w.path, w.body, token, rand.Text(), http.StatusCreated)
					noKey, keyed = noKey+mid.Sub(start), keyed+time.Since(mid)
				}
				firstNs = float64(keyed.Nanoseconds()) / float64(b.N)
				b.ReportMetric(float64(noKey.Nanoseconds())/float64(b.N)/1e6, "nokey-ms/op")
				b.ReportMetric(firstNs/1e6, "keyed-ms/op")
				b.ReportMetric(float64(keyed)/float64(noKey), "×nokey")
			})
			b.Run(commit+"/"+w.name+"/replay", func(b *testing.B) {
				key := rand.Text()
				post(b, h, w.path, w.body, token, key, http.StatusCreated)
				for b.Loop() {
					post(b, h, w.path, w.body, token, key, http.StatusCreated)
				}
				ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				b.ReportMetric(ns/1e6, "ms/op")
				if firstNs > 0 {
					b.ReportMetric(ns/firstNs, "×first")
				}
			})
		}
	}
}

// BenchmarkSearchNotModified: a search page over 100,000 jobs answered in
// full (200) against the same request revalidated with its ETag (304,
// decided from the listing version without running the search). "×200" is
// the 304's time over the 200's in this run.
func BenchmarkSearchNotModified(b *testing.B) {
	h, _ := benchServer(b, 100_000)
	for _, target := range []string{"/v1/jobs?q=engineer", "/v1/jobs?q=" + url.QueryEscape("rust kubernetes") + "&remote=true"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
		tag := rec.Header().Get("ETag")
		if rec.Code != http.StatusOK || tag == "" {
			b.Fatalf("GET %s: %d, ETag %q", target, rec.Code, tag)
		}
		serve(b, h, target, http.StatusOK)
		name := strings.TrimPrefix(target, "/v1/jobs?")
		var okNs float64
		b.Run(name+"/200", func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, target, nil)
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
			}
			okNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(okNs/1e6, "ms/op")
		})
		b.Run(name+"/304", func(b *testing.B) {
			req := httptest.NewRequest(http.MethodGet, target, nil)
			req.Header.Set("If-None-Match", tag)
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusNotModified {
					b.Fatalf("status %d", rec.Code)
				}
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(ns/1e6, "ms/op")
			if okNs > 0 {
				b.ReportMetric(ns/okNs, "×200")
			}
		})
	}
}
