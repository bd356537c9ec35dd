package postgres_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func loginKey(email string) []byte {
	sum := sha256.Sum256([]byte(email))
	return sum[:]
}

// Attempts are counted, the FreeAttempts-th blocks the key for BaseDelay
// and each further one for twice as long; a blocked attempt counts nothing;
// a success forgets the count, and so does a day without failures.
func TestLoginAttempt(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	p := jobboard.LoginPolicy{FreeAttempts: 3, BaseDelay: time.Second, MaxDelay: 4 * time.Second, ResetAfter: time.Hour}
	key := jobboard.ThrottleKey{Digest: loginKey("a@example.com"), Policy: p}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	attempt := func(want time.Duration) {
		t.Helper()
		got, err := db.LoginAttempt(ctx, now, key)
		if err != nil || got != want {
			t.Fatalf("LoginAttempt at %s = %s, %v; want %s", now.Format(time.TimeOnly), got, err, want)
		}
	}
	attempt(0)
	now = now.Add(-time.Millisecond) // another instance's clock, a little behind
	attempt(0)                       // below the free attempts nothing blocks, whatever the clocks
	now = now.Add(time.Millisecond)
	attempt(0) // the third: counted, and blocks for 1 s
	attempt(time.Second)
	attempt(time.Second) // refused attempts do not lengthen the block
	now = now.Add(time.Second)
	attempt(0) // the fourth: 2 s
	now = now.Add(time.Second)
	attempt(time.Second)
	now = now.Add(time.Second)
	attempt(0) // the fifth: 4 s, the most
	now = now.Add(4 * time.Second)
	attempt(0) // the sixth: still 4 s
	attempt(4 * time.Second)

	if err := db.LoginSucceeded(ctx, key); err != nil {
		t.Fatal(err)
	}
	attempt(0)
	attempt(0)
	attempt(0)
	attempt(time.Second)
	// An hour after the last failure the count starts again.
	now = now.Add(time.Hour + time.Second)
	attempt(0)
	attempt(0)
	attempt(0)
	attempt(time.Second)
	// Other keys are not affected.
	if got, err := db.LoginAttempt(ctx, now, jobboard.ThrottleKey{Digest: loginKey("b@example.com"), Policy: p}); err != nil || got != 0 {
		t.Fatalf("another key: %s, %v", got, err)
	}
}

// Attempts at the same moment are counted one after the other: exactly
// FreeAttempts of them pass, however many are sent.
func TestLoginAttemptParallel(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	p := jobboard.DefaultLoginPolicy
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	key := jobboard.ThrottleKey{Digest: loginKey("parallel@example.com"), Policy: p}
	const parallel = 40
	var (
		wg             sync.WaitGroup
		mu             sync.Mutex
		passed, failed int
	)
	start := make(chan struct{})
	for range parallel {
		wg.Go(func() {
			<-start
			wait, err := db.LoginAttempt(context.Background(), now, key)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("LoginAttempt: %v", err)
				failed++
			case wait == 0:
				passed++
			}
		})
	}
	close(start)
	wg.Wait()
	if passed != p.FreeAttempts || failed != 0 {
		t.Errorf("%d parallel attempts: %d passed, %d failed; want exactly %d to pass", parallel, passed, failed, p.FreeAttempts)
	}
}

// With two keys (a client's, then an account's from that client), an
// attempt is counted under the second only when the first let it through;
// a block of either refuses it; a success forgets the account's failures
// and takes back only its own attempt from the client's.
func TestLoginAttemptTwoKeys(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clientPolicy := jobboard.LoginPolicy{FreeAttempts: 4, BaseDelay: time.Minute, MaxDelay: time.Hour, ResetAfter: time.Hour}
	accountPolicy := jobboard.LoginPolicy{FreeAttempts: 2, BaseDelay: time.Second, MaxDelay: time.Hour, ResetAfter: time.Hour}
	client := jobboard.ThrottleKey{Digest: loginKey("client 192.0.2.1"), Policy: clientPolicy, Shared: true}
	account := func(email string) jobboard.ThrottleKey {
		return jobboard.ThrottleKey{Digest: loginKey(email + " 192.0.2.1"), Policy: accountPolicy}
	}
	failures := func(k jobboard.ThrottleKey) int {
		t.Helper()
		return count(t, db, "SELECT coalesce(sum(failures), 0) FROM login_failures WHERE email_digest = $1", k.Digest)
	}
	attempt := func(k jobboard.ThrottleKey, want time.Duration) {
		t.Helper()
		if got, err := db.LoginAttempt(ctx, now, client, k); err != nil || got != want {
			t.Fatalf("LoginAttempt = %s, %v; want %s", got, err, want)
		}
	}
	a, b, c := account("a@example.com"), account("b@example.com"), account("c@example.com")
	attempt(a, 0)
	attempt(a, 0) // a's second failure blocks a for 1 s
	attempt(a, time.Second)
	if got := failures(client); got != 3 {
		t.Fatalf("client counted %d attempts; want 3 (the refused one too: the client let it through)", got)
	}
	if got := failures(a); got != 2 {
		t.Fatalf("a counted %d; want 2", got)
	}
	if err := db.LoginSucceeded(ctx, client, b); err != nil { // a success with b
		t.Fatal(err)
	}
	if got := failures(client); got != 2 {
		t.Fatalf("after a success the client counts %d; want 2 (its own attempt taken back, the failures kept)", got)
	}
	attempt(b, 0)
	attempt(c, 0) // the client's fourth failure blocks it for a minute
	attempt(c, time.Minute)
	if got := failures(c); got != 1 {
		t.Fatalf("c counted %d; want 1: a blocked client counts nothing further", got)
	}
	if err := db.LoginSucceeded(ctx, client, a); err != nil {
		t.Fatal(err)
	}
	if got := failures(a); got != 0 {
		t.Fatalf("a's failures after a success: %d; want them forgotten", got)
	}
	if _, err := db.LoginAttempt(ctx, now); err == nil {
		t.Fatal("LoginAttempt without keys accepted")
	}
}

