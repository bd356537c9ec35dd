package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// withKey sends an Idempotency-Key.
func withKey(key string) reqOption { return header("Idempotency-Key", key) }

// newKey is a fresh key of 26 random characters.
func newKey() string { return rand.Text() }

// wantReplay fails unless retry is first's stored answer, marked replayed.
func wantReplay(tb testing.TB, first, retry response) {
	tb.Helper()
	if first.Header.Get("Idempotent-Replayed") != "" {
		tb.Fatalf("first answer marked replayed: %v", first.Header)
	}
	if retry.Header.Get("Idempotent-Replayed") != "true" {
		tb.Fatalf("retry not marked replayed: %s %v", retry, retry.Header)
	}
	if retry.Status != first.Status || !bytes.Equal(retry.Body, first.Body) {
		tb.Fatalf("retry answered %s\nfirst answered %s", retry, first)
	}
	for _, h := range []string{"Location", "ETag", "Content-Type"} {
		if retry.Header.Get(h) != first.Header.Get(h) {
			tb.Fatalf("%s: retry %q, first %q", h, retry.Header.Get(h), first.Header.Get(h))
		}
	}
}

// storedAnswers counts the rows of idempotency_keys.
func (a *api) storedAnswers() int {
	a.t.Helper()
	var n int
	if err := a.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_keys").Scan(&n); err != nil {
		a.t.Fatal(err)
	}
	return n
}

// A retry of every kind of write with the same key gets the first answer,
// byte for byte, and writes nothing: one row, one history entry, one event.
func TestIdempotentRetryReplaysEveryWrite(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	writes := []struct {
		name, method, path string
		body               any
		as                 user
		opts               []reqOption
		status             int
	}{
		{"create company", "POST", "/v1/companies", map[string]any{"name": "Keyed Inc"}, w.employer, nil, http.StatusCreated},
		{"post job", "POST", fmt.Sprintf("/v1/companies/%d/jobs", w.company.ID), jobInput("Keyed job"), w.employer, nil, http.StatusCreated},
		{"patch job", "PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), map[string]any{"title": "Renamed"}, w.employer, nil, http.StatusOK},
		{"apply", "POST", fmt.Sprintf("/v1/jobs/%d/applications", w.job.ID), map[string]any{"cover_letter": "Hi"}, w.otherCandidate, nil, http.StatusCreated},
		{"change status", "PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID), map[string]any{"status": "reviewing"}, w.employer,
			[]reqOption{header("If-Match", `"1"`)}, http.StatusOK},
	}
	for _, tt := range writes {
		key := newKey()
		opts := append([]reqOption{as(tt.as), withKey(key)}, tt.opts...)
		first := a.do(tt.method, tt.path, tt.body, opts...)
		want(t, first, tt.status)
		counts, rows := a.counts(), a.jobsFingerprint()
		retry := a.do(tt.method, tt.path, tt.body, opts...)
		wantReplay(t, first, retry)
		if got := a.counts(); fmt.Sprint(got) != fmt.Sprint(counts) {
			t.Fatalf("%s: the retry wrote: %v, then %v", tt.name, counts, got)
		}
		if got := a.jobsFingerprint(); got != rows {
			t.Fatalf("%s: the retry changed rows", tt.name)
		}
	}
	if n := a.storedAnswers(); n != len(writes) {
		t.Fatalf("stored answers = %d, want %d", n, len(writes))
	}
	// Without a key, the same request is a new request, as before.
	r := a.do("POST", "/v1/companies", map[string]any{"name": "Keyed Inc"}, as(w.employer))
	want(t, r, http.StatusCreated)
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("an unkeyed request was replayed")
	}
}

