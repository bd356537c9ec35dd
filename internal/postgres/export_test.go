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
	return searchJobs(ctx, conn, s.functions, actor, f, stretch)
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

// FunctionPair is a statement and the call of the function of migration
// 012 that stands for it, which take the same arguments.
type FunctionPair struct{ Name, Statement, Function string }

// FunctionPairs are the statements that DB.functions replaces by a call,
// but those of the search (see SearchJobsBothWays).
var FunctionPairs = []FunctionPair{
	{"job read, anonymous", openJobSQL, jobOpenFunctionSQL},
	{"job read, a member", jobSQL, jobForMemberFunctionSQL},
	{"job update", updateJobSQL, updateJobFunctionSQL},
}

// SearchJobsBothWays runs SearchJobs for f through its statements and
// through the functions of migration 014, in the pool's mode, and returns
// both answers and what each sent.
func (db *DB) SearchJobsBothWays(ctx context.Context, actor *jobboard.Actor, f jobboard.JobFilter) (statements, functions SearchAnswer) {
	for _, way := range []struct {
		functions bool
		answer    *SearchAnswer
	}{{false, &statements}, {true, &functions}} {
		conn := tracingConn{db.pool, func(sql string, _ []any, _ bool) { way.answer.Sent = append(way.answer.Sent, sql) }}
		way.answer.Listing, way.answer.Err = searchJobs(ctx, conn, way.functions, actor, f, chooseStretch(f, pageLimit(f.Limit)+1))
	}
	return statements, functions
}

// SearchAnswer is what SearchJobs answered and the statements it sent
// that read jobs.
type SearchAnswer struct {
	Listing jobboard.JobListing
	Err     error
	Sent    []string
}

// SearchFunctionCall returns the call of migration 014's function that
// SearchJobs sends for f without an actor when its pool sends no named
// prepared statement, and its arguments ("" when f's search has none).
func (db *DB) SearchFunctionCall(f jobboard.JobFilter) (string, []any) {
	rows := pageLimit(f.Limit) + 1
	s := planSearch(nil, f, rows, chooseStretch(f, rows))
	return s.function, s.functionArgs
}
