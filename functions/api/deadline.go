package main

import (
	"context"
	"net/http"
	"time"
)

// answerMargin is the end of the Lambda invocation that the API keeps for
// itself: a request still running this long before the function's timeout
// has its context ended, and the API answers 503 (a problem, with the
// request id) instead of Lambda cutting it off with no answer at all,
// whatever it waited on: the pool, the RDS Proxy's borrow, a statement.
// It covers cancelling the statement in flight, writing the answer and the
// runtime's posting it. template.yaml's ConnectionBorrowTimeout and
// ApiStatementTimeout fit in the function's Timeout less this
// (internal/dev/deploy checks the sum).
const answerMargin = time.Second

// withAnswerMargin gives every request of h a deadline margin before the
// deadline its context already has (the invocation's); a request without
// one is left as it is.
func withAnswerMargin(h http.Handler, margin time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if deadline, ok := r.Context().Deadline(); ok {
			ctx, cancel := context.WithDeadline(r.Context(), deadline.Add(-margin))
			defer cancel()
			r = r.WithContext(ctx)
		}
		h.ServeHTTP(w, r)
	})
}