// The same key with another request (body, path, If-Match) answers 422 and
// changes nothing; the first answer stays replayable.
func TestIdempotencyKeyReusedWithAnotherRequest(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	key := newKey()
	path := fmt.Sprintf("/v1/applications/%d", w.application.ID)
	first := a.do("PATCH", path, map[string]any{"status": "reviewing"}, as(w.employer), withKey(key))
	want(t, first, http.StatusOK)
	before, rows := a.counts(), a.jobsFingerprint()
	others := []struct {
		name, method, path string
		body               any
		opts               []reqOption
	}{
		{"other body", "PATCH", path, map[string]any{"status": "rejected"}, nil},
		{"same body, other spacing", "PATCH", path, raw(`{"status":  "reviewing"}`), nil},
		{"other path", "PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), map[string]any{"status": "reviewing"}, nil},
		{"other method and path", "POST", "/v1/companies", map[string]any{"name": "X"}, nil},
		{"with If-Match", "PATCH", path, map[string]any{"status": "reviewing"}, []reqOption{header("If-Match", `"1"`)}},
	}
	for _, o := range others {
		r := a.do(o.method, o.path, o.body, append([]reqOption{as(w.employer), withKey(key)}, o.opts...)...)
		p := wantProblem(t, r, http.StatusUnprocessableEntity, "idempotency-key-reused")
		if !strings.Contains(p.Detail, "Idempotency-Key") {
			t.Errorf("%s: detail %q", o.name, p.Detail)
		}
	}
	if fmt.Sprint(a.counts()) != fmt.Sprint(before) || a.jobsFingerprint() != rows {
		t.Fatal("a refused reuse changed something")
	}
	wantReplay(t, first, a.do("PATCH", path, map[string]any{"status": "reviewing"}, as(w.employer), withKey(key)))
}

// heldCompanies holds the first successful CreateCompany of a keyed write,
// after its write and before its commit, until released: a first request
// still running.
type heldCompanies struct {
	holding       atomic.Bool
	held, release chan struct{}
}

type heldWrites struct {
	jobboard.Writes
	h *heldCompanies
}

func (w heldWrites) CreateCompany(ctx context.Context, a jobboard.Actor, nc jobboard.NewCompany) (jobboard.Company, error) {
	c, err := w.Writes.CreateCompany(ctx, a, nc)
	if err == nil && w.h.holding.CompareAndSwap(false, true) {
		close(w.h.held)
		<-w.h.release
	}
	return c, err
}

// While the first request with a key runs, every other request with it is
// answered 409 at once (with Retry-After), whatever its body; once the first
// has committed, a retry gets its answer.
func TestIdempotencyRetryWhileFirstRuns(t *testing.T) {
	t.Parallel()
	hold := &heldCompanies{held: make(chan struct{}), release: make(chan struct{})}
	a := newAPI(t, wrapWrites(func(st jobboard.Writes) jobboard.Writes { return heldWrites{st, hold} }))
	employer := a.register(jobboard.RoleEmployer)
	key := newKey()
	body := map[string]any{"name": "Slow Inc"}

	firstDone := make(chan response, 1)
	go func() { firstDone <- a.do("POST", "/v1/companies", body, as(employer), withKey(key)) }()
	<-hold.held
	for i, b := range []any{body, body, map[string]any{"name": "Other body"}} {
		r := a.do("POST", "/v1/companies", b, as(employer), withKey(key))
		wantProblem(t, r, http.StatusConflict, "idempotency-key-in-use")
		if got := r.Header.Get("Retry-After"); got != "1" {
			t.Fatalf("retry %d: Retry-After %q", i, got)
		}
	}
	close(hold.release)
	first := <-firstDone
	want(t, first, http.StatusCreated)
	wantReplay(t, first, a.do("POST", "/v1/companies", body, as(employer), withKey(key)))
	if n := a.counts()["companies"]; n != 1 {
		t.Fatalf("companies = %d, want 1", n)
	}
}

// Eight simultaneous requests with one key make exactly one company; every
// other answer is that company, replayed, or a 409.
func TestIdempotencyConcurrentRequestsWithOneKey(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	key := newKey()
	const n = 8
	results := make([]response, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = a.do("POST", "/v1/companies", map[string]any{"name": "Race Inc"}, as(employer), withKey(key))
		}()
	}
	close(start)
	wg.Wait()
	if c := a.counts()["companies"]; c != 1 {
		t.Fatalf("companies = %d, want 1", c)
	}
	var firsts, replays, conflicts int
	var body []byte
	for _, r := range results {
		switch {
		case r.Status == http.StatusCreated && r.Header.Get("Idempotent-Replayed") == "":
			firsts++
		case r.Status == http.StatusCreated:
			replays++
		default:
			wantProblem(t, r, http.StatusConflict, "idempotency-key-in-use")
			conflicts++
			continue
		}
		if body != nil && !bytes.Equal(body, r.Body) {
			t.Fatalf("two different 201 bodies: %s and %s", body, r.Body)
		}
		body = r.Body
	}
	if firsts != 1 || firsts+replays+conflicts != n {
		t.Fatalf("%d first answers, %d replays, %d conflicts; want exactly one first", firsts, replays, conflicts)
	}
	t.Logf("%d replays, %d conflicts", replays, conflicts)
}

