package postgres

import (
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SetSearchWalk makes db's text searches check only rows ids (no filter)
// or jobs (with filters) one by one before they ask the indexes (0
// restores the default).
func SetSearchWalk(db *DB, rows int) { db.searchWalk = rows }

// TraceSearch makes db's SearchJobs tell fn every statement it runs that
// reads jobs, with its arguments and whether the pool's mode may prepare it
// (nil stops it).
func TraceSearch(db *DB, fn func(sql string, args []any, fixedPlan bool)) { db.searchTrace = fn }

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
