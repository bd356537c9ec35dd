package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/dev/apiclient"
	"github.com/jobboard/jobboard/internal/dev/localhost"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// The knobs of BenchmarkHTTPVsBare (go test -bench HTTPVsBare -args ...).
var (
	benchModes = flag.String("http.modes", "exec",
		"comma-separated query exec modes (DATABASE_QUERY_EXEC_MODE) measured besides the default")
	benchRounds  = flag.Int("http.rounds", 5, "rounds of each peer per endpoint")
	benchRound   = flag.Duration("http.round", time.Second, "length of a round of one peer")
	benchOnly    = flag.String("http.endpoints", "", "comma-separated endpoints to measure (search, job, update); empty: all")
	benchProfile = flag.String("http.cpuprofile", "", "folder where each peer writes a CPU profile of its whole run (api.pprof, bare.pprof, api-exec.pprof, ...)")
)

// benchConns is the number of concurrent HTTP connections of the load.
const benchConns = 16

// BenchmarkHTTPVsBare: the API as it serves locally (run, in a process
// of its own, over loopback HTTP, its log written to /dev/null)
// against a bare net/http + pgx handler (barePeer: the simplest correct
// SQL for the same answer, one prepared statement a request, in a process
// of its own too), over one database of 100,000 jobs, with 16 concurrent
// keep-alive connections, for three requests: a search for a common word
// (GET /v1/jobs?q=engineer), an anonymous job read (GET /v1/jobs/{id}) and
// a member's change of a job's title (PATCH /v1/jobs/{id}, each connection
// its own job).
//
// Each peer runs in pgx's default mode and in each mode of -http.modes
// (by default exec, which prepares no named statement, for RDS Proxy),
// the API through DATABASE_QUERY_EXEC_MODE. The peers take turns in short
// rounds (-http.round, -http.rounds of each), each round in another order,
// so that load from elsewhere on the machine falls on all of them. Ratios
// are against the bare peer in the default mode, pooled over the rounds:
// "api-x-bare" is the API's throughput over the bare peer's (the aim is at
// least 0.9), "api-p99-x-bare" its 99th percentile latency over the bare
// peer's (the aim is at most 1.5), "api-cpu-x-bare" the CPU time a request
// costs it (its process and its PostgreSQL backends) over the bare peer's;
// "bare-exec-x-bare" is the floor that the mode alone sets. CPU time is the
// steadier figure on a shared machine: throughput and latency move with
// what else runs, the CPU a request takes much less. The log gives
// requests per second, percentiles, the range of the per-round ratios, CPU
// time a request, and the machine's load average.
func BenchmarkHTTPVsBare(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fx := newBenchFixture(ctx, b, 100_000)

	var modes []string
	if *benchModes != "" {
		modes = strings.Split(*benchModes, ",")
	}
	peers := []*benchPeer{fx.startPeer(ctx, b, "bare", "", "bare"), fx.api}
	for _, m := range modes {
		peers = append(peers, fx.startPeer(ctx, b, "bare", m, "bare-"+m), fx.startPeer(ctx, b, "api", m, "api-"+m))
	}
	cpu := newCPUMeter(ctx, b, fx.url)
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
				p.run(b, ep, *benchRound/2, cpu) // warm: connections, statement and plan caches
				p.reset()
			}
			for range b.N {
				for round := range *benchRounds {
					for i := range peers {
						p := peers[(round+i)%len(peers)]
						p.run(b, ep, *benchRound, cpu)
					}
				}
			}
			report(b, ep, peers, cpu.ok)
		})
	}
}

// benchFixture is the database of the benchmark and what the requests
// name in it.
type benchFixture struct {
	url     string
	api     *benchPeer // in pgx's default mode
	key     []byte     // JWT_SECRET
	token   string     // the employer's
	readIDs []int64
	// patchIDs are the jobs that each connection changes.
	patchIDs []int64
}

