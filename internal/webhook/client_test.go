package webhook_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/webhook"
)

// resolver answers each lookup with the next of its answers (the last one
// again once they run out), and counts the lookups: a stand-in for a DNS
// server whose answers change between two lookups of one name.
type resolver struct {
	mu      sync.Mutex
	answers [][]netip.Addr
	lookups int
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := min(r.lookups, len(r.answers)-1)
	r.lookups++
	return r.answers[i], nil
}

func (r *resolver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookups
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParseAddr(s)
	}
	return out
}

// blockedSamples are addresses of every range a webhook must never reach.
var blockedSamples = []string{
	"127.0.0.1", "10.1.2.3", "172.16.5.4", "192.168.0.10", "100.64.1.1", "169.254.169.254", "169.254.170.2",
	"0.0.0.0", "192.0.0.192", "198.18.0.1", "224.0.0.251", "255.255.255.255",
	"::1", "::", "fd00:ec2::254", "fc00::1", "fe80::1", "64:ff9b::a9fe:a9fe", "2002:a9fe:a9fe::1",
	"::ffff:127.0.0.1", "::ffff:169.254.169.254", "::ffff:10.0.0.1",
}

// Every blocked range is refused when a name resolves to it, when it is
// written in the URL, and by the dialer's Control function itself (the
// last check, on the socket's own address), in both modes but loopback in
// the development one.
func TestClientRefusesEveryBlockedRange(t *testing.T) {
	t.Parallel()
	for _, s := range blockedSamples {
		a := netip.MustParseAddr(s)
		for _, insecure := range []bool{false, true} {
			if insecure && a.Unmap().IsLoopback() {
				continue
			}
			r := &resolver{answers: [][]netip.Addr{{a}}}
			cl := webhook.NewClient(webhook.ClientConfig{Resolver: r, AllowInsecure: insecure, Timeout: 2 * time.Second})
			_, err := cl.Send(context.Background(), webhook.Request{URL: "https://hooks.example.com/in", ID: "x", Timestamp: time.Now(), Body: []byte("{}")})
			var blocked *webhook.BlockedAddressError
			if !errors.As(err, &blocked) || blocked.Addr != a {
				t.Errorf("%s (insecure %v) by name: %v, want a BlockedAddressError", s, insecure, err)
			}
			literal := (&url.URL{Scheme: "https", Host: net.JoinHostPort(a.String(), "443"), Path: "/in"}).String()
			if _, err := cl.Send(context.Background(), webhook.Request{URL: literal, Body: []byte("{}")}); !errors.Is(err, webhook.ErrURLNotAllowed) {
				t.Errorf("%s (insecure %v) literally: %v, want ErrURLNotAllowed", literal, insecure, err)
			}
			if err := cl.Control("tcp", netip.AddrPortFrom(a, 443).String()); !errors.As(err, &blocked) {
				t.Errorf("Control(%s, insecure %v) = %v, want a BlockedAddressError", s, insecure, err)
			}
		}
	}
	strict := webhook.NewClient(webhook.ClientConfig{})
	if err := strict.Control("tcp", "93.184.216.34:443"); err != nil {
		t.Errorf("Control of a public address on 443: %v", err)
	}
	if err := strict.Control("tcp", "93.184.216.34:8443"); err == nil {
		t.Error("Control of a public address on 8443: allowed")
	}
}

// receiver is a local HTTP server that counts the connections it accepts
// and the requests it serves, and closes every connection after one
// answer, so that each request needs a new connection (and a lookup).
type receiver struct {
	*httptest.Server
	conns, requests atomic.Int64
}

func newReceiver(t *testing.T, h http.HandlerFunc) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.requests.Add(1)
		w.Header().Set("Connection", "close")
		h(w, r)
	}))
	rc.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			rc.conns.Add(1)
		}
	}
	rc.Start()
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) port() string {
	_, port, _ := net.SplitHostPort(rc.Listener.Addr().String())
	return port
}

func ok(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }

// DNS rebinding: a name that resolves to an allowed address for one lookup
// and to the metadata service for the next gets nothing through, because
// each connection dials exactly the address its one lookup gave and
// checked. The development mode is used so that the allowed address can be
// a local server; the metadata range stays blocked there.
func TestClientClosesDNSRebinding(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, ok)
	public, metadata := addrs("127.0.0.1"), addrs("169.254.169.254")
	r := &resolver{answers: [][]netip.Addr{public, metadata, public, metadata, public, metadata}}
	cl := webhook.NewClient(webhook.ClientConfig{Resolver: r, AllowInsecure: true, Timeout: 2 * time.Second})
	u := "http://rebind.example:" + rc.port() + "/in"
	var sent, refused int
	for range 6 {
		resp, err := cl.Send(context.Background(), webhook.Request{URL: u, ID: "x", Timestamp: time.Now(), Body: []byte("{}")})
		var blocked *webhook.BlockedAddressError
		switch {
		case err == nil && resp.StatusCode == http.StatusNoContent:
			sent++
		case errors.As(err, &blocked) && blocked.Addr == metadata[0]:
			refused++
		default:
			t.Fatalf("send: %+v, %v", resp, err)
		}
	}
	if sent != 3 || refused != 3 {
		t.Errorf("%d sent, %d refused; want 3 and 3", sent, refused)
	}
	// One lookup per connection: nothing looked the name up a second time
	// between the check and the dial.
	if r.count() != 6 || rc.conns.Load() != 3 || rc.requests.Load() != 3 {
		t.Errorf("%d lookups, %d connections, %d requests; want 6, 3, 3", r.count(), rc.conns.Load(), rc.requests.Load())
	}

	// One answer with blocked addresses first: they are skipped, the
	// allowed one is dialled.
	mixed := &resolver{answers: [][]netip.Addr{addrs("169.254.169.254", "10.0.0.1", "::ffff:172.16.0.1", "127.0.0.1")}}
	cl = webhook.NewClient(webhook.ClientConfig{Resolver: mixed, AllowInsecure: true, Timeout: 2 * time.Second})
	if resp, err := cl.Send(context.Background(), webhook.Request{URL: u, Body: []byte("{}")}); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Errorf("mixed answer: %+v, %v", resp, err)
	}
}

