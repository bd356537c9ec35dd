package httpapi_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// newClockedAPI is newAPI with a clock the test moves.
func newClockedAPI(t *testing.T) (*api, *clock) {
	t.Helper()
	c := &clock{now: time.Now().UTC().Truncate(time.Second)}
	return newAPI(t, func(cfg *httpapi.Config) { cfg.Now = c.Now }), c
}

// verificationToken does what the worker does with the account's latest
// verification event: claims it, which makes the token of its link.
func (a *api) verificationToken(u user) string {
	a.t.Helper()
	return a.linkToken(jobboard.EventTypeEmailVerificationRequested, u)
}

// linkToken claims the account's latest event of the type (one whose
// email carries a link) as the worker does, and returns the token that
// the claim made.
func (a *api) linkToken(eventType string, u user) string {
	a.t.Helper()
	ctx := context.Background()
	var payload []byte
	err := a.db.Pool.QueryRow(ctx, `SELECT payload FROM outbox WHERE event_type = $1 AND (payload->>'user_id')::bigint = $2
		ORDER BY created_at DESC LIMIT 1`, eventType, u.ID).Scan(&payload)
	if err != nil {
		a.t.Fatalf("%s event of user %d: %v", eventType, u.ID, err)
	}
	ev, err := jobboard.DecodeEvent(payload)
	if err != nil {
		a.t.Fatal(err)
	}
	c, err := a.db.ClaimEvent(ctx, ev, time.Minute)
	if err != nil || c.Recipient.Token == "" {
		a.t.Fatalf("claim %s: %+v, %v", ev.EventID, c, err)
	}
	return c.Recipient.Token
}

