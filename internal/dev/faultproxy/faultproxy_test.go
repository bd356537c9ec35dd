package faultproxy_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/dev/faultproxy"
)

// upstream is a real HTTP server behind the proxy under test: it records
// what reached it and echoes the body.
type upstream struct {
	*httptest.Server
	hits atomic.Int64

	mu   sync.Mutex
	last *http.Request
	body []byte
}

func newUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.last, u.body = r, body
		u.mu.Unlock()
		u.hits.Add(1)
		w.Header().Set("X-Upstream", "yes")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(append([]byte("echo:"), body...))
	}))
	t.Cleanup(u.Close)
	return u
}

func start(t *testing.T, upstreamURL string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(context.Background(), upstreamURL)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// client uses a new connection per request, so that no retry of the Go
// transport on a reused connection can blur the counts.
func client(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DisableKeepAlives: true}}
}

// answer is what a client got back.
type answer struct {
	StatusCode int
	Header     http.Header
}

func post(t *testing.T, c *http.Client, u, body string) (*answer, []byte, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Test", "42")
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &answer{StatusCode: resp.StatusCode, Header: resp.Header}, b, err
}

func wantReset(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("request succeeded, want a connection reset")
	}
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("error = %v, want a connection reset (ECONNRESET), not a clean close", err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPassForwardsRequestAndAnswer(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	if !strings.HasPrefix(p.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %q, want loopback", p.URL)
	}

	resp, body, err := post(t, client(5*time.Second), p.URL+"/v2/email/outbound-emails?x=1", `{"a":1}`)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	if resp.StatusCode != http.StatusCreated || string(body) != `echo:{"a":1}` || resp.Header.Get("X-Upstream") != "yes" {
		t.Errorf("answer = %d %q (X-Upstream %q), want the upstream's 201 echo", resp.StatusCode, body, resp.Header.Get("X-Upstream"))
	}
	up.mu.Lock()
	last, got := up.last, string(up.body)
	up.mu.Unlock()
	if last.Method != http.MethodPost || last.URL.Path != "/v2/email/outbound-emails" || last.URL.RawQuery != "x=1" ||
		last.Header.Get("X-Test") != "42" || got != `{"a":1}` {
		t.Errorf("upstream saw %s %s?%s X-Test=%q body %q", last.Method, last.URL.Path, last.URL.RawQuery, last.Header.Get("X-Test"), got)
	}
	if host := strings.TrimPrefix(p.URL, "http://"); last.Host != host {
		t.Errorf("upstream saw Host %q, want the client's %q", last.Host, host)
	}
	if n := p.Forwarded(); n != 1 {
		t.Errorf("Forwarded = %d, want 1", n)
	}
	if n := p.Count(faultproxy.Pass); n != 1 {
		t.Errorf("Count(Pass) = %d, want 1", n)
	}
}

func TestUpstreamWithPathPrefix(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL+"/prefix/")
	if _, _, err := post(t, client(5*time.Second), p.URL+"/q", "x"); err != nil {
		t.Fatal(err)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	if up.last.URL.Path != "/prefix/q" {
		t.Errorf("upstream path = %q, want /prefix/q", up.last.URL.Path)
	}
}

func TestRefuseResetsBeforeForwarding(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	p.SetFault(faultproxy.Refuse)

	_, _, err := post(t, client(5*time.Second), p.URL+"/", "lost")
	wantReset(t, err)
	if n := up.hits.Load(); n != 0 {
		t.Errorf("upstream hits = %d, want 0", n)
	}
	if n, c := p.Forwarded(), p.Count(faultproxy.Refuse); n != 0 || c != 1 {
		t.Errorf("Forwarded = %d, Count(Refuse) = %d; want 0, 1", n, c)
	}

	p.SetFault(faultproxy.Pass)
	if _, _, err := post(t, client(5*time.Second), p.URL+"/", "ok"); err != nil {
		t.Fatalf("after SetFault(Pass): %v", err)
	}
	if n := up.hits.Load(); n != 1 {
		t.Errorf("upstream hits = %d, want 1", n)
	}
}

func TestResetAfterLosesTheAnswerOnly(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	p.SetFault(faultproxy.ResetAfter)

	_, _, err := post(t, client(5*time.Second), p.URL+"/", "acted")
	wantReset(t, err)
	if n := up.hits.Load(); n != 1 {
		t.Errorf("upstream hits = %d, want 1 (it acted)", n)
	}
	up.mu.Lock()
	if string(up.body) != "acted" {
		t.Errorf("upstream body = %q", up.body)
	}
	up.mu.Unlock()
	if n, c := p.Forwarded(), p.Count(faultproxy.ResetAfter); n != 1 || c != 1 {
		t.Errorf("Forwarded = %d, Count(ResetAfter) = %d; want 1, 1", n, c)
	}
}

func TestHangHoldsUntilTheClientGivesUp(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	p.SetFault(faultproxy.Hang)

	_, _, err := post(t, client(200*time.Millisecond), p.URL+"/", "x")
	var ue *url.Error
	if !errors.As(err, &ue) || !ue.Timeout() {
		t.Fatalf("error = %v, want the client's timeout", err)
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("upstream hits = %d, want 0", n)
	}
	// The proxy lets go of the request once the client has gone.
	eventually(t, "the hanging request to end", func() bool { return p.InFlight() == 0 })
	if n := p.Count(faultproxy.Hang); n != 1 {
		t.Errorf("Count(Hang) = %d, want 1", n)
	}
}

func TestCloseReleasesHangingRequests(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	p.SetFault(faultproxy.Hang)

	done := make(chan error, 1)
	go func() {
		_, _, err := post(t, client(0), p.URL+"/", "x")
		done <- err
	}()
	eventually(t, "the request to hang", func() bool { return p.InFlight() == 1 })
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := p.InFlight(); n != 0 {
		t.Errorf("InFlight after Close = %d, want 0", n)
	}
	if err := <-done; err == nil {
		t.Error("hanging request succeeded after Close")
	}
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, _, err := post(t, client(time.Second), p.URL+"/", "x"); err == nil {
		t.Error("request after Close succeeded")
	}
}

func TestUnavailableAnswers503WithoutForwarding(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	p.SetFault(faultproxy.Unavailable)

	resp, body, err := post(t, client(5*time.Second), p.URL+"/", "x")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || !bytes.Contains(body, []byte("ServiceUnavailable")) {
		t.Errorf("answer = %d %q, want 503 ServiceUnavailable", resp.StatusCode, body)
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("upstream hits = %d, want 0", n)
	}
	if n, c := p.Forwarded(), p.Count(faultproxy.Unavailable); n != 0 || c != 1 {
		t.Errorf("Forwarded = %d, Count(Unavailable) = %d; want 0, 1", n, c)
	}
}

func TestRuleDecidesByBody(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	p.SetFault(faultproxy.Unavailable) // overridden while a rule is set
	var seen atomic.Int64
	p.SetRule(func(r *http.Request, body []byte) faultproxy.Fault {
		seen.Add(1)
		switch {
		case r.URL.Path == "/refuse":
			return faultproxy.Refuse
		case bytes.Contains(body, []byte("ambiguous")):
			return faultproxy.ResetAfter
		}
		return faultproxy.Pass
	})
	c := client(5 * time.Second)

	if resp, _, err := post(t, c, p.URL+"/", "plain"); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("plain: %v", err)
	}
	_, _, err := post(t, c, p.URL+"/refuse", "plain")
	wantReset(t, err)
	_, _, err = post(t, c, p.URL+"/", `{"x":"ambiguous"}`)
	wantReset(t, err)
	if n := up.hits.Load(); n != 2 {
		t.Errorf("upstream hits = %d, want 2 (plain, ambiguous)", n)
	}
	if n := seen.Load(); n != 3 {
		t.Errorf("rule called %d times, want 3", n)
	}

	p.SetRule(nil)
	resp, _, err := post(t, c, p.URL+"/", "plain")
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after SetRule(nil): %v, %v; want SetFault's 503", resp, err)
	}
}

