package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/httpapi/openapitest"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// benchServer is the API over a fresh database with n seeded jobs, served
// in-process, and the id of the seeding company.
func benchServer(b *testing.B, n int) (http.Handler, *pgtest.DB) {
	b.Helper()
	ctx := context.Background()
	db := pgtest.NewDB(b)
	h := httpapi.NewServer(httpapi.Config{
		Writes: db, Users: db, Companies: db, Jobs: db, Applications: db, Pinger: db,
		Logger:   slog.New(slog.DiscardHandler),
		TokenKey: testKey, Password: cheapPasswords,
	})
	employer, err := db.CreateUser(ctx, jobboard.Registration{Email: "bench@example.com", Name: "Bench", Role: jobboard.RoleEmployer}, "x")
	if err != nil {
		b.Fatal(err)
	}
	c, err := db.CreateCompany(ctx, jobboard.Actor{UserID: employer.ID, Role: employer.Role}, jobboard.NewCompany{Name: "Bench"})
	if err != nil {
		b.Fatal(err)
	}
	if err := db.SeedJobs(ctx, c.ID, n); err != nil {
		b.Fatal(err)
	}
	// Fresh statistics and visibility map, as autovacuum would soon provide.
	if _, err := db.Pool.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
		b.Fatal(err)
	}
	return h, db
}

// serve runs one in-process request, checks the answer against the OpenAPI
// document, and returns the body.
func serve(b *testing.B, h http.Handler, target string, status int) []byte {
	b.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != status {
		b.Fatalf("GET %s: %d %s", target, rec.Code, rec.Body)
	}
	if err := openapitest.Check(b, req, rec.Code, rec.Header(), rec.Body.Bytes()); err != nil {
		b.Fatalf("GET %s does not match the OpenAPI document: %v", target, err)
	}
	return rec.Body.Bytes()
}

// BenchmarkSearchJobs: a text search for a common word over 100,000 jobs,
// first page against last page. Keyset pagination should make them cost
// about the same; "last/first" reports the ratio measured in this run.
func BenchmarkSearchJobs(b *testing.B) {
	h, _ := benchServer(b, 100_000)
	const search = "/v1/jobs?q=engineer"

	// Walk every page once to find the cursor of the last one.
	var lastCursor string
	pages, items := 0, 0
	for cursor := ""; ; {
		target := search
		if cursor != "" {
			target += "&cursor=" + url.QueryEscape(cursor)
		}
		var page struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor *string           `json:"next_cursor"`
		}
		if err := json.Unmarshal(serve(b, h, target, http.StatusOK), &page); err != nil {
			b.Fatal(err)
		}
		pages++
		items += len(page.Items)
		if page.NextCursor == nil {
			lastCursor = cursor
			break
		}
		cursor = *page.NextCursor
	}
	b.Logf("%q: %d matching open jobs in %d pages", search, items, pages)

	measure := func(b *testing.B, target string) float64 {
		serve(b, h, target, http.StatusOK)
		req := httptest.NewRequest(http.MethodGet, target, nil)
		for b.Loop() {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("status %d", rec.Code)
			}
		}
		ms := float64(b.Elapsed().Nanoseconds()) / float64(b.N) / 1e6
		b.ReportMetric(ms, "ms/op")
		return ms
	}
	var firstMs float64
	b.Run("first", func(b *testing.B) { firstMs = measure(b, search) })
	b.Run("last", func(b *testing.B) {
		ms := measure(b, search+"&cursor="+url.QueryEscape(lastCursor))
		if firstMs > 0 {
			b.ReportMetric(ms/firstMs, "last/first")
		}
	})
}

// BenchmarkLambdaVsDirect: a prebuilt API Gateway v2 event through the
// Lambda adapter (httpadapter.NewV2(h).ProxyWithContext), against the same
// request served directly (h.ServeHTTP). "×direct" is the adapter path's
// time as a ratio of the direct path measured in this run. Two routes:
// GET /v1/jobs/{id}, where a database round trip dominates both paths, and
// GET /healthz, which touches no database, so the adapter's own cost shows.
func BenchmarkLambdaVsDirect(b *testing.B) {
	h, db := benchServer(b, 1_000)
	ctx := context.Background()
	page, err := db.SearchJobs(ctx, nil, jobboard.JobFilter{Limit: 1})
	if err != nil || len(page.Items) != 1 {
		b.Fatalf("find a job: %v", err)
	}
	adapter := httpadapter.NewV2(h)
	for _, route := range []struct{ name, path string }{
		{"job", fmt.Sprintf("/v1/jobs/%d", page.Items[0].ID)},
		{"healthz", "/healthz"},
	} {
		path := route.path
		serve(b, h, path, http.StatusOK)
		ev := events.APIGatewayV2HTTPRequest{
			Version: "2.0", RouteKey: "$default", RawPath: path,
			Headers: map[string]string{"accept": "application/json", "host": "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com"},
			RequestContext: events.APIGatewayV2HTTPRequestContext{
				RequestID: "bench", DomainName: "a1b2c3d4e5.execute-api.eu-west-1.amazonaws.com", Stage: "$default",
				HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "GET", Path: path, Protocol: "HTTP/1.1", SourceIP: "203.0.113.10"},
			},
		}
		if resp, err := adapter.ProxyWithContext(ctx, ev); err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s through the adapter: %v %d", path, err, resp.StatusCode)
		}

		var directNs float64
		b.Run(route.name+"/direct", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.Header.Set("Accept", "application/json")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
			}
			directNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		})
		b.Run(route.name+"/lambda", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := adapter.ProxyWithContext(ctx, ev)
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d: %v", resp.StatusCode, err)
				}
			}
			if directNs > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/directNs, "×direct")
			}
		})
	}
}

