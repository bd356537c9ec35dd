package httpapi_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// rotatingKeys is a TokenKeySource whose keys a test changes, and that
// records the refreshes it was asked for.
type rotatingKeys struct {
	mu        sync.Mutex
	keys      httpapi.TokenKeys
	refreshed int
	// stale, when set, is answered to lookups without refresh: an instance
	// that has not looked the secret up since the rotation.
	stale *httpapi.TokenKeys
	err   error
}

func (k *rotatingKeys) source(_ context.Context, refresh bool) (httpapi.TokenKeys, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if refresh {
		k.refreshed++
		k.stale = nil
	}
	if k.err != nil {
		return httpapi.TokenKeys{}, k.err
	}
	if k.stale != nil {
		return *k.stale, nil
	}
	return k.keys, nil
}

func (k *rotatingKeys) set(keys httpapi.TokenKeys) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = keys
}

func (k *rotatingKeys) refreshes() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.refreshed
}

// clock is a settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

var (
	keyA = []byte("key-A-key-A-key-A-key-A-key-A-key-A!")
	keyB = []byte("key-B-key-B-key-B-key-B-key-B-key-B!")
)

// kidOf returns the kid header of a token, without verifying it.
func kidOf(t *testing.T, token string) string {
	t.Helper()
	tok, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		t.Fatal(err)
	}
	kid, _ := tok.Header["kid"].(string)
	return kid
}

// A rotation does not log anyone out: tokens signed with the previous key
// are accepted until PreviousUntil and refused after it, new tokens are
// signed with the new key, and each token names its key without revealing
// it.
func TestTokensSurviveAKeyRotationForItsWindow(t *testing.T) {
	t.Parallel()
	clk := &clock{now: time.Now()}
	keys := &rotatingKeys{keys: httpapi.TokenKeys{Current: keyA}}
	a := newAPI(t, func(c *httpapi.Config) {
		c.TokenKey = nil
		c.TokenKeys = keys.source
		c.Now = clk.Now
	})
	u := a.register(jobboard.RoleCandidate)
	kidA := kidOf(t, u.Token)
	if kidA == "" || strings.Contains(kidA, "key-A") {
		t.Fatalf("kid %q; want an id that does not reveal the key", kidA)
	}
	want(t, a.do("GET", "/v1/me", nil, as(u)), http.StatusOK)

	// The rotation: B signs, A verifies for 30 more minutes.
	keys.set(httpapi.TokenKeys{Current: keyB, Previous: keyA, PreviousUntil: clk.Now().Add(30 * time.Minute)})
	want(t, a.do("GET", "/v1/me", nil, as(u)), http.StatusOK)
	r := a.do("POST", "/v1/auth/login", map[string]any{"email": u.Email, "password": "correct horse battery"})
	want(t, r, http.StatusOK)
	fresh := decodeAs[struct{ Token string }](t, r).Token
	if kidB := kidOf(t, fresh); kidB == "" || kidB == kidA {
		t.Fatalf("token after the rotation has kid %q (before: %q); want the new key's id", kidB, kidA)
	}
	if _, err := jwt.Parse(fresh, func(*jwt.Token) (any, error) { return keyB, nil }); err != nil {
		t.Fatalf("token after the rotation does not verify with the new key: %v", err)
	}
	want(t, a.do("GET", "/v1/me", nil, bearer(fresh)), http.StatusOK)

	// 29 minutes later the old token is still good; at PreviousUntil it is
	// not, although it has not expired yet (one hour).
	clk.advance(29 * time.Minute)
	want(t, a.do("GET", "/v1/me", nil, as(u)), http.StatusOK)
	clk.advance(time.Minute)
	r = a.do("GET", "/v1/me", nil, as(u))
	wantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
	if !strings.Contains(r.Header.Get("WWW-Authenticate"), "invalid_token") {
		t.Errorf("WWW-Authenticate %q; want invalid_token", r.Header.Get("WWW-Authenticate"))
	}
	want(t, a.do("GET", "/v1/me", nil, bearer(fresh)), http.StatusOK)
}

// An instance that has not looked the secret up since the rotation meets a
// token signed with the new key: it refreshes its keys once and accepts it.
// A token naming a key nobody knows is refused after one refresh.
func TestAnUnknownKeyIDRefreshesTheKeysOnce(t *testing.T) {
	t.Parallel()
	keys := &rotatingKeys{keys: httpapi.TokenKeys{Current: keyB, Previous: keyA, PreviousUntil: time.Now().Add(time.Hour)}}
	keys.stale = &httpapi.TokenKeys{Current: keyA}
	signer := newAPI(t, func(c *httpapi.Config) { c.TokenKey = keyB })
	u := signer.register(jobboard.RoleEmployer)

	stale := newAPIOn(t, signer.db, func(c *httpapi.Config) {
		c.TokenKey = nil
		c.TokenKeys = keys.source
	})
	want(t, stale.do("GET", "/v1/me", nil, as(u)), http.StatusOK)
	if n := keys.refreshes(); n != 1 {
		t.Fatalf("%d refreshes; want 1", n)
	}
	want(t, stale.do("GET", "/v1/me", nil, as(u)), http.StatusOK)
	if n := keys.refreshes(); n != 1 {
		t.Fatalf("%d refreshes after a second request; want still 1 (the keys are current now)", n)
	}

	forged := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "1", "role": "employer", "iss": "jobboard", "aud": "jobboard-api",
		"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	})
	forged.Header["kid"] = "nobody-knows-this"
	token, err := forged.SignedString([]byte("a key that is not the server's, 32+"))
	if err != nil {
		t.Fatal(err)
	}
	wantProblem(t, stale.do("GET", "/v1/me", nil, bearer(token)), http.StatusUnauthorized, "unauthenticated")
	if n := keys.refreshes(); n != 2 {
		t.Fatalf("%d refreshes after an unknown kid; want 2", n)
	}
}

// When the keys cannot be had, that is the server's fault: 500, not 401.
func TestTokenKeysUnavailableIsAServerError(t *testing.T) {
	t.Parallel()
	keys := &rotatingKeys{keys: httpapi.TokenKeys{Current: keyA}}
	a := newAPI(t, func(c *httpapi.Config) {
		c.TokenKey = nil
		c.TokenKeys = keys.source
	})
	u := a.register(jobboard.RoleCandidate)
	keys.mu.Lock()
	keys.err = errors.New("secrets manager unreachable")
	keys.mu.Unlock()
	wantProblem(t, a.do("GET", "/v1/me", nil, as(u)), http.StatusInternalServerError, "internal")
	r := a.do("POST", "/v1/auth/login", map[string]any{"email": u.Email, "password": "correct horse battery"})
	wantProblem(t, r, http.StatusInternalServerError, "internal")
}
