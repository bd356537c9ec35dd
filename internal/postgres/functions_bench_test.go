package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// BenchmarkProxySafeFunctions: what the hot reads cost in exec (the mode
// behind RDS Proxy, no named prepared statement) against pgx's default
// mode (prepared), sent as statements and as the functions of migration
// 012, beside the floor of the mode: SELECT 1, which has nothing to plan,
// in exec against prepared. Each way runs on its own connection (one per
// mode and way, so that each keeps its own plans), alternately, each
// leading in turn, over 100,000 seeded jobs: an anonymous job read and the
// first page of a search by a common word (header and page). The "-x-"
// metrics are ratios against the same work prepared.
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
	connect := func(mode string) *pgx.Conn {
		conn, err := pgx.Connect(ctx, url+"&default_query_exec_mode="+mode)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close(ctx) })
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
	times := alternately(b, ways)
	for i, way := range ways {
		b.ReportMetric(float64(times[i].Microseconds())/float64(b.N), way.name+"-µs")
	}
	ratio := func(i, base int) float64 { return float64(times[i]) / float64(times[base]) }
	b.ReportMetric(ratio(1, 0), "select1-exec-x-prepared")
	b.ReportMetric(ratio(3, 2), "job-exec-x-prepared")
	b.ReportMetric(ratio(4, 2), "job-function-x-prepared")
	b.ReportMetric(ratio(6, 5), "search-exec-x-prepared")
	b.ReportMetric(ratio(7, 5), "search-function-x-prepared")
}
