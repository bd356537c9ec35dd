package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// BenchmarkPasswordResetRequest: POST /v1/auth/password-reset for an
// address that has an account, timed alternately with one that has none,
// in-process over one database. The two run the same statements
// (TestPasswordResetRequestsLookAlike); "x-existing" is the time of the
// request for the missing address as a ratio of the other's, which no
// account's existence should move from 1 beyond the noise. The bounds are
// opened (a window of a nanosecond), so that every request queues its
// event and the work stays the same from one iteration to the next.
func BenchmarkPasswordResetRequest(b *testing.B) {
	db := pgtest.NewDB(b)
	h := httpapi.NewServer(httpapi.Config{
		Writes: db, Users: db, Companies: db, Jobs: db, Applications: db, Pinger: db,
		Logger: slog.New(slog.DiscardHandler), TokenKey: testKey, Password: cheapPasswords,
		PasswordResetPolicy: jobboard.VerificationPolicy{Cooldown: time.Nanosecond, Window: time.Nanosecond, PerAccount: 1, PerAddress: 1 << 30},
	})
	const existing, missing = "bench-reset@example.com", "bench-nobody@example.com"
	req := httptest.NewRequest(http.MethodPost, "/v1/auth/register", strings.NewReader(
		`{"email":"`+existing+`","password":"correct horse battery","name":"Bench","role":"candidate"}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		b.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	reset := func(email string) func() *http.Request {
		return func() *http.Request {
			req := httptest.NewRequest(http.MethodPost, "/v1/auth/password-reset", strings.NewReader(`{"email":"`+email+`"}`))
			req.Header.Set("Content-Type", "application/json")
			return req
		}
	}
	timedPair(b, h, "existing", reset(existing), reset(missing), http.StatusAccepted)
	var queued int
	if err := db.Pool.QueryRow(b.Context(), `SELECT count(*) FROM outbox WHERE event_type = $1`, jobboard.EventTypePasswordResetRequested).Scan(&queued); err != nil {
		b.Fatal(err)
	}
	if queued < 2*b.N {
		b.Fatalf("%d reset events for %d requests of each: not every request queued one", queued, b.N)
	}
}
