package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

func TestPasswordHashConcurrency(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	for _, tt := range []struct {
		cores  int
		memory int64
		want   int
	}{
		{2, 0, 2},            // memory unknown: one per core
		{2, 24 << 30, 2},     // plenty of memory: one per core
		{16, 512 * mib, 3},   // a quarter of 512 MiB holds 3 hashes of 19 MiB with the collector's headroom
		{2, 128 * mib, 1},    // the smallest Lambda: still one
		{0, 0, 1},            // never none
		{64, 64 << 30, 64},   // a big machine
		{8, 8 * 38 * mib, 2}, // a quarter of 304 MiB
	} {
		if got := PasswordHashConcurrency(tt.cores, tt.memory, DefaultPasswordParams); got != tt.want {
			t.Errorf("PasswordHashConcurrency(%d cores, %d MiB) = %d, want %d", tt.cores, tt.memory/mib, got, tt.want)
		}
	}
}

// hold takes every slot of l until the returned func is called.
func hold(l hashLimiter) (release func()) {
	for range cap(l.slots) {
		l.slots <- struct{}{}
	}
	return func() {
		for range cap(l.slots) {
			<-l.slots
		}
	}
}

// The limiter runs at once when a slot is free, makes a request wait for a
// slot to come free, refuses one that waited its whole wait, and gives up
// with the request's context.
func TestHashLimiter(t *testing.T) {
	t.Parallel()
	ran := 0
	l := newHashLimiter(2, time.Hour)
	if err := l.run(context.Background(), func() { ran++ }); err != nil || ran != 1 {
		t.Fatalf("free slot: %v, ran %d", err, ran)
	}

	release := hold(l)
	done := make(chan error)
	go func() { done <- l.run(context.Background(), func() { ran++ }) }()
	release() // a slot comes free while the request waits: it runs
	if err := <-done; err != nil || ran != 2 {
		t.Fatalf("after waiting: %v, ran %d", err, ran)
	}

	short := newHashLimiter(1, time.Millisecond)
	release = hold(short)
	defer release()
	if err := short.run(context.Background(), func() { ran++ }); !errors.Is(err, errHashBusy) || ran != 2 {
		t.Fatalf("no slot within the wait: %v, ran %d; want errHashBusy, nothing run", err, ran)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := newHashLimiterHeld(t).run(ctx, func() { ran++ }); !errors.Is(err, context.Canceled) || ran != 2 {
		t.Fatalf("request gone: %v, ran %d; want context.Canceled", err, ran)
	}
}

// newHashLimiterHeld is a limiter of one slot, taken for the test's life,
// and a wait longer than any test.
func newHashLimiterHeld(t *testing.T) hashLimiter {
	l := newHashLimiter(1, time.Hour)
	t.Cleanup(hold(l))
	return l
}

// While every hashing slot is taken, registrations and logins answer 503
// busy with Retry-After before any hashing, and the attempts they counted
// are taken back: more of them than the client's free attempts do not
// block the client, or the account, once hashing is possible again.
func TestBusyHashingAnswers503AndCountsNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	s := newServer(Config{
		Writes: db, Users: db, Companies: db, Jobs: db, Applications: db, Logins: db,
		TokenKey: []byte("httpapi-test-signing-key-32bytes"),
		Password: PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}, PasswordHashes: 1, PasswordHashWait: time.Millisecond,
	})
	h := s.observe(s.mux)
	send := func(path, body string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
		return rec
	}
	const registration = `{"email":"busy@example.com","password":"correct horse battery","name":"B","role":"candidate"}`
	const login = `{"email":"busy@example.com","password":"correct horse battery"}`
	if rec := send("/v1/auth/register", registration); rec.Code != http.StatusCreated {
		t.Fatalf("register: %d %s", rec.Code, rec.Body)
	}

	release := hold(s.hashing)
	for i := range jobboard.DefaultClientPolicy.FreeAttempts + 5 {
		for _, c := range []struct{ path, body string }{
			{"/v1/auth/register", strings.Replace(registration, "busy@", "busy2@", 1)},
			{"/v1/auth/login", login},
		} {
			rec := send(c.path, c.body)
			var p problem
			_ = json.Unmarshal(rec.Body.Bytes(), &p)
			if rec.Code != http.StatusServiceUnavailable || p.Type != ProblemBase+kindBusy || rec.Header().Get("Retry-After") != "1" {
				t.Fatalf("%s #%d with every slot taken: %d %s (Retry-After %q); want 503 busy, Retry-After 1",
					c.path, i, rec.Code, rec.Body, rec.Header().Get("Retry-After"))
			}
		}
	}
	release()
	if rec := send("/v1/auth/login", login); rec.Code != http.StatusOK {
		t.Fatalf("login once hashing is free: %d %s; the busy answers must not count", rec.Code, rec.Body)
	}
	if rec := send("/v1/auth/register", strings.Replace(registration, "busy@", "busy2@", 1)); rec.Code != http.StatusCreated {
		t.Fatalf("register once hashing is free: %d %s", rec.Code, rec.Body)
	}
}

// deadlineRelay records the context each relay runs with, and ends the
// request's context first, as a client that hangs up (or a request that
// used its time waiting for hashing) would.
type deadlineRelay struct {
	endRequest func()
	deadline   time.Time
	hasDL      bool
	errAtRelay error
}

func (d *deadlineRelay) Relay(ctx context.Context, _ jobboard.Event) error {
	d.endRequest()
	d.deadline, d.hasDL = ctx.Deadline()
	d.errAtRelay = ctx.Err()
	return nil
}

// The relay after a registration's commit has its own deadline, counted
// from when it starts: not the request's (whose time waiting for a hashing
// slot or for the database is spent), and not cut short when the request
// ends.
func TestRelayDeadlineIsItsOwn(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	relay := &deadlineRelay{}
	s := newServer(Config{
		Writes: db, Users: db, Companies: db, Jobs: db, Applications: db, Logins: db, Relay: relay,
		TokenKey: []byte("httpapi-test-signing-key-32bytes"),
		Password: PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1},
	})
	requestDeadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), requestDeadline)
	defer cancel()
	relay.endRequest = cancel
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/auth/register",
		strings.NewReader(`{"email":"relay@example.com","password":"correct horse battery","name":"R","role":"candidate"}`))
	before := time.Now()
	s.observe(s.mux).ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	switch {
	case !relay.hasDL:
		t.Fatal("the relay ran without a deadline")
	case relay.deadline.Equal(requestDeadline) || relay.deadline.Before(before.Add(relayTimeout)) || relay.deadline.After(time.Now().Add(relayTimeout)):
		t.Fatalf("relay deadline %v; want its own %v from its start (the request's was %v)", relay.deadline, relayTimeout, requestDeadline)
	case relay.errAtRelay != nil:
		t.Fatalf("the relay's context ended with the request's: %v", relay.errAtRelay)
	}
}
