package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres"
)

// BenchmarkSessionCheck: what the check of a session costs the statement
// of an authenticated read (Application's), three ways timed alternately
// on one connection: the statement without the check (as before password
// resets ended sessions), with the check folded into its WHERE (as now),
// and with the check as a statement of its own before it (the design not
// taken). "x-unchecked" is each one's time as a ratio of the first's.
func BenchmarkSessionCheck(b *testing.B) {
	ctx := context.Background()
	w := newWorld(b)
	app, err := w.db.Apply(ctx, w.candidate, w.job.ID, jobboard.NewApplication{CoverLetter: "Hi"})
	if err != nil {
		b.Fatal(err)
	}
	if strings.Contains(postgres.ApplicationSQLWithoutSession, "password_changed_at") ||
		postgres.ApplicationSQLWithoutSession == postgres.ApplicationSQL {
		b.Fatal("the statement without the check still checks the session")
	}
	conn, err := w.db.Pool.Acquire(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Release()
	read := func(sql string, args ...any) {
		rows, _ := conn.Query(ctx, sql, args...)
		n := 0
		for rows.Next() {
			n++
		}
		if rows.Err() != nil || n != 1 {
			b.Fatalf("%d rows, %v", n, rows.Err())
		}
	}
	changed := w.candidate.PasswordChangedAt
	ways := []timedWay{
		{"unchecked", func() { read(postgres.ApplicationSQLWithoutSession, app.ID, w.candidate.UserID) }},
		{"folded", func() { read(postgres.ApplicationSQL, app.ID, w.candidate.UserID, changed) }},
		{"separate", func() {
			var at *time.Time
			if err := conn.QueryRow(ctx, postgres.SessionSQL, w.candidate.UserID).Scan(&at); err != nil {
				b.Fatal(err)
			}
			read(postgres.ApplicationSQLWithoutSession, app.ID, w.candidate.UserID)
		}},
	}
	for _, way := range ways {
		way.run() // prepared before timing
	}
	times := alternately(b, ways)
	for i, way := range ways {
		b.ReportMetric(float64(times[i].Microseconds())/float64(b.N), way.name+"-µs")
		if i > 0 {
			b.ReportMetric(float64(times[i])/float64(times[0]), way.name+"-x-unchecked")
		}
	}
}