// A redirect is an answer, never followed: not to another local server,
// not to the metadata service.
func TestClientFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	target := newReceiver(t, ok)
	for _, loc := range []string{target.URL + "/elsewhere", "http://169.254.169.254/latest/meta-data/iam/", "http://[fd00:ec2::254]/"} {
		for _, code := range []int{301, 302, 303, 307, 308} {
			rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, loc, code)
			})
			cl := webhook.NewClient(webhook.ClientConfig{AllowInsecure: true, Timeout: 2 * time.Second})
			resp, err := cl.Send(context.Background(), webhook.Request{URL: rc.URL, Body: []byte("{}")})
			if err != nil || resp.StatusCode != code {
				t.Errorf("%d to %s: %+v, %v; want the %d itself", code, loc, resp, err, code)
			}
		}
	}
	if n := target.requests.Load(); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
}

// An oversized answer is cut at MaxResponseBytes and the connection
// closed: the client reads a bounded amount however much is sent.
func TestClientCapsTheAnswer(t *testing.T) {
	t.Parallel()
	const huge = 64 << 20
	var written atomic.Int64
	done := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		defer close(done)
		w.WriteHeader(http.StatusOK)
		chunk := []byte(strings.Repeat("x", 32<<10))
		for written.Load() < huge {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	cl := webhook.NewClient(webhook.ClientConfig{AllowInsecure: true, Timeout: 10 * time.Second, MaxResponseBytes: 1000})
	resp, err := cl.Send(context.Background(), webhook.Request{URL: rc.URL, Body: []byte("{}")})
	if err != nil || resp.StatusCode != http.StatusOK || len(resp.Body) != 1000 || !resp.Truncated {
		t.Fatalf("send: %d bytes, truncated %v, %v", len(resp.Body), resp.Truncated, err)
	}
	<-done
	if w := written.Load(); w >= huge {
		t.Errorf("the server wrote all %d bytes: the client read them", w)
	}

	// An oversized header is refused outright.
	big := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("y", 64<<10))
		w.WriteHeader(http.StatusOK)
	})
	if _, err := cl.Send(context.Background(), webhook.Request{URL: big.URL, Body: []byte("{}")}); err == nil {
		t.Error("a 64 KiB header was accepted")
	}
	// So is an oversized request body, before anything is sent.
	if _, err := cl.Send(context.Background(), webhook.Request{URL: big.URL, Body: make([]byte, webhook.MaxRequestBytes+1)}); err == nil {
		t.Error("an oversized request was sent")
	}
}

func TestClientTimesOut(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)
	cl := webhook.NewClient(webhook.ClientConfig{AllowInsecure: true, Timeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := cl.Send(context.Background(), webhook.Request{URL: rc.URL, Body: []byte("{}")})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("a silent receiver: %v after %v", err, time.Since(start))
	}
}

// Without the development setting only https on 443 is sent to.
func TestClientPolicy(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, ok)
	strict := webhook.NewClient(webhook.ClientConfig{Resolver: &resolver{answers: [][]netip.Addr{addrs("127.0.0.1")}}})
	for _, u := range []string{rc.URL, "http://hooks.example.com/in", "https://hooks.example.com:8443/in", "https://localhost/in"} {
		if _, err := strict.Send(context.Background(), webhook.Request{URL: u, Body: []byte("{}")}); !errors.Is(err, webhook.ErrURLNotAllowed) {
			t.Errorf("strict %s: %v, want ErrURLNotAllowed", u, err)
		}
	}
	if rc.requests.Load() != 0 {
		t.Error("the strict client reached a local server")
	}
	// What it sends: the headers of the specification, lower case.
	got := make(chan http.Header, 1)
	body := make(chan []byte, 1)
	hdr := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		b, _ := io.ReadAll(r.Body)
		body <- b
	})
	dev := webhook.NewClient(webhook.ClientConfig{AllowInsecure: true})
	at := time.Unix(1700000000, 0)
	if _, err := dev.Send(context.Background(), webhook.Request{URL: hdr.URL, ID: "evt-1", Timestamp: at, Body: []byte(`{"a":1}`), Signature: "v1,abc"}); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.Get("webhook-id") != "evt-1" || h.Get("webhook-timestamp") != "1700000000" || h.Get("webhook-signature") != "v1,abc" ||
		h.Get("Content-Type") != "application/json" || !strings.HasPrefix(h.Get("User-Agent"), "jobboard-webhooks/") {
		t.Errorf("headers %v", h)
	}
	if b := <-body; string(b) != `{"a":1}` {
		t.Errorf("body %q", b)
	}
}