// BenchmarkSearchWorstShapes: the searches of the red-team findings over
// 100,000 jobs, served in-process, each reported as a ratio to a plain
// first page (GET /v1/jobs) timed alternately with it ("x-plain"; ns/op
// is the pair's). Each
// shape must be answered by an index (or refused before the database),
// not by reading every open job: the aim is at most 3× the plain page.
func BenchmarkSearchWorstShapes(b *testing.B) {
	h, _ := benchServer(b, 100_000)
	// q is at most 200 characters: 36 one- and two-character words joined
	// by "or" are the most that fit; 40 are refused before the database.
	orTerms := strings.Fields("b c e f g h j k l n p q r u v w x z 0 1 2 3 4 5 6 7 8 9 bb cc ee ff gg hh jj kk")
	orTerms40 := append(strings.Fields("ll nn pp qq"), orTerms...)
	phrase := strings.Fields("keep production reliable with python notebooks and dashboards while you design products in figma for patients on a busy ward and ship orders from our modern warehouse every single day")
	shapes := []struct {
		name, query string
		status      int
	}{
		{"no-match location", "location=Atlantis", http.StatusOK},
		{"very large salary_min", "salary_min=100000000", http.StatusOK},
		{"negation with a no-match location", "q=" + url.QueryEscape("engineer -python") + "&location=Atlantis", http.StatusOK},
		{"negation with a large salary_min", "q=" + url.QueryEscape("engineer -python") + "&salary_min=100000000", http.StatusOK},
		{"only negations", "q=" + url.QueryEscape("-engineer -python -nurse -designer -analyst -manager"), http.StatusBadRequest},
		{fmt.Sprintf("%d OR terms", len(orTerms)), "q=" + url.QueryEscape(strings.Join(orTerms, " or ")), http.StatusOK},
		{fmt.Sprintf("%d OR terms", len(orTerms40)), "q=" + url.QueryEscape(strings.Join(orTerms40, " or ")), http.StatusBadRequest},
		{fmt.Sprintf("%d-word phrase", len(phrase)), "q=" + url.QueryEscape(`"`+strings.Join(phrase, " ")+`"`), http.StatusOK},
		{"all filters combined", "q=engineer&location=Berlin&remote=true&employment_type=temporary&salary_min=150000", http.StatusOK},
		{"a word no job has", "q=astronaut", http.StatusOK},
		{"a contradiction of common words", "q=" + url.QueryEscape("engineer -engineer"), http.StatusOK},
		{"a phrase of common words in an order no job has", "q=" + url.QueryEscape(`"engineer python backend"`), http.StatusOK},
		{"a common word", "q=engineer", http.StatusOK},
		{"a rare word", "q=rust", http.StatusOK},
	}
	// Each shape is timed alternately with the plain page, request after
	// request, so that both meet the same machine: a baseline timed once,
	// before the shapes, carried whatever the machine was doing then into
	// every ratio (it varied twofold between runs).
	const plain = "/v1/jobs"
	serve(b, h, plain, http.StatusOK)
	for _, s := range shapes {
		b.Run(s.name, func(b *testing.B) {
			target := "/v1/jobs?" + s.query
			serve(b, h, target, s.status)
			var plainT, shapeT time.Duration
			timed := func(total *time.Duration, req *http.Request, status int) {
				start := time.Now()
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				*total += time.Since(start)
				if rec.Code != status {
					b.Fatalf("%s: status %d", req.URL, rec.Code)
				}
			}
			plainReq := httptest.NewRequest(http.MethodGet, plain, nil)
			shapeReq := httptest.NewRequest(http.MethodGet, target, nil)
			for b.Loop() {
				timed(&plainT, plainReq, http.StatusOK)
				timed(&shapeT, shapeReq, s.status)
			}
			b.ReportMetric(float64(shapeT.Microseconds())/float64(b.N)/1000, "shape-ms")
			b.ReportMetric(float64(plainT.Microseconds())/float64(b.N)/1000, "plain-ms")
			b.ReportMetric(float64(shapeT)/float64(plainT), "x-plain")
		})
	}
}
