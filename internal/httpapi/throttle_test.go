package httpapi_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// statusCounts sends n requests at once (each built by send(i)) and counts
// their statuses.
func statusCounts(n int, send func(i int) response) map[int]int {
	statuses := make(chan int, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			statuses <- send(i).Status
		})
	}
	close(start)
	wg.Wait()
	close(statuses)
	counts := map[int]int{}
	for s := range statuses {
		counts[s]++
	}
	return counts
}

// A stranger's wrong passwords block the stranger's client for that
// account, not the owner: while a burst of wrong passwords from one client
// runs, the owner's correct logins from their own network, one after the
// other, all succeed. The stranger's own client stays blocked, and writing
// the owner's address into a forwarded-for header changes nothing.
func TestStrangerCannotLockTheOwnerOut(t *testing.T) {
	t.Parallel()
	a, _ := newClockedAPI(t) // the blocks stay as the counts set them, however slow the machine
	owner := a.register(jobboard.RoleCandidate)
	const (
		stranger   = "198.51.100.23"
		ownersNet  = "203.0.113.77"
		wrongTries = 30
		ownerTries = 10
	)
	login := func(password, client string, opts ...reqOption) response {
		return a.do("POST", "/v1/auth/login", map[string]any{"email": owner.Email, "password": password}, append(opts, from(client))...)
	}
	var (
		strangers map[int]int
		done      = make(chan struct{})
	)
	go func() {
		defer close(done)
		strangers = statusCounts(wrongTries, func(int) response { return login("wrong password", stranger) })
	}()
	owners := map[int]int{}
	for range ownerTries {
		owners[login("correct horse battery", ownersNet).Status]++
	}
	<-done
	// 5 of the stranger's are checked (401), the rest refused (429); every
	// one of the owner's succeeds.
	free := jobboard.DefaultLoginPolicy.FreeAttempts
	if strangers[http.StatusUnauthorized] != free || strangers[http.StatusTooManyRequests] != wrongTries-free || len(strangers) != 2 {
		t.Errorf("the stranger's %d wrong passwords at once: %v; want %d × 401, the rest 429", wrongTries, strangers, free)
	}
	if owners[http.StatusOK] != ownerTries {
		t.Errorf("the owner's %d logins meanwhile: %v; want all 200", ownerTries, owners)
	}
	wantProblem(t, login("correct horse battery", stranger), http.StatusTooManyRequests, "too-many-attempts")
	wantProblem(t, login("correct horse battery", stranger, header("X-Forwarded-For", ownersNet), header("Forwarded", "for="+ownersNet)),
		http.StatusTooManyRequests, "too-many-attempts")
	// The address is folded as before: case, white space and look-alikes
	// reach the same count.
	r := a.do("POST", "/v1/auth/login", map[string]any{"email": "  " + strings.ToUpper(owner.Email) + " ", "password": "x"}, from(stranger))
	wantProblem(t, r, http.StatusTooManyRequests, "too-many-attempts")
	want(t, login("correct horse battery", ownersNet), http.StatusOK)
	// Another address of the owner's /64 is the same IPv6 client; another
	// /64 is another client.
	for range jobboard.DefaultLoginPolicy.FreeAttempts {
		wantProblem(t, login("wrong", "2001:db8:1:2::1"), http.StatusUnauthorized, "invalid-credentials")
	}
	wantProblem(t, login("correct horse battery", "2001:db8:1:2:ffff::9"), http.StatusTooManyRequests, "too-many-attempts")
	want(t, login("correct horse battery", "2001:db8:1:3::1"), http.StatusOK)
}

