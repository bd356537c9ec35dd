package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// requestReset asks for a password reset email to email.
func (a *api) requestReset(email string, opts ...reqOption) response {
	a.t.Helper()
	return a.do("POST", "/v1/auth/password-reset", map[string]any{"email": email}, opts...)
}

// resetEvents counts the password reset events in the outbox.
func (a *api) resetEvents() int {
	a.t.Helper()
	var n int
	if err := a.db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE event_type = $1`, jobboard.EventTypePasswordResetRequested).Scan(&n); err != nil {
		a.t.Fatal(err)
	}
	return n
}

// resetToken does what the worker does with the account's latest reset
// event: claims it, which makes the token of its link.
func (a *api) resetToken(u user) string {
	a.t.Helper()
	return a.linkToken(jobboard.EventTypePasswordResetRequested, u)
}

// resetPassword posts a token and a new password.
func (a *api) resetPassword(token, password string) response {
	a.t.Helper()
	return a.do("POST", "/v1/auth/password-reset/confirm", map[string]any{"token": token, "password": password})
}

// login signs in and returns the session's token.
func (a *api) login(email, password string) string {
	a.t.Helper()
	r := a.do("POST", "/v1/auth/login", map[string]any{"email": email, "password": password})
	want(a.t, r, http.StatusOK)
	return decodeAs[struct {
		Token string `json:"token"`
	}](a.t, r).Token
}

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// tracedDB is a fresh database whose store reports every statement it
// runs to rec.
func tracedDB(t *testing.T, rec *queryRecorder) *pgtest.DB {
	t.Helper()
	return pgtest.Open(t, pgtest.NewURL(t), func(c *pgxpool.Config) { c.ConnConfig.Tracer = rec })
}

// sameStatements fails unless two recorded runs are the same statements,
// in the same order, with arguments of the same types.
func sameStatements(t *testing.T, what string, x, y []recordedQuery) {
	t.Helper()
	if len(x) != len(y) {
		t.Fatalf("%s: %d statements for one address, %d for the other:\n%v\n%v", what, len(x), len(y), x, y)
	}
	for i := range x {
		if x[i].sql != y[i].sql || len(x[i].args) != len(y[i].args) {
			t.Fatalf("%s: statement %d differs:\n%s %d args\n%s %d args", what, i, x[i].sql, len(x[i].args), y[i].sql, len(y[i].args))
		}
		for j := range x[i].args {
			if reflect.TypeOf(x[i].args[j]) != reflect.TypeOf(y[i].args[j]) {
				t.Fatalf("%s: statement %d, argument %d: %T and %T", what, i, j, x[i].args[j], y[i].args[j])
			}
		}
	}
}

// sameAnswer fails unless two answers have the same status, body and
// header fields (but the request id).
func sameAnswer(t *testing.T, what string, x, y response) {
	t.Helper()
	if x.Status != http.StatusAccepted || y.Status != http.StatusAccepted || string(x.Body) != string(y.Body) {
		t.Fatalf("%s: answers %s and %s, want the same 202", what, x, y)
	}
	hx, hy := x.Header.Clone(), y.Header.Clone()
	for _, h := range []http.Header{hx, hy} {
		h.Del("X-Request-Id")
		h.Del("Date")
	}
	if !reflect.DeepEqual(hx, hy) {
		t.Fatalf("%s: header fields differ:\n%v\n%v", what, hx, hy)
	}
}

// No enumeration: a reset asked for an address with an account and for one
// without gets the same answer (status, body, header fields) after the
// same work: the same statements in the same order, one request row, one
// outbox row and one relayed event each; and the same again when the
// address's bounds refuse (no row, no event, for either). Timing is not
// asserted here (BenchmarkPasswordResetRequest compares it); the same
// statements are what makes it the same.
func TestPasswordResetRequestsLookAlike(t *testing.T) {
	t.Parallel()
	rec := &queryRecorder{}
	relay := &failingRelay{}
	a := newAPIOn(t, tracedDB(t, rec), func(c *httpapi.Config) { c.Relay = relay })
	u := a.register(jobboard.RoleCandidate)
	missing := "nobody-" + strings.TrimSuffix(u.Email, "@example.com") + "@example.com"
	relay.events = nil

	for _, round := range []struct {
		name   string
		queued int
	}{{"first request", 1}, {"within the cooldown", 0}} {
		var existing, unknown response
		eventsBefore, requestsBefore := a.resetEvents(), countRows(t, a, "password_reset_requests")
		withAccount := rec.record(func() { existing = a.requestReset(u.Email) })
		withoutAccount := rec.record(func() { unknown = a.requestReset(missing) })
		sameAnswer(t, round.name, existing, unknown)
		sameStatements(t, round.name, withAccount, withoutAccount)
		if len(withAccount) == 0 {
			t.Fatalf("%s: no statement recorded", round.name)
		}
		if n := a.resetEvents() - eventsBefore; n != 2*round.queued {
			t.Errorf("%s: %d events queued for the two, want %d", round.name, n, 2*round.queued)
		}
		if n := countRows(t, a, "password_reset_requests") - requestsBefore; n != 2*round.queued {
			t.Errorf("%s: %d requests counted for the two, want %d", round.name, n, 2*round.queued)
		}
	}
	evs := relay.all()
	if len(evs) != 2 || evs[0].Type != jobboard.EventTypePasswordResetRequested || evs[1].Type != evs[0].Type ||
		evs[0].UserID != u.ID || evs[1].UserID != 0 {
		t.Fatalf("relayed %+v; want one reset event for user %d, then one without a user", evs, u.ID)
	}
	// The address in another case and with spaces is the same address: it
	// is within the same cooldown.
	before := a.resetEvents()
	want(t, a.requestReset("  "+strings.ToUpper(u.Email)), http.StatusAccepted)
	if a.resetEvents() != before {
		t.Error("the address in capitals was counted as another address")
	}
	// Malformed input is refused as such: no account has such an address.
	for _, body := range []any{map[string]any{}, map[string]any{"email": "not an address"}, map[string]any{"email": u.Email, "user_id": u.ID}} {
		r := a.do("POST", "/v1/auth/password-reset", body)
		if r.Status != http.StatusUnprocessableEntity && r.Status != http.StatusBadRequest {
			t.Errorf("%v: %s, want 422 or 400", body, r)
		}
	}
}

// countRows counts the rows of a table.
func countRows(t *testing.T, a *api, table string) int {
	t.Helper()
	var n int
	if err := a.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The bounds: one reset email a minute and five an hour per address, the
// same for an address with an account and one without; every request is
// answered 202.
func TestPasswordResetBounds(t *testing.T) {
	t.Parallel()
	a, clk := newClockedAPI(t)
	u := a.register(jobboard.RoleEmployer)
	missing := "nobody-" + u.Email
	// Seconds after the first request; true: an email is queued.
	steps := []struct {
		at     time.Duration
		queued bool
	}{
		{0, true}, {30 * time.Second, false}, {time.Minute, true}, {2 * time.Minute, true},
		{3 * time.Minute, true}, {4 * time.Minute, true}, // five in the hour
		{5 * time.Minute, false}, {59 * time.Minute, false},
		{time.Hour + time.Second, true}, // the first has left the hour
	}
	start := clk.Now()
	for _, addr := range []string{u.Email, missing} {
		clk.set(start)
		for _, s := range steps {
			clk.set(start.Add(s.at))
			before := a.resetEvents()
			want(t, a.requestReset(addr), http.StatusAccepted)
			if queued := a.resetEvents() > before; queued != s.queued {
				t.Errorf("%s at +%v: queued %v, want %v", addr, s.at, queued, s.queued)
			}
		}
	}
}

// A reset: the link's token sets the new password once, marks the address
// verified, and answers the account (no session); the old password no
// longer signs in, the new one does. Wrong, used and expired tokens get
// their problems and change nothing; a short password is refused before
// the token is used.
func TestPasswordReset(t *testing.T) {
	t.Parallel()
	a, clk := newClockedAPI(t)
	u := a.register(jobboard.RoleCandidate)
	want(t, a.requestReset(u.Email), http.StatusAccepted)
	token := a.resetToken(u)

	other := strings.Repeat("A", len(token))
	for _, tt := range []struct {
		name   string
		body   any
		status int
		kind   string
	}{
		{"unknown", map[string]any{"token": other, "password": "a new password"}, http.StatusBadRequest, "invalid-password-reset-token"},
		{"wrong shape", map[string]any{"token": token + "x", "password": "a new password"}, http.StatusBadRequest, "invalid-password-reset-token"},
		{"not base64url", map[string]any{"token": strings.Repeat("*", len(token)), "password": "a new password"}, http.StatusBadRequest, "invalid-password-reset-token"},
		{"short password", map[string]any{"token": token, "password": "short"}, http.StatusUnprocessableEntity, "validation"},
		{"no token", map[string]any{"password": "a new password"}, http.StatusUnprocessableEntity, "validation"},
		{"unknown member", map[string]any{"token": token, "password": "a new password", "email": u.Email}, http.StatusBadRequest, "bad-request"},
	} {
		r := a.do("POST", "/v1/auth/password-reset/confirm", tt.body)
		wantProblem(t, r, tt.status, tt.kind)
		if strings.Contains(string(r.Body), u.Email) {
			t.Errorf("%s: the answer names the account: %s", tt.name, r.Body)
		}
	}
	// Expired: an hour and a minute after the claim.
	clk.advance(jobboard.PasswordResetTokenTTL + time.Minute)
	wantProblem(t, a.resetPassword(token, "a new password"), http.StatusGone, "password-reset-token-expired")
	clk.advance(-(jobboard.PasswordResetTokenTTL + time.Minute))
	a.login(u.Email, "correct horse battery") // nothing changed

	r := a.resetPassword(token, "a new password")
	want(t, r, http.StatusOK)
	got := decodeAs[map[string]any](t, r)
	if got["id"] != float64(u.ID) || got["email_verified"] != true || got["token"] != nil || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("reset answered %s (Cache-Control %q); want the account, verified, no session, no-store", r.Body, r.Header.Get("Cache-Control"))
	}
	wantProblem(t, a.do("POST", "/v1/auth/login", map[string]any{"email": u.Email, "password": "correct horse battery"}),
		http.StatusUnauthorized, "invalid-credentials")
	a.login(u.Email, "a new password")
	if !a.me(user{Token: a.login(u.Email, "a new password")}).EmailVerified {
		t.Fatal("the reset did not verify the address")
	}
	// Single use.
	wantProblem(t, a.resetPassword(token, "yet another password"), http.StatusGone, "password-reset-token-used")
	a.login(u.Email, "a new password")
}

// One reset ends every reset link sent before it: a second link, asked for
// before the first was used, no longer works; one asked for after it does.
func TestPasswordResetEndsEarlierLinks(t *testing.T) {
	t.Parallel()
	a, clk := newClockedAPI(t)
	u := a.register(jobboard.RoleCandidate)
	want(t, a.requestReset(u.Email), http.StatusAccepted)
	first := a.resetToken(u)
	clk.advance(time.Minute)
	want(t, a.requestReset(u.Email), http.StatusAccepted)
	second := a.resetToken(u)
	if first == second {
		t.Fatal("two requests, one token")
	}
	want(t, a.resetPassword(second, "second password"), http.StatusOK)
	wantProblem(t, a.resetPassword(first, "first password"), http.StatusGone, "password-reset-token-used")
	a.login(u.Email, "second password")

	clk.advance(time.Minute)
	want(t, a.requestReset(u.Email), http.StatusAccepted)
	want(t, a.resetPassword(a.resetToken(u), "third password"), http.StatusOK)
	a.login(u.Email, "third password")
}

// The signed-in requests a session may make, each refused (401,
// invalid_token) once the account's password has been reset, whatever
// the session: the route table checks the session of every request that
// carries a token.
func TestPasswordResetEndsSessions(t *testing.T) {
	t.Parallel()
	a, clk := newClockedAPI(t)
	w := a.world()
	closed := a.job(w.employer, w.company.ID, "Closed Role")
	want(t, a.do("PATCH", fmt.Sprintf("/v1/jobs/%d", closed.ID), map[string]any{"status": "closed"}, as(w.employer)), http.StatusOK)
	other := a.job(w.employer, w.company.ID, "Another Role")
	signedIn := func(u user) []struct{ method, path string } {
		if u.Role == jobboard.RoleCandidate {
			return []struct{ method, path string }{
				{"GET", "/v1/me"},
				{"GET", "/v1/me/applications"},
				{"GET", fmt.Sprintf("/v1/applications/%d", w.application.ID)},
				{"GET", fmt.Sprintf("/v1/applications/%d/history", w.application.ID)},
				{"PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID)},
				{"POST", fmt.Sprintf("/v1/jobs/%d/applications", other.ID)},
			}
		}
		return []struct{ method, path string }{
			{"GET", "/v1/me"},
			{"GET", fmt.Sprintf("/v1/applications/%d", w.application.ID)},
			{"GET", fmt.Sprintf("/v1/applications/%d/history", w.application.ID)},
			{"GET", fmt.Sprintf("/v1/jobs/%d/applications", w.job.ID)},
			{"PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID)},
			{"PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID)},
			{"POST", fmt.Sprintf("/v1/companies/%d/jobs", w.company.ID)},
			{"POST", "/v1/companies"},
		}
	}
	body := func(method, path string) any {
		switch {
		case strings.HasPrefix(path, "/v1/applications/") && method == "PATCH":
			return map[string]any{"status": "withdrawn"}
		case strings.HasPrefix(path, "/v1/jobs/") && method == "PATCH":
			return map[string]any{"title": "Renamed"}
		case strings.HasSuffix(path, "/applications") && method == "POST":
			return map[string]any{"cover_letter": "Hello"}
		case strings.HasSuffix(path, "/jobs"):
			return jobInput("Posted")
		case path == "/v1/companies":
			return map[string]any{"name": "Another company"}
		}
		return nil
	}
	for _, u := range []user{w.candidate, w.employer} {
		// A second session of the same account, from a login.
		second := user{ID: u.ID, Email: u.Email, Role: u.Role, Token: a.login(u.Email, "correct horse battery")}
		clk.advance(time.Minute)
		want(t, a.requestReset(u.Email), http.StatusAccepted)
		want(t, a.resetPassword(a.resetToken(u), "brand new password"), http.StatusOK)

		before, jobsBefore := a.counts(), a.jobsFingerprint()
		for _, session := range []user{u, second} {
			for _, rq := range signedIn(u) {
				r := a.do(rq.method, rq.path, body(rq.method, rq.path), as(session))
				wantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
				if got := r.Header.Get("WWW-Authenticate"); !strings.Contains(got, `error="invalid_token"`) {
					t.Errorf("%s %s: WWW-Authenticate %q, want invalid_token", rq.method, rq.path, got)
				}
			}
			// A public read with the old token is refused too (as with an
			// expired one), so the closed job stays hidden from it; without
			// a token it answers as to anyone.
			if u.Role == jobboard.RoleEmployer {
				wantEndedSession(t, "GET a closed job", a.do("GET", fmt.Sprintf("/v1/jobs/%d", closed.ID), nil, as(session)))
				wantEndedSession(t, "GET the company's jobs", a.do("GET", fmt.Sprintf("/v1/jobs?company_id=%d", w.company.ID), nil, as(session)))
				wantProblem(t, a.do("GET", fmt.Sprintf("/v1/jobs/%d", closed.ID), nil), http.StatusNotFound, "not-found")
			}
		}
		if after := a.counts(); !mapsEqual(before, after) || a.jobsFingerprint() != jobsBefore {
			t.Fatalf("ended sessions changed rows: %v → %v", before, after)
		}
		// A session from the new password works again.
		fresh := user{ID: u.ID, Role: u.Role, Token: a.login(u.Email, "brand new password")}
		want(t, a.do("GET", fmt.Sprintf("/v1/applications/%d", w.application.ID), nil, as(fresh)), http.StatusOK)
		if u.Role == jobboard.RoleEmployer {
			want(t, a.do("GET", fmt.Sprintf("/v1/jobs/%d", closed.ID), nil, as(fresh)), http.StatusOK)
		}
	}
}

// pausingLogins holds a login after it has read the account's password
// hash, until the test lets it go: a login in flight while a reset
// commits.
type pausingLogins struct {
	jobboard.UserStore
	read    chan struct{}
	release chan struct{}
}

func (p *pausingLogins) UserByEmail(ctx context.Context, email string) (jobboard.User, string, error) {
	u, hash, err := p.UserStore.UserByEmail(ctx, email)
	p.read <- struct{}{}
	<-p.release
	return u, hash, err
}

// A login that checked the old password while the reset committed gets a
// token made after the reset; the session is over all the same, because
// it carries the password it was issued under, not when its token was
// made.
func TestLoginInFlightDuringResetGetsAnEndedSession(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	u := a.register(jobboard.RoleCandidate)
	pause := &pausingLogins{UserStore: a.db, read: make(chan struct{}), release: make(chan struct{})}
	slow := newAPIOn(t, a.db, func(c *httpapi.Config) { c.Users = pause })

	login := make(chan response, 1)
	go func() {
		login <- slow.do("POST", "/v1/auth/login", map[string]any{"email": u.Email, "password": "correct horse battery"})
	}()
	<-pause.read
	want(t, a.requestReset(u.Email), http.StatusAccepted)
	want(t, a.resetPassword(a.resetToken(u), "brand new password"), http.StatusOK)
	close(pause.release)
	r := <-login
	want(t, r, http.StatusOK) // the old password was right when it was checked
	late := decodeAs[struct {
		Token string `json:"token"`
	}](t, r).Token
	wantProblem(t, a.do("GET", "/v1/me", nil, bearer(late)), http.StatusUnauthorized, "unauthenticated")
	wantProblem(t, a.do("GET", "/v1/me/applications", nil, bearer(late)), http.StatusUnauthorized, "unauthenticated")
}

// A squatted address: someone registered it first (unverified, with their
// password) and applied with it. Its owner asks for a reset, gets the
// link (the email goes to the address), and sets a password: the
// squatter's sessions and password stop working, the address is verified,
// and the owner sees, and can withdraw, what was done in their name.
func TestSquattedAddressIsRecoveredByItsOwner(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	owner := fmt.Sprintf("owner-%d@example.com", emailSeq.Add(1))
	r := a.do("POST", "/v1/auth/register", map[string]any{
		"email": owner, "password": "squatter's password", "name": "Not The Owner", "role": "candidate"})
	want(t, r, http.StatusCreated)
	s := decodeAs[struct {
		User  jobboard.User `json:"user"`
		Token string        `json:"token"`
	}](t, r)
	squatter := user{ID: s.User.ID, Email: owner, Token: s.Token, Role: jobboard.RoleCandidate}
	app := a.apply(squatter, w.job.ID)
	// The owner cannot register the address.
	wantProblem(t, a.do("POST", "/v1/auth/register", map[string]any{
		"email": owner, "password": "owner's password", "name": "Owner", "role": "candidate"}), http.StatusConflict, "email-taken")

	want(t, a.requestReset(owner), http.StatusAccepted)
	want(t, a.resetPassword(a.resetToken(squatter), "owner's password"), http.StatusOK)

	wantProblem(t, a.do("GET", "/v1/me", nil, as(squatter)), http.StatusUnauthorized, "unauthenticated")
	wantProblem(t, a.do("GET", fmt.Sprintf("/v1/applications/%d", app.ID), nil, as(squatter)), http.StatusUnauthorized, "unauthenticated")
	wantProblem(t, a.do("POST", "/v1/auth/login", map[string]any{"email": owner, "password": "squatter's password"}),
		http.StatusUnauthorized, "invalid-credentials")

	ownerSession := user{ID: squatter.ID, Email: owner, Role: jobboard.RoleCandidate, Token: a.login(owner, "owner's password")}
	if me := a.me(ownerSession); !me.EmailVerified || me.Email != owner {
		t.Fatalf("owner's account %+v; want %s, verified", me, owner)
	}
	r = a.do("GET", "/v1/me/applications", nil, as(ownerSession))
	want(t, r, http.StatusOK)
	if !strings.Contains(string(r.Body), fmt.Sprintf(`"id":%d`, app.ID)) {
		t.Fatalf("the owner does not see the application made in their name: %s", r.Body)
	}
	want(t, a.do("PATCH", fmt.Sprintf("/v1/applications/%d", app.ID), map[string]any{"status": "withdrawn"}, as(ownerSession)), http.StatusOK)
}

// Neither reset endpoint stores an answer for an Idempotency-Key: the same
// key twice runs twice (the second request is counted against the bounds
// like any other), nothing is stored, nothing is replayed; a malformed key
// is still refused.
func TestPasswordResetTakesNoIdempotencyKey(t *testing.T) {
	t.Parallel()
	a, clk := newClockedAPI(t)
	u := a.register(jobboard.RoleCandidate)
	key := newKey()
	for i := 1; i <= 2; i++ {
		r := a.requestReset(u.Email, withKey(key))
		want(t, r, http.StatusAccepted)
		if r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatal("a reset request was replayed")
		}
		if n := a.resetEvents(); n != i {
			t.Fatalf("%d reset events after request %d with one key, want %d", n, i, i)
		}
		clk.advance(time.Minute)
	}
	token := a.resetToken(u)
	want(t, a.do("POST", "/v1/auth/password-reset/confirm", map[string]any{"token": token, "password": "a new password"}, withKey(key)), http.StatusOK)
	r := a.do("POST", "/v1/auth/password-reset/confirm", map[string]any{"token": token, "password": "a new password"}, withKey(key))
	wantProblem(t, r, http.StatusGone, "password-reset-token-used")
	if n := countRows(t, a, "idempotency_keys"); n != 0 {
		t.Fatalf("%d answers stored for keys, want none", n)
	}
	wantProblem(t, a.requestReset(u.Email, withKey("short")), http.StatusBadRequest, "bad-request")
}

// Two resets with one token at once: one sets its password, the other is
// told the token is used; the password is the winner's.
func TestPasswordResetRace(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	u := a.register(jobboard.RoleCandidate)
	want(t, a.requestReset(u.Email), http.StatusAccepted)
	token := a.resetToken(u)
	results := make(chan response, 2)
	for _, pw := range []string{"first password", "second password"} {
		go func() { results <- a.resetPassword(token, pw) }()
	}
	var statuses []int
	for range 2 {
		statuses = append(statuses, (<-results).Status)
	}
	slices.Sort(statuses)
	if !slices.Equal(statuses, []int{http.StatusOK, http.StatusGone}) {
		t.Fatalf("statuses %v, want one 200 and one 410", statuses)
	}
	first := a.do("POST", "/v1/auth/login", map[string]any{"email": u.Email, "password": "first password"}).Status
	second := a.do("POST", "/v1/auth/login", map[string]any{"email": u.Email, "password": "second password"}).Status
	if (first == http.StatusOK) == (second == http.StatusOK) {
		t.Fatalf("logins with the two passwords: %d and %d; want exactly one to work", first, second)
	}
}