// Attempts from one client at many accounts at the same moment: exactly the
// client's free attempts get through, however many are sent at once.
func TestLoginAttemptTwoKeysParallel(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	client := jobboard.ThrottleKey{Digest: loginKey("client 198.51.100.7"), Policy: jobboard.DefaultClientPolicy, Shared: true}
	const parallel = 50
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		passed int
	)
	start := make(chan struct{})
	for i := range parallel {
		wg.Go(func() {
			<-start
			account := jobboard.ThrottleKey{Digest: loginKey(fmt.Sprintf("user%d@example.com 198.51.100.7", i)), Policy: jobboard.DefaultLoginPolicy}
			wait, err := db.LoginAttempt(context.Background(), now, client, account)
			if err != nil {
				t.Errorf("LoginAttempt: %v", err)
				return
			}
			if wait == 0 {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if want := jobboard.DefaultClientPolicy.FreeAttempts; passed != want {
		t.Errorf("%d parallel attempts at %d accounts from one client: %d passed; want %d", parallel, parallel, passed, want)
	}
}

// The retention deletes the counts whose last failure is older than the
// login policy's reset period (24 hours), unless still blocked, and keeps
// the others.
func TestDeleteOldLoginFailures(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	short := jobboard.LoginPolicy{FreeAttempts: 1, BaseDelay: time.Hour, MaxDelay: time.Hour, ResetAfter: 24 * time.Hour}
	long := short
	long.BaseDelay, long.MaxDelay = 100*time.Hour, 100*time.Hour
	now := time.Now()
	for _, c := range []struct {
		email string
		at    time.Time
		p     jobboard.LoginPolicy
	}{
		{"old@example.com", now.Add(-30 * time.Hour), short},        // blocked until 29 h ago: deleted
		{"old-blocked@example.com", now.Add(-30 * time.Hour), long}, // blocked for 70 h more: kept
		{"recent@example.com", now.Add(-2 * time.Hour), short},      // kept
	} {
		if wait, err := db.LoginAttempt(ctx, c.at, jobboard.ThrottleKey{Digest: loginKey(c.email), Policy: c.p}); err != nil || wait != 0 {
			t.Fatalf("%s: %s, %v", c.email, wait, err)
		}
	}
	p := short
	for i := range 5 { // more than one batch
		if _, err := db.LoginAttempt(ctx, now.Add(-25*time.Hour), jobboard.ThrottleKey{Digest: loginKey(string(rune('a'+i)) + "@example.com"), Policy: p}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := db.DeleteExpired(ctx, jobboard.DefaultRetention, 2)
	if err != nil || n["login_failures"] != 6 {
		t.Fatalf("DeleteExpired = %v, %v; want 6 login failure counts", n, err)
	}
	for _, c := range []struct {
		email string
		kept  bool
	}{{"old@example.com", false}, {"old-blocked@example.com", true}, {"recent@example.com", true}, {"a@example.com", false}} {
		got := count(t, db, "SELECT count(*) FROM login_failures WHERE email_digest = $1", loginKey(c.email)) == 1
		if got != c.kept {
			t.Errorf("%s kept = %t, want %t", c.email, got, c.kept)
		}
	}
	if _, err := db.DeleteExpired(ctx, jobboard.DefaultRetention, 0); err == nil {
		t.Error("batch 0 accepted")
	}
}
