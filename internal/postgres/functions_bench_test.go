package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// BenchmarkProxySafeFunctions: what the hot reads cost in exec (the mode
// behind RDS Proxy, no named prepared statement) against pgx's default
// mode (prepared), sent as statements and as the functions of migration
// 014, beside the floor of the mode: SELECT 1, which has nothing to plan,
// in exec against prepared. Each way runs on its own connection (one per
// mode and way, so that each keeps its own plans), alternately, each
// leading in turn, over 100,000 seeded jobs: an anonymous job read and the
// first page of a search by a common word (header and page). Each way's
// database CPU time is its backend's (from /proc, so only when the server
// runs on this machine; 10 ms ticks: run thousands of rounds). The "-x-"
// metrics are ratios against the same work prepared: "-db-" of the
// database CPU time, the others of the time a call takes at the client.
func BenchmarkProxySafeFunctions(b *testing.B) {
	ctx := context.Background()
	url := pgtest.NewURL(b)
	db := pgtest.Open(b, url)
	company := mustCompany(b, db, mustUser(b, db, jobboard.RoleEmployer))
	if err := db.SeedJobs(ctx, company.ID, 100_000); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Pool.Exec(ctx, "VACUUM ANALYZE jobs"); err != nil {
		b.Fatal(err)
	}
	var jobID int64
	if err := db.Pool.QueryRow(ctx, "SELECT max(id) FROM jobs WHERE status = 'open'").Scan(&jobID); err != nil {
		b.Fatal(err)
	}
	f := jobboard.JobFilter{Query: "engineer"}
	header, headerArgs, page, pageArgs := db.SearchStatements(f)
	function, functionArgs := db.SearchFunctionCall(f)
	var jobStatement, jobFunction string
	for _, p := range postgres.FunctionPairs {
		if p.Name == "job read, anonymous" {
			jobStatement, jobFunction = p.Statement, p.Function
		}
	}
	var backends []int // each way's backend, in the order of ways
	connect := func(mode string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, url+"&default_query_exec_mode="+mode)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close(ctx) })
		backends = append(backends, int(conn.PgConn().PID()))
		return conn
	}
	drain := func(conn *pgx.Conn, sql string, args ...any) func() {
		return func() {
			rows, _ := conn.Query(ctx, sql, args...)
			n := 0
			for rows.Next() {
				n++
			}
			if rows.Err() != nil || n == 0 {
				b.Fatalf("%s: %d rows, %v", sql, n, rows.Err())
			}
		}
	}
	batch := func(conn *pgx.Conn) func() {
		return func() {
			bt := &pgx.Batch{}
			bt.Queue(header, headerArgs...)
			bt.Queue(page, pageArgs...)
			if err := conn.SendBatch(ctx, bt).Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	ways := []timedWay{
		{"select1-prepared", drain(connect("cache_statement"), "SELECT 1")},
		{"select1-exec", drain(connect("exec"), "SELECT 1")},
		{"job-prepared", drain(connect("cache_statement"), jobStatement, jobID)},
		{"job-exec", drain(connect("exec"), jobStatement, jobID)},
		{"job-exec-function", drain(connect("exec"), jobFunction, jobID)},
		{"search-prepared", batch(connect("cache_statement"))},
		{"search-exec", batch(connect("exec"))},
		{"search-exec-function", drain(connect("exec"), function, functionArgs...)},
	}
	for range 20 { // prepared, plans cached and warm before timing
		for _, way := range ways {
			way.run()
		}
	}
	cpu := make([]time.Duration, len(ways))
	for i := range ways {
		cpu[i] = -processCPU(backends[i])
	}
	times := alternately(b, ways)
	for i, way := range ways {
		cpu[i] += processCPU(backends[i])
		b.ReportMetric(float64(times[i].Microseconds())/float64(b.N), way.name+"-µs")
		b.ReportMetric(float64(cpu[i].Microseconds())/float64(b.N), way.name+"-db-µs")
	}
	for _, r := range []struct {
		name    string
		i, base int
	}{{"select1-exec", 1, 0}, {"job-exec", 3, 2}, {"job-function", 4, 2}, {"search-exec", 6, 5}, {"search-function", 7, 5}} {
		b.ReportMetric(float64(times[r.i])/float64(times[r.base]), r.name+"-x-prepared")
		if cpu[r.base] > 0 {
			b.ReportMetric(float64(cpu[r.i])/float64(cpu[r.base]), r.name+"-db-x-prepared")
		}
	}
}

// processCPU is the user and system time of process pid (0 when it cannot
// be read), from /proc/pid/stat.
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