func (a *api) verificationEvents(u user) int {
	a.t.Helper()
	var n int
	if err := a.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE event_type = $1 AND (payload->>'user_id')::bigint = $2`,
		jobboard.EventTypeEmailVerificationRequested, u.ID).Scan(&n); err != nil {
		a.t.Fatal(err)
	}
	return n
}

func (a *api) me(u user) jobboard.User {
	a.t.Helper()
	r := a.do("GET", "/v1/me", nil, as(u))
	want(a.t, r, http.StatusOK)
	return decodeAs[jobboard.User](a.t, r)
}

// Registration queues a verification email and answers an unverified
// user; the link's token verifies the address once; wrong, used and
// expired tokens get their problems, and change nothing.
func TestVerifyEmail(t *testing.T) {
	t.Parallel()
	a, clk := newClockedAPI(t)
	u := a.register(jobboard.RoleCandidate)
	if a.me(u).EmailVerified {
		t.Fatal("a new account is verified")
	}
	if n := a.verificationEvents(u); n != 1 {
		t.Fatalf("%d verification events after registering, want 1", n)
	}
	token := a.verificationToken(u)

	// Refused tokens: none verifies, none needs a sign-in to be told.
	other := strings.Repeat("A", len(token))
	for _, tt := range []struct {
		name   string
		body   any
		status int
		kind   string
	}{
		{"unknown", map[string]any{"token": other}, http.StatusBadRequest, "invalid-verification-token"},
		{"wrong shape", map[string]any{"token": token + "x"}, http.StatusBadRequest, "invalid-verification-token"},
		{"not base64url", map[string]any{"token": strings.Repeat("*", len(token))}, http.StatusBadRequest, "invalid-verification-token"},
		{"missing", map[string]any{}, http.StatusUnprocessableEntity, "validation"},
		{"empty", map[string]any{"token": ""}, http.StatusUnprocessableEntity, "validation"},
		{"unknown member", map[string]any{"token": token, "user_id": u.ID}, http.StatusBadRequest, "bad-request"},
		{"not a string", map[string]any{"token": 7}, http.StatusBadRequest, "bad-request"},
	} {
		r := a.do("POST", "/v1/auth/verify-email", tt.body)
		wantProblem(t, r, tt.status, tt.kind)
		if strings.Contains(string(r.Body), u.Email) {
			t.Errorf("%s: the answer names the account: %s", tt.name, r.Body)
		}
	}
	// Expired: a day and a minute after the claim (made by the database's
	// clock). From another client: this one's failure, counted a day
	// ahead, would block it until the clock gets back there.
	clk.advance(jobboard.VerificationTokenTTL + time.Minute)
	wantProblem(t, a.do("POST", "/v1/auth/verify-email", map[string]any{"token": token}, from("192.0.2.40")), http.StatusGone, "verification-token-expired")
	clk.advance(-(jobboard.VerificationTokenTTL + time.Minute))
	if a.me(u).EmailVerified {
		t.Fatal("a refused token verified the account")
	}

	r := a.do("POST", "/v1/auth/verify-email", map[string]any{"token": token})
	want(t, r, http.StatusOK)
	if got := decodeAs[jobboard.User](t, r); !got.EmailVerified || got.ID != u.ID || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("verified %+v (Cache-Control %q), want user %d verified, no-store", got, r.Header.Get("Cache-Control"), u.ID)
	}
	if !a.me(u).EmailVerified {
		t.Fatal("GET /v1/me does not say verified")
	}
	wantProblem(t, a.do("POST", "/v1/auth/verify-email", map[string]any{"token": token}), http.StatusGone, "verification-token-used")
	// Verified: nothing more to resend.
	wantProblem(t, a.do("POST", "/v1/auth/resend-verification", nil, as(u)), http.StatusConflict, "already-verified")
}

// Resending: signed in only; a minute apart; five an hour per account
// (429 with Retry-After, nothing queued); each resend's link replaces
// nothing but works on its own.
func TestResendVerification(t *testing.T) {
	t.Parallel()
	a, clk := newClockedAPI(t)
	registered := clk.Now()
	u := a.register(jobboard.RoleCandidate)

	wantProblem(t, a.do("POST", "/v1/auth/resend-verification", nil), http.StatusUnauthorized, "unauthenticated")

	r := a.do("POST", "/v1/auth/resend-verification", nil, as(u))
	wantProblem(t, r, http.StatusTooManyRequests, "too-many-verification-emails")
	if got := r.Header.Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After %q right after registering, want 60", got)
	}
	clk.advance(59 * time.Second)
	if r := a.do("POST", "/v1/auth/resend-verification", nil, as(u)); r.Header.Get("Retry-After") != "1" {
		t.Errorf("a second before the cooldown ends: %s, Retry-After %q; want 429, 1", r, r.Header.Get("Retry-After"))
	}
	for i := 2; i <= 5; i++ {
		clk.advance(time.Minute)
		r := a.do("POST", "/v1/auth/resend-verification", nil, as(u))
		want(t, r, http.StatusAccepted)
		if len(r.Body) != 0 {
			t.Errorf("202 with a body: %s", r.Body)
		}
		if n := a.verificationEvents(u); n != i {
			t.Fatalf("%d verification events after resend %d, want %d", n, i, i)
		}
	}
	// The sixth within the hour: refused until the first leaves the hour.
	clk.advance(time.Minute)
	before := a.counts()
	r = a.do("POST", "/v1/auth/resend-verification", nil, as(u))
	wantProblem(t, r, http.StatusTooManyRequests, "too-many-verification-emails")
	// The first request (the registration's) leaves the hour's window at
	// registered + 1h.
	if got, want := r.Header.Get("Retry-After"), strconv.Itoa(int(registered.Add(time.Hour).Sub(clk.Now()).Seconds())); got != want {
		t.Errorf("Retry-After %q, want %s (until the registration's email is an hour old)", got, want)
	}
	if after := a.counts(); after["outbox"] != before["outbox"] {
		t.Errorf("a refused resend queued an event: %v → %v", before, after)
	}

	// The latest link verifies.
	r = a.do("POST", "/v1/auth/verify-email", map[string]any{"token": a.verificationToken(u)})
	want(t, r, http.StatusOK)
}

// A relay failure does not change the answer of a registration or a
// resend: the event stays in the outbox for the sweeper.
func TestVerificationEventsAreRelayed(t *testing.T) {
	t.Parallel()
	relay := &failingRelay{}
	c := &clock{now: time.Now().UTC()}
	a := newAPI(t, func(cfg *httpapi.Config) { cfg.Relay = relay; cfg.Now = c.Now })
	u := a.register(jobboard.RoleEmployer)
	c.advance(time.Minute)
	want(t, a.do("POST", "/v1/auth/resend-verification", nil, as(u)), http.StatusAccepted)
	evs := relay.all()
	if len(evs) != 2 || evs[0].UserID != u.ID || evs[1].UserID != u.ID || evs[0].EventID == evs[1].EventID ||
		evs[1].Type != jobboard.EventTypeEmailVerificationRequested {
		t.Fatalf("relayed %+v, want two verification events of user %d", evs, u.ID)
	}
}

// A resend retried with its Idempotency-Key (the first answer was lost)
// gets the first answer again, not a 429, and queues nothing more; the
// relay runs once, after the commit.
func TestResendVerificationWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	relay := &failingRelay{}
	clk := &clock{now: time.Now().UTC()}
	a := newAPI(t, func(cfg *httpapi.Config) { cfg.Relay = relay; cfg.Now = clk.Now })
	u := a.register(jobboard.RoleCandidate)
	clk.advance(time.Minute)
	key := newKey()
	first := a.do("POST", "/v1/auth/resend-verification", nil, as(u), withKey(key))
	want(t, first, http.StatusAccepted)
	retry := a.do("POST", "/v1/auth/resend-verification", nil, as(u), withKey(key))
	want(t, retry, http.StatusAccepted)
	if retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("the retry ran again instead of replaying")
	}
	if n, relayed := a.verificationEvents(u), len(relay.all()); n != 2 || relayed != 2 {
		t.Fatalf("%d verification events, %d relayed; want 2 each (registration, one resend)", n, relayed)
	}
	// Another key is another request: the cooldown answers.
	wantProblem(t, a.do("POST", "/v1/auth/resend-verification", nil, as(u), withKey(newKey())),
		http.StatusTooManyRequests, "too-many-verification-emails")
}
