package secret_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/secret"
)

// fakeClock is a settable time.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time          { return c.now }
func (c *fakeClock) advance(d time.Duration) { c.now = c.now.Add(d) }

// newCredentials returns the database credentials of dbARN on srv, their
// clock, and the number of clients built so far.
func newCredentials(t *testing.T, srv *httptest.Server) (*secret.DatabaseCredentials, *fakeClock) {
	t.Helper()
	calls := 0
	_, creds, err := secret.Database(context.Background(), secret.DatabaseSettings{SecretARN: dbARN}, newClientFor(srv, &calls))
	if err != nil || creds == nil {
		t.Fatalf("Database: %v, %v", creds, err)
	}
	clk := &fakeClock{now: time.Now()}
	creds.Now = clk.Now
	return creds, clk
}

func wantCredentials(t *testing.T, creds *secret.DatabaseCredentials, user, password string) {
	t.Helper()
	u, p, err := creds.Credentials(context.Background())
	if err != nil || u != user || p != password {
		t.Fatalf("Credentials = %q, %q, %v; want %q, %q", u, p, err, user, password)
	}
}

func TestDatabaseFromTheEnvironmentHasNoCredentialsSource(t *testing.T) {
	t.Parallel()
	u, creds, err := secret.Database(context.Background(), secret.DatabaseSettings{URL: "postgres://x@y/z"}, noClient(t))
	if u != "postgres://x@y/z" || creds != nil || err != nil {
		t.Errorf("Database = %q, %v, %v; want the URL, no credentials source", u, creds, err)
	}
}

// The credentials start with what Database fetched (no second call), are
// looked up again after MaxAge, and at once (after MinInterval) when the
// server refused them.
func TestDatabaseCredentialsFollowARotation(t *testing.T) {
	t.Parallel()
	fake := &fakeSecretsManager{strings: map[string]string{dbARN: `{"username":"app","password":"one","host":"db"}`}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	creds, clk := newCredentials(t, srv)

	wantCredentials(t, creds, "app", "one")
	if n := len(fake.asked()); n != 1 {
		t.Fatalf("%d lookups; want 1 (Database's)", n)
	}

	// Rotated: until the server refuses the old password, nothing asks.
	fake.rotate(dbARN, `{"username":"app","password":"two","host":"db"}`)
	clk.advance(time.Minute)
	wantCredentials(t, creds, "app", "one")
	creds.Rejected("app", "one")
	wantCredentials(t, creds, "app", "two")
	if n := len(fake.asked()); n != 2 {
		t.Fatalf("%d lookups after a refusal; want 2", n)
	}
	// A refusal of the old values, from an attempt that started before the
	// lookup, changes nothing.
	creds.Rejected("app", "one")
	wantCredentials(t, creds, "app", "two")

	// A refusal right after a lookup waits MinInterval: a burst of failing
	// connections costs one call.
	fake.rotate(dbARN, `{"username":"app","password":"three","host":"db"}`)
	creds.Rejected("app", "two")
	wantCredentials(t, creds, "app", "two")
	clk.advance(secret.DefaultMinInterval)
	wantCredentials(t, creds, "app", "three")

	// Alternating users: the new user arrives after MaxAge without a refusal.
	fake.rotate(dbARN, `{"username":"app_clone","password":"four","host":"db"}`)
	clk.advance(secret.DefaultMaxAge - time.Nanosecond)
	wantCredentials(t, creds, "app", "three")
	clk.advance(time.Nanosecond)
	wantCredentials(t, creds, "app_clone", "four")
	if got := fake.asked(); len(got) != 4 || slices.ContainsFunc(got, func(s string) bool { return s != dbARN }) {
		t.Errorf("lookups %v; want 4 of %s", got, dbARN)
	}
}

// A failed lookup keeps the values the server has not refused, and is an
// error for values it has.
func TestDatabaseCredentialsWhenTheLookupFails(t *testing.T) {
	t.Parallel()
	fake := &fakeSecretsManager{strings: map[string]string{dbARN: `{"username":"app","password":"one","host":"db"}`}}
	srv := httptest.NewServer(fake)
	creds, clk := newCredentials(t, srv)
	srv.Close() // Secrets Manager unreachable from now on

	clk.advance(secret.DefaultMaxAge)
	wantCredentials(t, creds, "app", "one")

	creds.Rejected("app", "one")
	clk.advance(secret.DefaultMinInterval)
	if u, p, err := creds.Credentials(context.Background()); err == nil || u != "" || p != "" {
		t.Errorf("Credentials = %q, %q, %v; want an error: the only values were refused", u, p, err)
	}
}

func TestDatabaseCredentialsRefuseASecretWithoutPassword(t *testing.T) {
	t.Parallel()
	fake := &fakeSecretsManager{strings: map[string]string{dbARN: `{"username":"app","password":"one","host":"db"}`}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	creds, _ := newCredentials(t, srv)
	fake.rotate(dbARN, `{"username":"app","host":"db"}`)
	creds.Rejected("app", "one")
	creds.MinInterval = 0
	if _, _, err := creds.Credentials(context.Background()); !errors.Is(err, secret.ErrMalformed) {
		t.Errorf("error %v; want ErrMalformed", err)
	}
}
