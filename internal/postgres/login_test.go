package postgres_test

import (
	"context"
	"crypto/sha256"
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
	key := loginKey("a@example.com")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	attempt := func(want time.Duration) {
		t.Helper()
		got, err := db.LoginAttempt(ctx, key, now, p)
		if err != nil || got != want {
			t.Fatalf("LoginAttempt at %s = %s, %v; want %s", now.Format(time.TimeOnly), got, err, want)
		}
	}
	attempt(0)
	attempt(0)
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
	if got, err := db.LoginAttempt(ctx, loginKey("b@example.com"), now, p); err != nil || got != 0 {
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
	key := loginKey("parallel@example.com")
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
			wait, err := db.LoginAttempt(context.Background(), key, now, p)
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

// The retention deletes the counts whose last failure is older than the
// given age, unless still blocked, and keeps the others.
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
		if wait, err := db.LoginAttempt(ctx, loginKey(c.email), c.at, c.p); err != nil || wait != 0 {
			t.Fatalf("%s: %s, %v", c.email, wait, err)
		}
	}
	p := short
	for i := range 5 { // more than one batch
		if _, err := db.LoginAttempt(ctx, loginKey(string(rune('a'+i))+"@example.com"), now.Add(-25*time.Hour), p); err != nil {
			t.Fatal(err)
		}
	}
	n, err := db.DeleteOldLoginFailures(ctx, 24*time.Hour, 2)
	if err != nil || n != 6 {
		t.Fatalf("DeleteOldLoginFailures = %d, %v; want 6", n, err)
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
	if _, err := db.DeleteOldLoginFailures(ctx, time.Hour, 0); err == nil {
		t.Error("batch 0 accepted")
	}
}
