package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// simplestSearchSQL is the simplest correct statement for the first page
// of a search by words (the bare handler's of BenchmarkHTTPVsBare in
// functions/api): the planner's own plan, unbounded for words it cannot
// judge (a word no job has walks every open job).
const simplestSearchSQL = `SELECT id, company_id, title, description, location, remote, employment_type,
	salary_min, salary_max, salary_currency, status, created_at, updated_at FROM jobs
WHERE status = 'open' AND search @@ websearch_to_tsquery('english', $1)
ORDER BY id DESC LIMIT $2`

// BenchmarkSearchStatementsByMode: what a search's first page costs at the
// database, in each statement mode, with the statements the search's own
// requirements need against the simplest correct one. The search sends two
// statements in one round trip: the header (the listing version, which the
// page's entity tag is made of, and whether the words can be searched at
// all, so that a query of only negated words is refused rather than checked
// against every open job) and the page, which walks a bounded stretch of
// the newest jobs before it would ask the text index (the worst shapes'
// bound, see BenchmarkSearchWorstShapes in internal/httpapi). The simplest
// statement has neither. Timed alternately on one connection per mode, each
// leading in turn, over 100,000 seeded jobs; "bounded-x-simplest" is the
// ratio in that mode: the floor under the API's search in it, whatever its
// Go code does.
func BenchmarkSearchStatementsByMode(b *testing.B) {
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
	f := jobboard.JobFilter{Query: "engineer", Limit: jobboard.DefaultPageSize}
	header, headerArgs, page, pageArgs := db.SearchStatements(f)
	rows := jobboard.DefaultPageSize + 1

	for _, mode := range []string{"cache_statement", "exec"} {
		b.Run(mode, func(b *testing.B) {
			conn, err := pgx.Connect(ctx, url+"&default_query_exec_mode="+mode)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close(ctx)
			count := func(r pgx.Rows) {
				n := 0
				for r.Next() {
					n++
				}
				if r.Err() != nil || n != rows {
					b.Fatalf("%d rows, want %d: %v", n, rows, r.Err())
				}
			}
			ways := []timedWay{
				{"simplest", func() {
					r, _ := conn.Query(ctx, simplestSearchSQL, f.Query, rows)
					count(r)
				}},
				{"bounded", func() {
					batch := &pgx.Batch{}
					batch.Queue(header, headerArgs...).QueryRow(func(row pgx.Row) error {
						var version int64
						var searchable bool
						return row.Scan(&version, &searchable)
					})
					batch.Queue(page, pageArgs...).Query(func(r pgx.Rows) error {
						count(r)
						return nil
					})
					if err := conn.SendBatch(ctx, batch).Close(); err != nil {
						b.Fatal(err)
					}
				}},
			}
			for range 20 { // prepared (cache_statement) and warm before timing
				for _, way := range ways {
					way.run()
				}
			}
			times := alternately(b, ways)
			for i, way := range ways {
				b.ReportMetric(float64(times[i].Microseconds())/float64(b.N), way.name+"-µs")
			}
			b.ReportMetric(float64(times[1])/float64(times[0]), "bounded-x-simplest")
		})
	}
}