// Keys are scoped to the user: two users may use the same key for the same
// request and each gets their own resource and answer.
func TestIdempotencyKeysOfTwoUsersDoNotCollide(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	alice, bob := a.register(jobboard.RoleEmployer), a.register(jobboard.RoleEmployer)
	key := newKey()
	body := map[string]any{"name": "Same Name"}
	ra := a.do("POST", "/v1/companies", body, as(alice), withKey(key))
	rb := a.do("POST", "/v1/companies", body, as(bob), withKey(key))
	want(t, ra, http.StatusCreated)
	want(t, rb, http.StatusCreated)
	ca, cb := decodeAs[jobboard.Company](t, ra), decodeAs[jobboard.Company](t, rb)
	if rb.Header.Get("Idempotent-Replayed") != "" || ca.ID == cb.ID || ca.CreatedBy != alice.ID || cb.CreatedBy != bob.ID {
		t.Fatalf("bob got alice's answer: %+v, %+v", ca, cb)
	}
	wantReplay(t, ra, a.do("POST", "/v1/companies", body, as(alice), withKey(key)))
	wantReplay(t, rb, a.do("POST", "/v1/companies", body, as(bob), withKey(key)))
	// Bob reusing the key for another request is refused on his own key;
	// it says nothing about alice's.
	wantProblem(t, a.do("POST", "/v1/companies", map[string]any{"name": "Other"}, as(bob), withKey(key)),
		http.StatusUnprocessableEntity, "idempotency-key-reused")
	// Without valid credentials there is no scope: the handler answers 401.
	r := a.do("POST", "/v1/companies", body, withKey(key))
	wantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
	r = a.do("POST", "/v1/companies", body, bearer("not-a-token"), withKey(key))
	wantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
	if c := a.counts()["companies"]; c != 2 {
		t.Fatalf("companies = %d, want 2", c)
	}
}

// panickingRelay fails hard on the first status event, after noting
// whether the event's outbox row was committed by then (visible to another
// connection). It passes the registrations' verification events.
type panickingRelay struct {
	a         *api
	calls     atomic.Int32
	committed atomic.Bool
}

func (p *panickingRelay) Relay(ctx context.Context, ev jobboard.Event) error {
	if ev.Type != jobboard.EventTypeStatusChanged {
		return nil
	}
	p.calls.Add(1)
	var n int
	if err := p.a.db.Pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE event_id = $1", ev.EventID).Scan(&n); err != nil {
		return err
	}
	p.committed.Store(n == 1)
	panic("injected crash after the commit")
}

// A crash after the commit and before the answer (the relay panics): the
// client gets a 500, the change and its event are committed, and the retry
// replays the answer instead of changing the status a second time.
func TestIdempotencyCrashAfterCommitThenRetry(t *testing.T) {
	t.Parallel()
	relay := &panickingRelay{}
	a := newAPI(t, func(c *httpapi.Config) { c.Relay = relay })
	relay.a = a
	w := a.world()
	key := newKey()
	path := fmt.Sprintf("/v1/applications/%d", w.application.ID)
	body := map[string]any{"status": "reviewing"}

	crashed := a.do("PATCH", path, body, as(w.employer), withKey(key))
	wantProblem(t, crashed, http.StatusInternalServerError, "internal")
	if relay.calls.Load() != 1 || !relay.committed.Load() {
		t.Fatalf("relay calls %d, row committed when relayed: %v", relay.calls.Load(), relay.committed.Load())
	}
	retry := a.do("PATCH", path, body, as(w.employer), withKey(key))
	want(t, retry, http.StatusOK)
	if retry.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("the retry ran again instead of replaying")
	}
	app := decodeAs[jobboard.Application](t, retry)
	if app.Status != jobboard.StatusReviewing || app.Version != 2 || retry.Header.Get("ETag") != `"2"` {
		t.Fatalf("replayed %+v, ETag %s", app, retry.Header.Get("ETag"))
	}
	c := a.counts()
	if c["application_status_history"] != 1 || a.statusEvents() != 1 || relay.calls.Load() != 1 {
		t.Fatalf("history %d, status events %d, relay calls %d; want 1 each", c["application_status_history"], a.statusEvents(), relay.calls.Load())
	}
}