func newBenchFixture(ctx context.Context, b *testing.B, jobs int) *benchFixture {
	b.Helper()
	fx := &benchFixture{url: pgtest.NewURL(b), key: []byte("bench-bench-bench-bench-bench-bench")}
	db := pgtest.Open(b, fx.url)
	fx.api = fx.startPeer(ctx, b, "api", "", "api")
	api := apiclient.Client{BaseURL: fx.api.url}
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

// The peers run as child processes of the benchmark (this test binary,
// started again with benchPeerEnv set; see TestMain), so that each one's
// CPU time can be told apart: its process's, and its PostgreSQL backends',
// found by the application_name that its database URL gives them.
const benchPeerEnv = "JOBBOARD_BENCH_PEER"

// benchProfileEnv names the file where a peer writes its CPU profile.
const benchProfileEnv = "JOBBOARD_BENCH_CPUPROFILE"

// TestMain serves a peer of BenchmarkHTTPVsBare when benchPeerEnv says so
// (api: the API as functions/api serves it locally, run with this
// process's environment and standard output; bare: barePeer on PORT over
// BARE_DATABASE_URL), until SIGTERM; otherwise it runs the tests.
func TestMain(m *testing.M) {
	peer := os.Getenv(benchPeerEnv)
	if peer == "" {
		os.Exit(m.Run())
	}
	if err := servePeer(peer); err != nil {
		fmt.Fprintln(os.Stderr, peer+":", err)
		os.Exit(1)
	}
}

// servePeer serves the peer of BenchmarkHTTPVsBare that TestMain names,
// until SIGTERM.
func servePeer(peer string) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if path := os.Getenv(benchProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	switch peer {
	case "api":
		return run(ctx, []string{"api"}, os.Getenv, os.Stdout)
	case "bare":
		return serveBare(ctx, os.Getenv("BARE_DATABASE_URL"), []byte(os.Getenv("JWT_SECRET")), os.Getenv("PORT"))
	}
	return fmt.Errorf("%s=%q: want api or bare", benchPeerEnv, peer)
}

// startPeer starts a peer (api or bare) whose pool sends statements in
// mode ("": pgx's default), stopped when b ends, and returns its address
// and process id. Its database sessions are named name.
func (fx *benchFixture) startPeer(ctx context.Context, b *testing.B, kind, mode, name string) *benchPeer {
	b.Helper()
	ports, err := localhost.FreePorts(ctx, 1)
	if err != nil {
		b.Fatal(err)
	}
	port := ports[0]
	url := fx.url + "&application_name=" + name
	environment := []string{benchPeerEnv + "=" + kind, "PORT=" + strconv.Itoa(port), "JWT_SECRET=" + string(fx.key)}
	if kind == "api" {
		// The API takes its mode as on AWS.
		environment = append(environment, "DATABASE_URL="+url, "DATABASE_QUERY_EXEC_MODE="+mode)
	} else {
		if mode != "" {
			url += "&default_query_exec_mode=" + mode
		}
		environment = append(environment, "BARE_DATABASE_URL="+url)
	}
	if *benchProfile != "" {
		environment = append(environment, benchProfileEnv+"="+filepath.Join(*benchProfile, name+".pprof"))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), environment...) // stdout and stderr: /dev/null
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := (&apiclient.Client{BaseURL: base}).WaitReady(ctx); err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return &benchPeer{name: name, url: base, pid: cmd.Process.Pid}
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
	pid       int            // of its process; its database sessions are named name
	clients   []*http.Client // one keep-alive connection each
	requests  int
	elapsed   time.Duration
	cpu       cpuTime // its process's and its backends', over the rounds
	latencies []time.Duration
	rounds    []float64 // requests per second of each round
}

func (p *benchPeer) reset() {
	p.requests, p.elapsed, p.cpu, p.latencies, p.rounds = 0, 0, cpuTime{}, nil, nil
}

