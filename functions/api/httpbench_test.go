package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/apiclient"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// The knobs of BenchmarkHTTPVsBare (go test -bench HTTPVsBare -args ...).
var (
	benchModes = flag.String("http.modes", "exec",
		"comma-separated query exec modes (DATABASE_QUERY_EXEC_MODE) measured besides the default")
	benchRounds = flag.Int("http.rounds", 5, "rounds of each peer per endpoint")
	benchRound  = flag.Duration("http.round", time.Second, "length of a round of one peer")
	benchOnly   = flag.String("http.endpoints", "", "comma-separated endpoints to measure (search, job, update); empty: all")
)

// benchConns is the number of concurrent HTTP connections of the load.
const benchConns = 16

// BenchmarkHTTPVsBare: the API as it serves locally (run, over loopback
// HTTP, its access log written to /dev/null) against a bare net/http + pgx
// handler (barePeer: the simplest correct SQL for the same answer, one
// prepared statement a request), over one database of 100,000 jobs, with
// 16 concurrent keep-alive connections, for three requests: a search for a
// common word (GET /v1/jobs?q=engineer), an anonymous job read (GET
// /v1/jobs/{id}) and a member's change of a job's title (PATCH
// /v1/jobs/{id}, each connection its own job).
//
// Each peer runs in pgx's default mode and in each mode of -http.modes
// (by default exec, which prepares no named statement, for RDS Proxy),
// the API through DATABASE_QUERY_EXEC_MODE. The peers take turns in short
// rounds (-http.round, -http.rounds of each), each round in another order,
// so that load from elsewhere on the machine falls on all of them. Ratios
// are against the bare peer in the default mode, pooled over the rounds:
// "api-x-bare" is the API's throughput over the bare peer's (the aim is at
// least 0.9), "api-p99-x-bare" its 99th percentile latency over the bare
// peer's (the aim is at most 1.5); "bare-exec-x-bare" is the floor that
// the mode alone sets. The log gives requests per second, percentiles and
// the range of the per-round ratios, and the machine's load average.
func BenchmarkHTTPVsBare(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fx := newBenchFixture(ctx, b, 100_000)

	var modes []string
	if *benchModes != "" {
		modes = strings.Split(*benchModes, ",")
	}
	peers := []*benchPeer{
		{name: "bare", url: fx.startBare(ctx, b, "")},
		{name: "api", url: fx.startAPI(ctx, b, "")},
	}
	for _, m := range modes {
		peers = append(peers,
			&benchPeer{name: "bare-" + m, url: fx.startBare(ctx, b, m)},
			&benchPeer{name: "api-" + m, url: fx.startAPI(ctx, b, m)})
	}
	b.Logf("load average before: %s", loadAverage())
	b.Cleanup(func() { b.Logf("load average after: %s", loadAverage()) })

	titles := []string{"Backend Engineer (Go)", "Backend Engineer in Go"}
	for _, ep := range []benchEndpoint{
		{name: "search", label: "GET /v1/jobs?q=engineer", request: func(base string, _, _ int) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, base+"/v1/jobs?q=engineer", nil)
			return req
		}},
		{name: "job", label: "GET /v1/jobs/{id}", request: func(base string, conn, seq int) *http.Request {
			id := fx.readIDs[(conn*131+seq)%len(fx.readIDs)]
			req, _ := http.NewRequest(http.MethodGet, base+"/v1/jobs/"+strconv.FormatInt(id, 10), nil)
			return req
		}},
		{name: "update", label: "PATCH /v1/jobs/{id}", request: func(base string, conn, seq int) *http.Request {
			body := `{"title":"` + titles[seq%2] + `"}`
			req, _ := http.NewRequest(http.MethodPatch, base+"/v1/jobs/"+strconv.FormatInt(fx.patchIDs[conn], 10), strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+fx.token)
			req.Header.Set("Content-Type", "application/json")
			return req
		}, volatile: []string{"updated_at"}},
	} {
		if *benchOnly != "" && !slices.Contains(strings.Split(*benchOnly, ","), ep.name) {
			continue
		}
		b.Run(ep.name, func(b *testing.B) {
			sameAnswers(b, ep, peers)
			for _, p := range peers {
				p.reset()
				p.run(b, ep, *benchRound/2) // warm: connections, statement and plan caches
				p.reset()
			}
			for range b.N {
				for round := range *benchRounds {
					for i := range peers {
						p := peers[(round+i)%len(peers)]
						p.run(b, ep, *benchRound)
					}
				}
			}
			report(b, ep, peers)
		})
	}
}

