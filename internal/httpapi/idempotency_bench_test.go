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

// benchRegister registers a user of role through h and returns its token.
func benchRegister(b *testing.B, h http.Handler, email, role string) string {
	b.Helper()
	body := post(b, h, "/v1/auth/register", fmt.Sprintf(
		`{"email":%q,"password":"correct horse battery","name":"Keys","role":%q}`, email, role), "", "", http.StatusCreated)
	var s struct{ Token string }
	if err := json.Unmarshal(body, &s); err != nil {
		b.Fatal(err)
	}
	return s.Token
}

// benchID returns the id of a created resource from its answer.
func benchID(b *testing.B, body []byte) int64 {
	b.Helper()
	var v struct{ ID int64 }
	if err := json.Unmarshal(body, &v); err != nil || v.ID == 0 {
		b.Fatalf("no id in %s (%v)", body, err)
	}
	return v.ID
}

// post sends one in-process POST, optionally signed in and keyed, and
// checks its status.
func post(b *testing.B, h http.Handler, path, body, token, key string, status int) []byte {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
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

// keyBenchServer is the API over a fresh database whose connections commit
// as configured: durably (synchronous_commit on, as in production) or not,
// which leaves the key's own work (statements and round trips) without the
// disk's flush time. Passwords are hashed at the cost given.
func keyBenchServer(b *testing.B, durable bool, passwords httpapi.PasswordParams) http.Handler {
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
		Writes: db, Users: db, Companies: db, Jobs: db, Applications: db, Pinger: db,
		Logger: slog.New(slog.DiscardHandler), TokenKey: testKey, Password: passwords,
	})
}

// keyedPost is a POST measured with and without a key: next prepares one
// request (its path and body; untimed) as the signed-in token.
type keyedPost struct {
	name  string
	token string
	next  func(b *testing.B) (path, body string)
}

// keyedPosts are the keyed POSTs of the API: a company (two inserts in one
// transaction), a job (one insert) and an application (one insert, to a job
// made for it). Registration takes no key (docs/api.md).
func keyedPosts(b *testing.B, h http.Handler) []keyedPost {
	employer := benchRegister(b, h, "employer@example.com", "employer")
	candidate := benchRegister(b, h, "candidate@example.com", "candidate")
	companyID := benchID(b, post(b, h, "/v1/companies", `{"name":"Bench"}`, employer, "", http.StatusCreated))
	jobs := fmt.Sprintf("/v1/companies/%d/jobs", companyID)
	const job = `{"title":"Bench job","description":"Benchmarked.","employment_type":"full_time"}`
	fixed := func(path, body string) func(*testing.B) (string, string) {
		return func(*testing.B) (string, string) { return path, body }
	}
	return []keyedPost{
		{"company", employer, fixed("/v1/companies", `{"name":"Bench Keyed"}`)},
		{"job", employer, fixed(jobs, job)},
		{"application", candidate, func(b *testing.B) (string, string) {
			id := benchID(b, post(b, h, jobs, job, employer, "", http.StatusCreated))
			return fmt.Sprintf("/v1/jobs/%d/applications", id), `{"cover_letter":"Benchmarked."}`
		}},
	}
}

// BenchmarkIdempotencyKey: what an Idempotency-Key costs a POST, and what a
// replay costs. For each keyed POST, each iteration sends the POST without
// a key and with a fresh key, alternately, so that both meet the same
// disk; "×nokey" is the keyed POST's time over the unkeyed one's, and
// "added-ms" the difference (which the disk's flush time, the same for
// both, does not move). Then
// "replay" repeats one keyed POST ("×first": its time over the keyed first
// POST's). Both with durable commits (the disk's flush dominates on this
// machine, and varies with its load) and with synchronous_commit off (the
// key's own work stands out).
func BenchmarkIdempotencyKey(b *testing.B) {
	for _, run := range []struct {
		name    string
		durable bool
	}{{"durable", true}, {"async-commit", false}} {
		h := keyBenchServer(b, run.durable, cheapPasswords)
		for _, w := range keyedPosts(b, h) {
			name := run.name + "/" + w.name
			var firstNs float64
			b.Run(name+"/first", func(b *testing.B) {
				var noKey, keyed time.Duration
				for b.Loop() {
					path1, body1 := w.next(b)
					path2, body2 := w.next(b)
					key := rand.Text()
					start := time.Now()
					post(b, h, path1, body1, w.token, "", http.StatusCreated)
					mid := time.Now()
					post(b, h, path2, body2, w.token, key, http.StatusCreated)
					noKey, keyed = noKey+mid.Sub(start), keyed+time.Since(mid)
				}
				firstNs = float64(keyed.Nanoseconds()) / float64(b.N)
				b.ReportMetric(float64(noKey.Nanoseconds())/float64(b.N)/1e6, "nokey-ms/op")
				b.ReportMetric(firstNs/1e6, "keyed-ms/op")
				b.ReportMetric(float64((keyed-noKey).Nanoseconds())/float64(b.N)/1e6, "added-ms/op")
				b.ReportMetric(float64(keyed)/float64(noKey), "×nokey")
			})
			b.Run(name+"/replay", func(b *testing.B) {
				key := rand.Text()
				path, body := w.next(b)
				post(b, h, path, body, w.token, key, http.StatusCreated)
				var replay time.Duration
				for b.Loop() {
					start := time.Now()
					post(b, h, path, body, w.token, key, http.StatusCreated)
					replay += time.Since(start)
				}
				ns := float64(replay.Nanoseconds()) / float64(b.N)
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