// loseAnswer delivers requests but loses the first answer on its way back,
// as a timeout at the client after the server committed.
type loseAnswer struct {
	next http.RoundTripper
	lost atomic.Bool
}

var errAnswerLost = errors.New("injected: connection reset before the answer arrived")

func (l *loseAnswer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err == nil && l.lost.CompareAndSwap(false, true) {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return nil, errAnswerLost
	}
	return resp, err
}

// A POST whose answer is lost: the retry with its key gets the answer, and
// there is one job, not two.
func TestIdempotencyAnswerLostThenRetry(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	company := a.company(employer)
	jobs := a.counts()["jobs"]
	client := &http.Client{Transport: &loseAnswer{next: a.client.Transport}}
	key := newKey()
	body, _ := json.Marshal(jobInput("Flaky network"))
	send := func() (*http.Response, error) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost,
			fmt.Sprintf("%s/v1/companies/%d/jobs", a.base, company.ID), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+employer.Token)
		req.Header.Set("Idempotency-Key", key)
		return client.Do(req)
	}
	if resp, err := send(); !errors.Is(err, errAnswerLost) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("first attempt: %v, want the lost answer", err)
	}
	resp, err := send()
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d, replayed %q", resp.StatusCode, resp.Header.Get("Idempotent-Replayed"))
	}
	var j jobboard.Job
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil || j.Title != "Flaky network" {
		t.Fatalf("retry body: %+v, %v", j, err)
	}
	if n := a.counts()["jobs"]; n != jobs+1 {
		t.Fatalf("jobs = %d, want %d", n, jobs+1)
	}
}

// An error answer is not stored: nothing was written, so a retry with the
// same key runs again and may succeed once the cause is gone.
func TestIdempotencyErrorsAreNotStored(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	jobPath := fmt.Sprintf("/v1/jobs/%d", w.job.ID)
	want(t, a.do("PATCH", jobPath, map[string]any{"status": "closed"}, as(w.employer)), http.StatusOK)
	key := newKey()
	applyPath := jobPath + "/applications"
	// A closed job looks missing to a candidate (it is not theirs to see).
	wantProblem(t, a.do("POST", applyPath, map[string]any{}, as(w.otherCandidate), withKey(key)), http.StatusNotFound, "not-found")
	want(t, a.do("PATCH", jobPath, map[string]any{"status": "open"}, as(w.employer)), http.StatusOK)
	r := a.do("POST", applyPath, map[string]any{}, as(w.otherCandidate), withKey(key))
	want(t, r, http.StatusCreated)
	if r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatal("replayed after an error")
	}

	// A validation error, then the corrected request with the same key.
	key = newKey()
	wantProblem(t, a.do("POST", "/v1/companies", map[string]any{"name": ""}, as(w.employer), withKey(key)),
		http.StatusUnprocessableEntity, "validation")
	want(t, a.do("POST", "/v1/companies", map[string]any{"name": "Fixed"}, as(w.employer), withKey(key)), http.StatusCreated)
	if n := a.storedAnswers(); n != 2 {
		t.Fatalf("stored answers = %d, want the two successes", n)
	}
}

