package postgres

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// TunedSearch is a DB's SearchJobs with the stretch of text searches set
// to Walk rows, checked one by one before the indexes are asked (0: the
// default), and Trace told every statement it runs that reads jobs, with
// its arguments and whether the pool's mode may prepare it (nil: none).
type TunedSearch struct {
	*DB
	Walk  int
	Trace func(sql string, args []any, fixedPlan bool)
}

// SearchJobs is DB.SearchJobs, tuned.
func (s TunedSearch) SearchJobs(ctx context.Context, actor *jobboard.Actor, f jobboard.JobFilter) (jobboard.JobListing, error) {
	stretch := s.Walk
	if stretch == 0 {
		stretch = chooseStretch(f, pageLimit(f.Limit)+1)
	}
	var conn searchConn = s.pool
	if s.Trace != nil {
		conn = tracingConn{s.pool, s.Trace}
	}
	return searchJobs(ctx, conn, actor, f, stretch)
}

// tracingConn is a searchConn that tells trace every statement that reads
// jobs before it sends it: all but the header of a batch (searchFixed's
// first statement), and every single query, which runs in the pool's mode
// (fixedPlan) unless its first argument asks for QueryExecModeExec.
type tracingConn struct {
	searchConn
	trace func(sql string, args []any, fixedPlan bool)
}

func (c tracingConn) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if len(args) > 0 && args[0] == pgx.QueryExecModeExec {
		c.trace(sql, args[1:], false)
	} else {
		c.trace(sql, args, true)
	}
	return c.searchConn.Query(ctx, sql, args...)
}

func (c tracingConn) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	for _, q := range b.QueuedQueries[1:] {
		c.trace(q.SQL, q.Arguments, true)
	}
	return c.searchConn.SendBatch(ctx, b)
}

// SearchStretch is the default stretch of a text search for query: perRow
// ids or jobs per row, for rows rows.
var SearchStretch = searchStretch

// SearchIndexFirst tells whether a text search without filters for query
// asks the text index at once, for a page of rows rows.
var SearchIndexFirst = searchIndexFirst

// Stretches per row of the page, without and with filters.
const (
	SearchWindowPerRow = searchWindowPerRow
	SearchWalkPerRow   = searchWalkPerRow
)

// QueryExecModeNames are the names of pgx's query exec modes that
// ParseQueryExecMode knows.
func QueryExecModeNames() []string {
	names := make([]string, len(queryExecModes))
	for i, m := range queryExecModes {
		names[i] = m.name
	}
	return names
}

// Pool is db's own pool, for the tests of what Open configures on it (the
// credentials of each new connection); other tests use pgtest's raw pool.
func Pool(db *DB) *pgxpool.Pool { return db.pool }

// The statements of a keyed write, for the benchmark of its floor.
var CreateJobSQL = createJobSQL

const (
	ClaimIdempotencyKeySQL = claimIdempotencyKeySQL
	StoreAnswerSQL         = storeAnswerSQL
	IdempotencyLockClass   = idempotencyLockClass
)

// The statement of Application, and the same without the check of the
// session, for the benchmark of what the check costs.
var (
	ApplicationSQL               = applicationSQL
	ApplicationSQLWithoutSession = strings.Replace(applicationSQL, "\n  AND "+liveSession("$2", "$3"), "", 1)
	SessionSQL                   = sessionSQL
)

// SearchStatements returns the statements SearchJobs sends first for f
// without an actor, in one round trip: searchHeaderSQL and the page, each
// with its arguments.
func (db *DB) SearchStatements(f jobboard.JobFilter) (header string, headerArgs []any, page string, pageArgs []any) {
	rows := pageLimit(f.Limit) + 1
	s := planSearch(nil, f, rows, chooseStretch(f, rows))
	return s.header, s.headerArgs, s.page, s.args
}
