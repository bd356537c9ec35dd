package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// BenchmarkLoginThrottle: the throttle's share of a successful login, as
// the login counts it now (the client's key and the account's from that
// client: one statement to count, one to settle) against one key (the
// account's alone, as logins counted before), timed alternately on one
// database ("x-one-key": two keys' time over one key's; ns/op is the
// pair's).
func BenchmarkLoginThrottle(b *testing.B) {
	db := pgtest.NewDB(b)
	ctx := context.Background()
	client := jobboard.ThrottleKey{Digest: loginKey("client 192.0.2.1"), Policy: jobboard.DefaultClientPolicy, Shared: true}
	account := jobboard.ThrottleKey{Digest: loginKey("login a@example.com 192.0.2.1"), Policy: jobboard.DefaultLoginPolicy}
	alone := jobboard.ThrottleKey{Digest: loginKey("a@example.com"), Policy: jobboard.DefaultLoginPolicy}
	login := func(keys ...jobboard.ThrottleKey) {
		if wait, err := db.LoginAttempt(ctx, time.Now(), keys...); err != nil || wait != 0 {
			b.Fatalf("LoginAttempt: %s, %v", wait, err)
		}
		if err := db.LoginSucceeded(ctx, keys...); err != nil {
			b.Fatal(err)
		}
	}
	login(alone)
	login(client, account)
	var oneT, twoT time.Duration
	for b.Loop() {
		start := time.Now()
		login(alone)
		mid := time.Now()
		login(client, account)
		oneT += mid.Sub(start)
		twoT += time.Since(mid)
	}
	b.ReportMetric(float64(oneT.Microseconds())/float64(b.N), "one-key-µs")
	b.ReportMetric(float64(twoT.Microseconds())/float64(b.N), "two-keys-µs")
	b.ReportMetric(float64(twoT)/float64(oneT), "x-one-key")
}