// run loads p with ep's requests over benchConns connections for d, and
// adds the CPU time that p spent meanwhile.
func (p *benchPeer) run(b *testing.B, ep benchEndpoint, d time.Duration, cpu *cpuMeter) {
	b.Helper()
	cpuBefore := cpu.of(p)
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
	after := cpu.of(p)
	p.cpu.process += after.process - cpuBefore.process
	p.cpu.database += after.database - cpuBefore.database
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
// first) as metrics and in the log: throughput, 99th percentile latency,
// and CPU time a request (when the server is on this machine).
func report(b *testing.B, ep benchEndpoint, peers []*benchPeer, withCPU bool) {
	base := peers[0]
	var log strings.Builder
	fmt.Fprintf(&log, "%s, %d connections, %d rounds of %s:\n", ep.label, benchConns, len(base.rounds), *benchRound)
	for _, p := range peers {
		lo, hi := roundRatios(p, base)
		fmt.Fprintf(&log, "  %-16s %6.0f req/s  p50 %6.2f ms  p99 %6.2f ms  ×bare %.2f (rounds %.2f–%.2f)  p99 ×bare %.2f",
			p.name, p.throughput(), p.percentile(0.5), p.percentile(0.99),
			p.throughput()/base.throughput(), lo, hi, p.percentile(0.99)/base.percentile(0.99))
		if withCPU {
			fmt.Fprintf(&log, "  CPU %4.0f µs/req (server %3.0f, database %3.0f) ×bare %.2f", p.cpuPerRequest(),
				p.perRequest(p.cpu.process), p.perRequest(p.cpu.database), p.cpuPerRequest()/base.cpuPerRequest())
		}
		log.WriteString("\n")
		if p == base {
			b.ReportMetric(p.throughput(), "bare-req/s")
			continue
		}
		b.ReportMetric(p.throughput()/base.throughput(), p.name+"-x-bare")
		b.ReportMetric(p.percentile(0.99)/base.percentile(0.99), p.name+"-p99-x-bare")
		if withCPU {
			b.ReportMetric(p.cpuPerRequest()/base.cpuPerRequest(), p.name+"-cpu-x-bare")
		}
	}
	b.Log(log.String())
}

// cpuPerRequest is the CPU time that a request cost p, in microseconds.
func (p *benchPeer) cpuPerRequest() float64 {
	return p.perRequest(p.cpu.process + p.cpu.database)
}

// perRequest is d a request, in microseconds.
func (p *benchPeer) perRequest(d time.Duration) float64 {
	return float64(d.Microseconds()) / float64(p.requests)
}

// cpuTime is CPU time spent by a peer's process and by its database
// backends.
type cpuTime struct{ process, database time.Duration }

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

// cpuMeter reads the CPU time of a peer: its process's and its PostgreSQL
// backends', from /proc (clock ticks of 10 ms), which works only when the
// server runs on this machine (ok tells; otherwise every reading is 0).
type cpuMeter struct {
	ctx   context.Context
	admin *pgxpool.Pool
	ok    bool
}

func newCPUMeter(ctx context.Context, b *testing.B, url string) *cpuMeter {
	m := &cpuMeter{ctx: ctx, admin: pgtest.Pool(b, url)}
	var pid int
	if err := m.admin.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		b.Fatal(err)
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	m.ok = err == nil && strings.HasPrefix(string(comm), "postgres")
	if !m.ok {
		b.Log("the database server is not on this machine: no CPU times")
	}
	return m
}

// of returns p's CPU time so far: its process's and that of the backends
// of its sessions now open.
func (m *cpuMeter) of(p *benchPeer) cpuTime {
	if !m.ok {
		return cpuTime{}
	}
	rows, _ := m.admin.Query(m.ctx, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", p.name)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return cpuTime{}
	}
	t := cpuTime{process: processCPU(p.pid)}
	for _, pid := range pids {
		t.database += processCPU(pid)
	}
	return t
}

// processCPU is the user and system time of process pid (0 when it is
// gone), from /proc/pid/stat.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...: utime and stime are the 14th and 15th
	// fields; comm may hold spaces, so count from the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
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