// A malformed key answers 400 and changes nothing; a quoted key (the
// draft's structured-field string) is the same key as a bare one.
func TestIdempotencyKeyFormat(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	before := a.counts()
	bad := map[string][]string{
		"too short":       {"fifteen-chars-x"},
		"too long":        {strings.Repeat("k", 256)},
		"space":           {"has a space in it!!"},
		"comma list":      {"aaaaaaaaaaaaaaaa, bbbbbbbbbbbbbbbb"},
		"non-ASCII":       {"schlüssel-schlüssel"},
		"empty quotes":    {`""`},
		"twice":           {"aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa"},
		"quote in middle": {`aaaaaaaa"aaaaaaaa`},
	}
	for name, values := range bad {
		r := a.do("POST", "/v1/companies", map[string]any{"name": "Nope"}, as(employer), func(r *http.Request) {
			for _, v := range values {
				r.Header.Add("Idempotency-Key", v)
			}
		})
		p := wantProblem(t, r, http.StatusBadRequest, "bad-request")
		if f := p.fields(); len(f) != 1 || f[0] != "Idempotency-Key" {
			t.Errorf("%s: fields %v", name, f)
		}
	}
	if fmt.Sprint(a.counts()) != fmt.Sprint(before) {
		t.Fatal("a malformed key wrote something")
	}
	long := strings.Repeat("k", 255)
	first := a.do("POST", "/v1/companies", map[string]any{"name": "Quoted"}, as(employer), withKey(`"`+long+`"`))
	want(t, first, http.StatusCreated)
	wantReplay(t, first, a.do("POST", "/v1/companies", map[string]any{"name": "Quoted"}, as(employer), withKey(long)))
	want(t, a.do("POST", "/v1/companies", map[string]any{"name": "Odd characters"}, as(employer),
		withKey("A-Z_a.z:0~9+/=--------")), http.StatusCreated)

	// Login checks the key and otherwise ignores it: nothing is stored.
	creds := map[string]any{"email": employer.Email, "password": "correct horse battery"}
	wantProblem(t, a.do("POST", "/v1/auth/login", creds, withKey("short")), http.StatusBadRequest, "bad-request")
	key := newKey()
	stored := a.storedAnswers()
	for range 2 {
		r := a.do("POST", "/v1/auth/login", creds, withKey(key))
		want(t, r, http.StatusOK)
		if r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatal("login replayed")
		}
	}
	if a.storedAnswers() != stored {
		t.Fatal("login stored an answer")
	}
}

// Registration takes no Idempotency-Key (docs/api.md): a key is checked
// and otherwise ignored, so one seen or guessed is worth nothing. Guesses
// at another user's registration with that user's key learn nothing: every
// password, the right one included, gets the same 409 email-taken, no
// token, no replay; and they are throttled: each counts as a failed
// attempt of the guesser's client, which is blocked after its free
// attempts, while the owner signs in from elsewhere.
func TestRegistrationKeyIsNoOracle(t *testing.T) {
	t.Parallel()
	a, _ := newClockedAPI(t) // the block stays as the count set it, however slow the machine
	key := newKey()
	const password = "correct horse battery"
	body := func(password string) map[string]any {
		return map[string]any{"email": "victim@example.com", "password": password, "name": "Victim", "role": "candidate"}
	}
	first := a.do("POST", "/v1/auth/register", body(password), withKey(key), from("203.0.113.5"))
	want(t, first, http.StatusCreated)
	var stored int
	if err := a.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM idempotency_keys").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Fatalf("%d answers stored for a registration; want none", stored)
	}

	const attacker = "198.51.100.66"
	var answers []problem
	for i := range jobboard.DefaultClientPolicy.FreeAttempts {
		guess := fmt.Sprintf("guess number %d", i)
		if i == 7 {
			guess = password // the right one learns as little
		}
		r := a.do("POST", "/v1/auth/register", body(guess), withKey(key), from(attacker))
		p := wantProblem(t, r, http.StatusConflict, "email-taken")
		if r.Header.Get("Idempotent-Replayed") != "" || bytes.Contains(r.Body, []byte("token")) {
			t.Fatalf("guess %d was answered with a session: %s %v", i, r.Body, r.Header)
		}
		answers = append(answers, p)
	}
	for i, p := range answers {
		if p.Detail != answers[0].Detail || p.Title != answers[0].Title || len(p.Errors) != 0 {
			t.Fatalf("answer %d differs from the first: %+v / %+v", i, p, answers[0])
		}
	}
	r := a.do("POST", "/v1/auth/register", body(password), withKey(key), from(attacker))
	wantProblem(t, r, http.StatusTooManyRequests, "too-many-attempts")
	if secs, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	// The owner is not slowed: the block is the guesser's client's.
	want(t, a.do("POST", "/v1/auth/login", map[string]any{"email": "victim@example.com", "password": password}, from("203.0.113.5")), http.StatusOK)
	// A malformed key is still refused, before anything else.
	wantProblem(t, a.do("POST", "/v1/auth/register", body(password), withKey("short"), from("203.0.113.9")), http.StatusBadRequest, "bad-request")
	if n := a.counts()["users"]; n != 1 {
		t.Fatalf("users = %d, want 1", n)
	}
}

