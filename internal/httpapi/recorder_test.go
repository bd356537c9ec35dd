package httpapi_test

import (
	"context"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5"
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