func TestDelayHoldsTheAnswerAfterTheUpstreamActed(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	p.SetDelay(time.Hour)

	_, _, err := post(t, client(200*time.Millisecond), p.URL+"/", "slow")
	var ue *url.Error
	if !errors.As(err, &ue) || !ue.Timeout() {
		t.Fatalf("error = %v, want the client's timeout", err)
	}
	if n := up.hits.Load(); n != 1 {
		t.Errorf("upstream hits = %d, want 1: the delay comes after the upstream acted", n)
	}
	eventually(t, "the delayed request to end", func() bool { return p.InFlight() == 0 })

	p.SetDelay(0)
	if _, _, err := post(t, client(5*time.Second), p.URL+"/", "fast"); err != nil {
		t.Fatalf("after SetDelay(0): %v", err)
	}
}

func TestUpstreamDownAnswers502(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	up.Close()

	resp, _, err := post(t, client(5*time.Second), p.URL+"/", "x")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status = %d, want 502", resp.StatusCode)
	}
	if n := p.Forwarded(); n != 0 {
		t.Errorf("Forwarded = %d, want 0", n)
	}
}

// Many clients while the fault keeps changing: every request is counted
// under exactly one fault, the upstream saw exactly what Forwarded says, and
// each client saw what its fault promises.
func TestConcurrentClientsAndSwitches(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	const clients, each = 8, 25

	stop := make(chan struct{})
	switched := make(chan struct{})
	go func() {
		defer close(switched)
		faults := []faultproxy.Fault{faultproxy.Pass, faultproxy.Unavailable, faultproxy.Refuse, faultproxy.ResetAfter}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			p.SetFault(faults[i%len(faults)])
			time.Sleep(time.Millisecond)
		}
	}()

	var ok, unavailable, resets atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			c := client(5 * time.Second)
			for range each {
				resp, _, err := post(t, c, p.URL+"/", "x")
				switch {
				case err != nil && errors.Is(err, syscall.ECONNRESET):
					resets.Add(1)
				case err != nil:
					t.Errorf("unexpected error: %v", err)
				case resp.StatusCode == http.StatusCreated:
					ok.Add(1)
				case resp.StatusCode == http.StatusServiceUnavailable:
					unavailable.Add(1)
				default:
					t.Errorf("unexpected status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-switched

	total := int64(clients * each)
	var counted int64
	for _, f := range []faultproxy.Fault{faultproxy.Pass, faultproxy.Refuse, faultproxy.ResetAfter, faultproxy.Hang, faultproxy.Unavailable} {
		counted += p.Count(f)
	}
	if counted != total {
		t.Errorf("counts sum to %d, want %d", counted, total)
	}
	if got, want := ok.Load(), p.Count(faultproxy.Pass); got != want {
		t.Errorf("201 answers = %d, Count(Pass) = %d", got, want)
	}
	if got, want := unavailable.Load(), p.Count(faultproxy.Unavailable); got != want {
		t.Errorf("503 answers = %d, Count(Unavailable) = %d", got, want)
	}
	if got, want := resets.Load(), p.Count(faultproxy.Refuse)+p.Count(faultproxy.ResetAfter); got != want {
		t.Errorf("resets = %d, Count(Refuse)+Count(ResetAfter) = %d", got, want)
	}
	if got, want := up.hits.Load(), p.Forwarded(); got != want {
		t.Errorf("upstream hits = %d, Forwarded = %d", got, want)
	}
	if got, want := p.Forwarded(), p.Count(faultproxy.Pass)+p.Count(faultproxy.ResetAfter); got != want {
		t.Errorf("Forwarded = %d, Count(Pass)+Count(ResetAfter) = %d", got, want)
	}
}

func TestStartRefusesBadUpstream(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "127.0.0.1:4566", "ftp://example.com", "http://"} {
		if p, err := faultproxy.Start(context.Background(), u); err == nil {
			_ = p.Close()
			t.Errorf("Start(%q) succeeded", u)
		}
	}
}

func TestFaultNames(t *testing.T) {
	t.Parallel()
	for f, want := range map[faultproxy.Fault]string{
		faultproxy.Pass: "pass", faultproxy.Refuse: "refuse", faultproxy.ResetAfter: "reset_after",
		faultproxy.Hang: "hang", faultproxy.Unavailable: "unavailable", faultproxy.Fault(99): "fault(99)",
	} {
		if got := f.String(); got != want {
			t.Errorf("Fault(%d).String() = %q, want %q", int(f), got, want)
		}
	}
}

func TestUnknownFaultAnswers500(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, up.URL)
	p.SetFault(faultproxy.Fault(99))
	resp, _, err := post(t, client(5*time.Second), p.URL+"/", "x")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusInternalServerError || up.hits.Load() != 0 {
		t.Errorf("status = %d, upstream hits = %d; want 500, 0", resp.StatusCode, up.hits.Load())
	}
}
