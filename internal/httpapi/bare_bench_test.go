package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// recordedQuery is a statement the store ran, with its arguments.
type recordedQuery struct {
	sql  string
	args []any
}

// queryRecorder is a pgx tracer that keeps the statements run while it is
// on.
type queryRecorder struct {
	mu      sync.Mutex
	on      bool
	queries []recordedQuery
}

func (q *queryRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.on {
		q.queries = append(q.queries, recordedQuery{data.SQL, slices.Clone(data.Args)})
	}
	return ctx
}

func (q *queryRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// record returns the statements that fn makes the store run.
func (q *queryRecorder) record(fn func()) []recordedQuery {
	q.mu.Lock()
	q.on, q.queries = true, nil
	q.mu.Unlock()
	fn()
	q.mu.Lock()
	defer q.mu.Unlock()
	q.on = false
	return q.queries
}

// bareJob is the JSON of a job, as the API writes it.
type bareJob struct {
	ID             int64       `json:"id"`
	CompanyID      int64       `json:"company_id"`
	Title          string      `json:"title"`
	Description    string      `json:"description"`
	Location       string      `json:"location"`
	Remote         bool        `json:"remote"`
	EmploymentType string      `json:"employment_type"`
	Salary         *bareSalary `json:"salary"`
	Status         string      `json:"status"`
	CreatedAt      time.Time   `json:"created_at"`
	UpdatedAt      time.Time   `json:"updated_at"`
}

type bareSalary struct {
	Min      int64  `json:"min"`
	Max      int64  `json:"max"`
	Currency string `json:"currency"`
}

// bareHandler is the least a server can do for one search: run the
// statement the store runs for it (sql with args, recorded from the API),
// turn the rows into the API's JSON page, and write it. limit is the page
// size (the statement asks for one row more).
func bareHandler(pool *pgxpool.Pool, st recordedQuery, limit int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rows, err := pool.Query(r.Context(), st.sql, append([]any{pgx.QueryExecModeExec}, st.args...)...)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		items := []bareJob{}
		var (
			id, companyID, lo, hi                              *int64
			title, description, location, et, status, currency *string
			remote                                             *bool
			createdAt, updatedAt                               *time.Time
			other                                              any
		)
		columns := map[string]any{"id": &id, "company_id": &companyID, "title": &title, "description": &description,
			"location": &location, "remote": &remote, "employment_type": &et, "salary_min": &lo, "salary_max": &hi,
			"salary_currency": &currency, "status": &status, "created_at": &createdAt, "updated_at": &updatedAt}
		var dest []any
		for _, fd := range rows.FieldDescriptions() {
			if d, ok := columns[fd.Name]; ok {
				dest = append(dest, d)
			} else {
				dest = append(dest, &other)
			}
		}
		for rows.Next() {
			if err := rows.Scan(dest...); err != nil {
				break
			}
			if id == nil { // the row of NULLs of an empty page
				continue
			}
			j := bareJob{ID: *id, CompanyID: *companyID, Title: *title, Description: *description, Location: *location,
				Remote: *remote, EmploymentType: *et, Status: *status, CreatedAt: *createdAt, UpdatedAt: *updatedAt}
			if lo != nil {
				j.Salary = &bareSalary{Min: *lo, Max: *hi, Currency: *currency}
			}
			items = append(items, j)
		}
		if err := rows.Err(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		page := struct {
			Items      []bareJob `json:"items"`
			NextCursor *string   `json:"next_cursor"`
		}{Items: items}
		if len(items) > limit {
			page.Items = items[:limit]
			c := base64.RawURLEncoding.EncodeToString([]byte("v1:" + strconv.FormatInt(items[limit-1].ID, 10)))
			page.NextCursor = &c
		}
		var buf bytes.Buffer
		if err := json.NewEncoder(&buf).Encode(page); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		_, _ = w.Write(buf.Bytes())
	}
}

// load runs clients concurrent clients against url for d and returns the
// requests per second and every request's latency.
func load(b *testing.B, client *http.Client, url string, clients int, d time.Duration) (float64, []time.Duration) {
	b.Helper()
	var (
		mu        sync.Mutex
		latencies []time.Duration
		wg        sync.WaitGroup
		failed    error
	)
	start := time.Now()
	deadline := start.Add(d)
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) {
				t0 := time.Now()
				resp, err := client.Get(url)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("GET %s: %s", url, resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	if failed != nil {
		b.Fatal(failed)
	}
	return float64(len(latencies)) / time.Since(start).Seconds(), latencies
}

func percentile(ds []time.Duration, p float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[int(p*float64(len(s)-1))].Microseconds()) / 1000
}

// BenchmarkInProcessVsBare: the API (httpapi.NewServer over the store,
// behind an httptest.Server, over loopback HTTP) against a bare net/http
// handler with its own pgx pool that runs the very statement the store
// runs for the same search (recorded from the API) and writes the same
// JSON page, at 100,000 jobs, with 8 concurrent clients. The two servers
// take turns (six rounds each) so that both see the same load on a shared
// machine. "x-bare" is the API's throughput as a ratio of the bare
// handler's; p50 and p99 latencies of both are reported in ms.
func BenchmarkInProcessVsBare(b *testing.B) {
	ctx := context.Background()
	recorder := &queryRecorder{}
	db := pgtest.Open(b, pgtest.NewURL(b), func(c *pgxpool.Config) { c.ConnConfig.Tracer = recorder })
	employer, err := db.CreateUser(ctx, jobboard.Registration{Email: "bench@example.com", Name: "Bench", Role: jobboard.RoleEmployer}, "x")
	if err != nil {
		b.Fatal(err)
	}
	c, err := db.CreateCompany(ctx, jobboard.Actor{UserID: employer.ID, Role: employer.Role}, jobboard.NewCompany{Name: "Bench"})
	if err != nil {
		b.Fatal(err)
	}
	if err := db.SeedJobs(ctx, c.ID, 100_000); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
		b.Fatal(err)
	}
	api := httptest.NewServer(httpapi.NewServer(httpapi.Config{
		Users: db, Companies: db, Jobs: db, Applications: db, Pinger: db, Idempotency: db,
		Logger:   slog.New(slog.DiscardHandler),
		TokenKey: testKey, Password: cheapPasswords,
	}))
	b.Cleanup(api.Close)
	barePool, err := pgxpool.New(ctx, db.URL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(barePool.Close)
	const clients = 8
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}

	for _, route := range []struct{ name, path string }{
		{"plain first page", "/v1/jobs"},
		{"common word", "/v1/jobs?q=engineer"},
	} {
		b.Run(route.name, func(b *testing.B) {
			var apiBody []byte
			queries := recorder.record(func() {
				resp, err := client.Get(api.URL + route.path)
				if err != nil {
					b.Fatal(err)
				}
				apiBody, _ = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			})
			// The statement that reads jobs is the search; any other (the
			// listing version) is the API's own extra.
			var search *recordedQuery
			for i, q := range queries {
				if strings.Contains(q.sql, "FROM jobs") {
					search = &queries[i]
				}
			}
			if search == nil {
				b.Fatalf("no search statement among %d recorded", len(queries))
			}
			bare := httptest.NewServer(bareHandler(barePool, *search, jobboard.DefaultPageSize))
			defer bare.Close()
			resp, err := client.Get(bare.URL + route.path)
			if err != nil {
				b.Fatal(err)
			}
			bareBody, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if !bytes.Equal(apiBody, bareBody) {
				b.Fatalf("the bare handler's page differs from the API's:\nAPI:  %.300s\nbare: %.300s", apiBody, bareBody)
			}
			b.Logf("%s: the API runs %d statements, the bare handler 1", route.path, len(queries))

			var apiRPS, bareRPS float64
			var apiLat, bareLat []time.Duration
			for range b.N {
				for range 6 {
					rps, lat := load(b, client, api.URL+route.path, clients, 500*time.Millisecond)
					apiRPS += rps
					apiLat = append(apiLat, lat...)
					rps, lat = load(b, client, bare.URL+route.path, clients, 500*time.Millisecond)
					bareRPS += rps
					bareLat = append(bareLat, lat...)
				}
			}
			b.ReportMetric(apiRPS/bareRPS, "x-bare")
			b.ReportMetric(apiRPS/float64(6*b.N), "api-req/s")
			b.ReportMetric(bareRPS/float64(6*b.N), "bare-req/s")
			b.ReportMetric(percentile(apiLat, 0.5), "api-p50-ms")
			b.ReportMetric(percentile(apiLat, 0.99), "api-p99-ms")
			b.ReportMetric(percentile(bareLat, 0.5), "bare-p50-ms")
			b.ReportMetric(percentile(bareLat, 0.99), "bare-p99-ms")
		})
	}
}