// benchFixture is the database of the benchmark and what the requests
// name in it.
type benchFixture struct {
	url     string
	key     []byte // JWT_SECRET
	token   string // the employer's
	readIDs []int64
	// patchIDs are the jobs that each connection changes.
	patchIDs []int64
}

func newBenchFixture(ctx context.Context, b *testing.B, jobs int) *benchFixture {
	b.Helper()
	fx := &benchFixture{url: pgtest.NewURL(b), key: []byte("bench-bench-bench-bench-bench-bench")}
	db := pgtest.Open(b, fx.url)
	api := apiclient.Client{BaseURL: fx.startAPI(ctx, b, "")}
	var session struct {
		User  jobboard.User `json:"user"`
		Token string        `json:"token"`
	}
	if err := api.Do(ctx, http.MethodPost, "/v1/auth/register", "", map[string]string{
		"email": "bench@example.com", "password": "correct horse battery staple", "name": "Bench", "role": "employer",
	}, http.StatusCreated, &session); err != nil {
		b.Fatal(err)
	}
	pgtest.MarkVerified(b, db.Pool, session.User.ID)
	fx.token = session.Token
	var company jobboard.Company
	if err := api.Do(ctx, http.MethodPost, "/v1/companies", fx.token, map[string]string{"name": "Bench"}, http.StatusCreated, &company); err != nil {
		b.Fatal(err)
	}
	if err := db.SeedJobs(ctx, company.ID, jobs); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
		b.Fatal(err)
	}
	rows, _ := db.Pool.Query(ctx, "SELECT id FROM jobs WHERE status = 'open' ORDER BY id DESC LIMIT $1", 1000+benchConns)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) < 1000+benchConns {
		b.Fatalf("open jobs: %d, %v", len(ids), err)
	}
	fx.patchIDs, fx.readIDs = ids[:benchConns], ids[benchConns:]
	return fx
}

