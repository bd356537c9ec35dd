package httpapi_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// BenchmarkLogin: a correct login (the throttle's check and count, the
// user's lookup, the argon2id verification, the success that clears the
// count, the token) served in-process, timed alternately with GET /v1/me
// (one token check and one primary-key read: "x-me" is the login's time
// over it; ns/op is the pair's). With the tests' cheap argon2id the
// database work shows; with the production cost (19 MiB, 2 passes) the
// hash dominates.
func BenchmarkLogin(b *testing.B) {
	for _, c := range []struct {
		name   string
		params httpapi.PasswordParams
	}{{"cheap-argon2id", cheapPasswords}, {"production-argon2id", httpapi.DefaultPasswordParams}} {
		b.Run(c.name, func(b *testing.B) {
			db := pgtest.NewDB(b)
			h := httpapi.NewServer(httpapi.Config{
				Writes: db, Users: db, Companies: db, Jobs: db, Applications: db, Pinger: db, Logins: db,
				Logger: slog.New(slog.DiscardHandler), TokenKey: testKey, Password: c.params,
			})
			send := func(method, path, body, token string, want int) []byte {
				req := httptest.NewRequest(method, path, strings.NewReader(body))
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != want {
					b.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body)
				}
				return rec.Body.Bytes()
			}
			var session struct {
				Token string `json:"token"`
			}
			reg := send(http.MethodPost, "/v1/auth/register", `{"email":"bench@example.com","password":"correct horse battery","name":"B","role":"candidate"}`, "", http.StatusCreated)
			if err := json.Unmarshal(reg, &session); err != nil {
				b.Fatal(err)
			}
			const login = `{"email":"bench@example.com","password":"correct horse battery"}`
			var loginT, meT time.Duration
			for b.Loop() {
				start := time.Now()
				send(http.MethodGet, "/v1/me", "", session.Token, http.StatusOK)
				mid := time.Now()
				send(http.MethodPost, "/v1/auth/login", login, "", http.StatusOK)
				meT += mid.Sub(start)
				loginT += time.Since(mid)
			}
			b.ReportMetric(float64(loginT.Microseconds())/float64(b.N)/1000, "login-ms")
			b.ReportMetric(float64(meT.Microseconds())/float64(b.N)/1000, "me-ms")
			b.ReportMetric(float64(loginT)/float64(meT), "x-me")
		})
	}
}