// One password sprayed from one client over 50 addresses at once, existing
// or not: the client's free attempts are checked, the rest refused before
// any hashing. Another client is not affected, and the blocked client's
// own good password is refused too until the block ends (the price of a
// shared limit, see docs/security.md).
func TestSprayingFromOneClientIsLimited(t *testing.T) {
	t.Parallel()
	a, _ := newClockedAPI(t) // the blocks stay as the counts set them, however slow the machine
	var accounts []user
	for range 5 {
		accounts = append(accounts, a.register(jobboard.RoleCandidate))
	}
	const sprayer, addresses = "192.0.2.150", 50
	counts := statusCounts(addresses, func(i int) response {
		email := fmt.Sprintf("sprayed%d@example.com", i)
		if i < len(accounts) {
			email = accounts[i].Email
		}
		return a.do("POST", "/v1/auth/login", map[string]any{"email": email, "password": "Summer2026!"}, from(sprayer))
	})
	free := jobboard.DefaultClientPolicy.FreeAttempts
	if counts[http.StatusUnauthorized] != free || counts[http.StatusTooManyRequests] != addresses-free || len(counts) != 2 {
		t.Fatalf("%d addresses sprayed at once: %v; want %d × 401 and %d × 429", addresses, counts, free, addresses-free)
	}
	r := a.do("POST", "/v1/auth/login", map[string]any{"email": accounts[0].Email, "password": "correct horse battery"}, from(sprayer))
	wantProblem(t, r, http.StatusTooManyRequests, "too-many-attempts")
	if secs, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || secs < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	wantProblem(t, a.do("POST", "/v1/auth/login", map[string]any{"email": "sprayed1@example.com", "password": "Summer2026!"}, from("192.0.2.151")),
		http.StatusUnauthorized, "invalid-credentials")
	want(t, a.do("POST", "/v1/auth/login", map[string]any{"email": accounts[0].Email, "password": "correct horse battery"}, from("192.0.2.151")), http.StatusOK)
}

// Successes do not add up to a block: a client whose many users sign in
// (an office behind one address) is never refused for it, since each
// success takes its own attempt back.
func TestSuccessesFromOneClientDoNotBlockIt(t *testing.T) {
	t.Parallel()
	a, _ := newClockedAPI(t) // the blocks stay as the counts set them, however slow the machine
	u := a.register(jobboard.RoleEmployer)
	const office = "192.0.2.200"
	for i := range 3 * jobboard.DefaultClientPolicy.FreeAttempts {
		r := a.do("POST", "/v1/auth/login", map[string]any{"email": u.Email, "password": "correct horse battery"}, from(office))
		if r.Status != http.StatusOK {
			t.Fatalf("login %d from one client: %s", i, r)
		}
	}
}

// Verifying an email address is limited per client like logins: failed
// attempts count (a success takes its own back); past the client's free
// attempts the answer is 429 with Retry-After, before any lookup, and
// other clients are not affected.
func TestVerifyEmailIsLimitedPerClient(t *testing.T) {
	t.Parallel()
	a, _ := newClockedAPI(t) // the blocks stay as the counts set them, however slow the machine
	u := a.register(jobboard.RoleCandidate)
	token := a.verificationToken(u)
	const client = "192.0.2.77"
	verify := func(token, client string) response {
		return a.do("POST", "/v1/auth/verify-email", map[string]any{"token": token}, from(client))
	}
	want(t, verify(token, client), http.StatusOK)
	bad := strings.Repeat("A", len(token))
	counts := statusCounts(jobboard.DefaultClientPolicy.FreeAttempts+10, func(int) response { return verify(bad, client) })
	if counts[http.StatusBadRequest] != jobboard.DefaultClientPolicy.FreeAttempts || counts[http.StatusTooManyRequests] != 10 {
		t.Fatalf("statuses %v; want %d × 400 and 10 × 429", counts, jobboard.DefaultClientPolicy.FreeAttempts)
	}
	r := verify(bad, client)
	wantProblem(t, r, http.StatusTooManyRequests, "too-many-attempts")
	if r.Header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After")
	}
	wantProblem(t, verify(bad, "192.0.2.78"), http.StatusBadRequest, "invalid-verification-token")
}