// startAPI serves the API as functions/api does locally, with
// DATABASE_QUERY_EXEC_MODE set to mode, until ctx ends, and returns its
// address.
func (fx *benchFixture) startAPI(ctx context.Context, b *testing.B, mode string) string {
	b.Helper()
	port, err := freePort(ctx)
	if err != nil {
		b.Fatal(err)
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { devNull.Close() })
	environment := map[string]string{"DATABASE_URL": fx.url, "JWT_SECRET": string(fx.key), "PORT": strconv.Itoa(port),
		"DATABASE_QUERY_EXEC_MODE": mode}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"api"}, env(environment), devNull) }()
	b.Cleanup(func() {
		if err := <-done; err != nil {
			b.Errorf("api: %v", err)
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := (&apiclient.Client{BaseURL: base}).WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	return base
}

// startBare serves a bare peer whose pool sends statements in mode ("":
// pgx's default; pgx reads it from the URL) until ctx ends, and returns its
// address.
func (fx *benchFixture) startBare(ctx context.Context, b *testing.B, mode string) string {
	b.Helper()
	url := fx.url
	if mode != "" {
		url += "&default_query_exec_mode=" + mode
	}
	base, err := startBare(ctx, url, fx.key)
	if err != nil {
		b.Fatal(err)
	}
	return base
}

// serveUntil serves srv on a free loopback port until ctx ends, then shuts
// it down and calls closed, and returns its address.
func serveUntil(ctx context.Context, srv *http.Server, closed func()) (string, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
		closed()
	}()
	return "http://" + ln.Addr().String(), nil
}

func freePort(ctx context.Context) (int, error) {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// benchEndpoint is one request of the benchmark: request makes the
// conn-th connection's seq-th request to the peer at base. volatile names
// the members of the answer that differ between two peers' answers.
type benchEndpoint struct {
	name, label string
	request     func(base string, conn, seq int) *http.Request
	volatile    []string
}

// sameAnswers fails b unless every peer gives the same answer (status and
// body, but for ep's volatile members) to ep's first request.
func sameAnswers(b *testing.B, ep benchEndpoint, peers []*benchPeer) {
	b.Helper()
	var want []byte
	for _, p := range peers {
		resp, err := http.DefaultClient.Do(ep.request(p.url, 0, 0))
		if err != nil {
			b.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("%s %s: %d %v %.300s", p.name, ep.label, resp.StatusCode, err, body)
		}
		got := withoutMembers(b, body, ep.volatile)
		if want == nil {
			want = got
		} else if !bytes.Equal(got, want) {
			b.Fatalf("%s answers %s otherwise than %s:\n%.400s\n%.400s", p.name, ep.label, peers[0].name, got, want)
		}
	}
}

// withoutMembers returns the JSON object body without the top-level
// members named.
func withoutMembers(b *testing.B, body []byte, names []string) []byte {
	b.Helper()
	if len(names) == 0 {
		return body
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		b.Fatalf("%v: %s", err, body)
	}
	for _, n := range names {
		delete(m, n)
	}
	out, _ := json.Marshal(m)
	return out
}

// benchPeer is a server under load and what its rounds measured.
type benchPeer struct {
	name, url string
	clients   []*http.Client // one keep-alive connection each
	requests  int
	elapsed   time.Duration
	latencies []time.Duration
	rounds    []float64 // requests per second of each round
}

func (p *benchPeer) reset() {
	p.requests, p.elapsed, p.latencies, p.rounds = 0, 0, nil, nil
}

// run loads p with ep's requests over benchConns connections for d.
func (p *benchPeer) run(b *testing.B, ep benchEndpoint, d time.Duration) {
	b.Helper()
	for len(p.clients) < benchConns {
		p.clients = append(p.clients, &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}})
	}
	var (
		mu     sync.Mutex
		wg     sync.WaitGroup
		failed error
		count  int
	)
	start := time.Now()
	deadline := start.Add(d)
	for conn, client := range p.clients {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 4096)
			for seq := 0; time.Now().Before(deadline); seq++ {
				t0 := time.Now()
				resp, err := client.Do(ep.request(p.url, conn, seq))
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("%s %s: %s", p.name, ep.label, resp.Status)
					}
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			p.latencies = append(p.latencies, lat...)
			count += len(lat)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if failed != nil {
		b.Fatal(failed)
	}
	p.requests += count
	p.elapsed += elapsed
	p.rounds = append(p.rounds, float64(count)/elapsed.Seconds())
}

func (p *benchPeer) throughput() float64 { return float64(p.requests) / p.elapsed.Seconds() }

// percentile returns the q-quantile of p's latencies in milliseconds.
func (p *benchPeer) percentile(q float64) float64 {
	s := slices.Clone(p.latencies)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))].Microseconds()) / 1000
}

// report writes each peer's figures and ratios to the bare peer's (the
// first) as metrics and in the log.
func report(b *testing.B, ep benchEndpoint, peers []*benchPeer) {
	base := peers[0]
	var log strings.Builder
	fmt.Fprintf(&log, "%s, %d connections, %d rounds of %s:\n", ep.label, benchConns, len(base.rounds), *benchRound)
	for _, p := range peers {
		lo, hi := roundRatios(p, base)
		fmt.Fprintf(&log, "  %-22s %7.0f req/s  p50 %6.2f ms  p99 %6.2f ms  ×bare %.2f (rounds %.2f–%.2f)  p99 ×bare %.2f\n",
			p.name, p.throughput(), p.percentile(0.5), p.percentile(0.99),
			p.throughput()/base.throughput(), lo, hi, p.percentile(0.99)/base.percentile(0.99))
		if p == base {
			b.ReportMetric(p.throughput(), "bare-req/s")
			continue
		}
		b.ReportMetric(p.throughput()/base.throughput(), p.name+"-x-bare")
		b.ReportMetric(p.percentile(0.99)/base.percentile(0.99), p.name+"-p99-x-bare")
	}
	b.Log(log.String())
}

// roundRatios returns the least and greatest ratio of p's throughput to
// base's in the same round.
func roundRatios(p, base *benchPeer) (lo, hi float64) {
	lo, hi = 1e9, 0
	for i := range min(len(p.rounds), len(base.rounds)) {
		r := p.rounds[i] / base.rounds[i]
		lo, hi = min(lo, r), max(hi, r)
	}
	return lo, hi
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes, as
// uptime prints it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return err.Error()
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}