// After 24 hours a key's answer is gone: the same key makes a new request.
func TestIdempotencyKeyExpires(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	key := newKey()
	body := map[string]any{"name": "Yesterday Inc"}
	first := a.do("POST", "/v1/companies", body, as(employer), withKey(key))
	want(t, first, http.StatusCreated)
	if _, err := a.db.Pool.Exec(context.Background(), "UPDATE idempotency_keys SET created_at = created_at - interval '24 hours 1 second'"); err != nil {
		t.Fatal(err)
	}
	again := a.do("POST", "/v1/companies", body, as(employer), withKey(key))
	want(t, again, http.StatusCreated)
	if again.Header.Get("Idempotent-Replayed") != "" || bytes.Equal(again.Body, first.Body) {
		t.Fatal("an expired key was replayed")
	}
	wantReplay(t, again, a.do("POST", "/v1/companies", body, as(employer), withKey(key)))
	if n := a.counts()["companies"]; n != 2 {
		t.Fatalf("companies = %d, want 2", n)
	}
}

// A keyed retry gets the first answer byte for byte (status, the stored
// header fields, the body), the answers that show a webhook signing
// secret, stored with it sealed, included.
func TestKeyedReplaysAreByteIdentical(t *testing.T) {
	t.Parallel()
	a := newAPI(t, withWebhooks(testSealer(t)))
	w := a.world()
	r := a.do("POST", hooksPath(w.company.ID), map[string]any{"url": "https://hooks.acme.example/in", "event_types": []string{"job.closed"}, "description": "ATS <&> \u00e9"}, as(w.employer))
	want(t, r, http.StatusCreated)
	e := decodeAs[jobboard.WebhookSecretReveal](t, r)
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", hooksPath(w.company.ID), map[string]any{"url": "https://hooks2.acme.example/in", "event_types": []string{"job.closed", "application.submitted"}, "description": "second <one>"}},
		{"POST", hooksPath(w.company.ID, e.ID, "rotate-secret"), map[string]any{"overlap_seconds": 60}},
		{"POST", "/v1/companies", map[string]any{"name": "Byte & Co"}},
		{"PATCH", fmt.Sprintf("/v1/applications/%d", w.application.ID), map[string]any{"status": "reviewing"}},
	} {
		key := withKey("byte-identical-" + strings.NewReplacer("/", "-").Replace(c.method+c.path))
		first := a.do(c.method, c.path, c.body, as(w.employer), key)
		if first.Status/100 != 2 {
			t.Fatalf("%s %s: %s", c.method, c.path, first)
		}
		again := a.do(c.method, c.path, c.body, as(w.employer), key)
		if again.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s %s: not replayed", c.method, c.path)
		}
		if again.Status != first.Status || !bytes.Equal(again.Body, first.Body) {
			t.Errorf("%s %s: the replay differs from the first answer:\n%d %s\n%d %s", c.method, c.path, first.Status, first.Body, again.Status, again.Body)
		}
		for _, h := range []string{"Content-Type", "Location", "ETag"} {
			if again.Header.Get(h) != first.Header.Get(h) {
				t.Errorf("%s %s: %s %q, first %q", c.method, c.path, h, again.Header.Get(h), first.Header.Get(h))
			}
		}
	}
}
