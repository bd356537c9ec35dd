// Package faultproxy is an HTTP/1.1 reverse proxy in front of one upstream
// (in this repository: the local SQS or SES stand-in) whose behaviour can
// be switched while it runs, to inject the network failures that the
// status-email pipeline must survive: a request that never reaches the
// service, a request the service acted on whose answer is lost, a service
// that hangs, answers 503, or answers slowly.
//
// A Proxy listens on 127.0.0.1 on a free port; give its URL to an SDK client
// as the base endpoint. It is safe for concurrent use: tests switch faults
// from one goroutine while clients send through it from others.
//
// It is a test and harness tool (internal/dev/chaos, the worker's tests), not
// part of any deployed function.
package faultproxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the proxy does with a request.
type Fault int

// The faults. Reset means a TCP RST (the socket closed with SO_LINGER 0),
// which the client sees as "connection reset by peer", not a clean close.
const (
	// Pass forwards the request and returns the upstream's answer.
	Pass Fault = iota
	// Refuse resets the client's connection before forwarding: the request
	// never reaches the upstream.
	Refuse
	// ResetAfter forwards the request, lets the upstream answer, then
	// resets the client's connection: the upstream acted, the answer is
	// lost (an "ambiguous" call).
	ResetAfter
	// Hang forwards nothing and holds the connection until the client
	// gives up (or the proxy closes).
	Hang
	// Unavailable answers 503 without forwarding.
	Unavailable

	numFaults // the number of faults; keep last
)

var faultNames = [numFaults]string{"pass", "refuse", "reset_after", "hang", "unavailable"}

// String returns the fault's name, e.g. "reset_after".
func (f Fault) String() string {
	if f >= 0 && f < numFaults {
		return faultNames[f]
	}
	return "fault(" + strconv.Itoa(int(f)) + ")"
}

// maxBody bounds the request and response bodies the proxy buffers. SQS and
// SES requests are far smaller (an SES message is at most 40 MB raw, ours a
// few KB); a larger body is refused with 413.
const maxBody = 64 << 20

// Proxy is a running fault proxy. Create it with Start.
type Proxy struct {
	// URL is the proxy's base URL, e.g. http://127.0.0.1:41377: pass it to
	// the SDK (BaseEndpoint, or AWS_ENDPOINT_URL_*).
	URL string

	upstream  *url.URL
	srv       *http.Server
	transport *http.Transport

	fault     atomic.Int64
	rule      atomic.Pointer[func(r *http.Request, body []byte) Fault]
	delay     atomic.Int64 // time.Duration
	forwarded atomic.Int64
	inFlight  atomic.Int64
	counts    [numFaults]atomic.Int64

	mu       sync.Mutex // guards isClosed and the handlers' WaitGroup
	isClosed bool
	handlers sync.WaitGroup
	closed   chan struct{} // closed by Close: releases Hang and delays
	served   chan error
}

// Start starts a proxy in front of upstream, a base URL such as
// http://127.0.0.1:4566 (requests keep their path and query). ctx bounds
// the start only; the proxy runs until Close. It starts with the fault Pass,
// no rule and no delay. Errors: upstream is not an http(s) URL with a host,
// or no port could be opened.
func Start(ctx context.Context, upstream string) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: upstream %q: want an http(s) URL with a host", upstream)
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		URL:      "http://" + ln.Addr().String(),
		upstream: u,
		transport: &http.Transport{
			Proxy:               nil, // never an HTTP_PROXY from the environment
			DisableCompression:  true,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
		},
		closed: make(chan struct{}),
		served: make(chan error, 1),
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		// Resets make the server log "http: response.WriteHeader on
		// hijacked connection"-style noise; faults are the point here.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	go func() { p.served <- p.srv.Serve(ln) }()
	return p, nil
}

// SetFault sets the fault for every following request that no rule decides.
func (p *Proxy) SetFault(f Fault) { p.fault.Store(int64(f)) }

// SetRule makes rule decide the fault of every following request; it gets
// the request (its body already read) and the body. It may be called from
// several goroutines at once. nil removes the rule: SetFault's fault
// applies again.
func (p *Proxy) SetRule(rule func(r *http.Request, body []byte) Fault) {
	if rule == nil {
		p.rule.Store(nil)
		return
	}
	p.rule.Store(&rule)
}

// SetDelay makes the proxy wait d before it returns an answer (the
// upstream's, a 503, or the reset of ResetAfter); the upstream has already
// acted by then. Zero or negative means no delay.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// Forwarded returns how many requests reached the upstream and got its
// answer (Pass and ResetAfter).
func (p *Proxy) Forwarded() int64 { return p.forwarded.Load() }

// Count returns how many requests the proxy has given the fault f.
func (p *Proxy) Count(f Fault) int64 {
	if f < 0 || f >= numFaults {
		return 0
	}
	return p.counts[f].Load()
}

// InFlight returns how many requests the proxy is handling now (hanging or
// delayed ones included).
func (p *Proxy) InFlight() int64 { return p.inFlight.Load() }

// Close stops the proxy: it stops listening, closes every connection (a
// hanging request is reset), and waits until every request being handled
// has ended. Calling it again returns nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.isClosed {
		p.mu.Unlock()
		return nil
	}
	p.isClosed = true
	close(p.closed)
	p.mu.Unlock()

	err := p.srv.Close()
	p.handlers.Wait()
	p.transport.CloseIdleConnections()
	if serveErr := <-p.served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		return fmt.Errorf("faultproxy: close: %w", err)
	}
	return nil
}

// ServeHTTP handles one request according to the current rule or fault.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	if p.isClosed {
		p.mu.Unlock()
		reset(w)
		return
	}
	p.handlers.Add(1)
	p.mu.Unlock()
	defer p.handlers.Done()
	p.inFlight.Add(1)
	defer p.inFlight.Add(-1)

	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		http.Error(w, "faultproxy: read request body: "+err.Error(), http.StatusBadRequest)
		return
	}
	if len(body) > maxBody {
		http.Error(w, "faultproxy: request body too large", http.StatusRequestEntityTooLarge)
		return
	}

	f := Fault(p.fault.Load())
	if rule := p.rule.Load(); rule != nil {
		f = (*rule)(r, body)
	}
	if f >= 0 && f < numFaults {
		p.counts[f].Add(1)
	}

	switch f {
	case Pass, ResetAfter:
		p.forward(w, r, body, f == ResetAfter)
	case Refuse:
		reset(w)
	case Hang:
		select {
		case <-r.Context().Done(): // the client gave up
		case <-p.closed:
			reset(w)
		}
	case Unavailable:
		if !p.wait(r.Context()) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", "ServiceUnavailable")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"__type":"ServiceUnavailable","message":"faultproxy: service unavailable"}`)
	default:
		http.Error(w, "faultproxy: unknown fault "+f.String(), http.StatusInternalServerError)
	}
}

// forward sends the request upstream and returns its answer after the
// delay, or resets the client's connection instead when resetAfter.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, body []byte, resetAfter bool) {
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.upstreamURL(r.URL), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "faultproxy: "+err.Error(), http.StatusInternalServerError)
		return
	}
	copyHeader(out.Header, r.Header)
	out.Host = r.Host // transparent: the upstream sees the Host the client signed
	out.ContentLength = int64(len(body))

	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, "faultproxy: upstream: "+err.Error(), http.StatusBadGateway)
		return
	}
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	_ = resp.Body.Close()
	if err != nil {
		http.Error(w, "faultproxy: read upstream answer: "+err.Error(), http.StatusBadGateway)
		return
	}
	p.forwarded.Add(1)

	if !p.wait(r.Context()) {
		return
	}
	if resetAfter {
		reset(w)
		return
	}
	copyHeader(w.Header(), resp.Header)
	w.Header().Set("Content-Length", strconv.Itoa(len(respBody)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(respBody)
}

// upstreamURL is u (path and query of the client's request) on the upstream.
func (p *Proxy) upstreamURL(u *url.URL) string {
	target := *p.upstream
	target.Path = singleSlash(p.upstream.Path, u.Path)
	target.RawPath = ""
	target.RawQuery = u.RawQuery
	return target.String()
}

func singleSlash(a, b string) string {
	switch {
	case a == "":
		return b
	case a[len(a)-1] == '/' && len(b) > 0 && b[0] == '/':
		return a + b[1:]
	case a[len(a)-1] != '/' && (len(b) == 0 || b[0] != '/'):
		return a + "/" + b
	}
	return a + b
}

// wait sleeps the configured delay. It reports false if the client gave up
// or the proxy closed meanwhile (the connection is then reset).
func (p *Proxy) wait(ctx context.Context) bool {
	d := time.Duration(p.delay.Load())
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-p.closed:
		return false
	}
}

// reset closes the client's connection with a TCP RST: SO_LINGER 0 makes
// close(2) discard unsent data and send RST instead of FIN.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		// Not reached: the proxy's own server speaks only HTTP/1.1.
		http.Error(w, "faultproxy: cannot reset a connection that is not HTTP/1.x", http.StatusBadGateway)
		return
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}

// hopHeaders are the hop-by-hop headers a proxy must not forward
// (RFC 9110, section 7.6.1).
var hopHeaders = map[string]bool{
	"Connection":          true,
	"Keep-Alive":          true,
	"Proxy-Authenticate":  true,
	"Proxy-Authorization": true,
	"Proxy-Connection":    true,
	"Te":                  true,
	"Trailer":             true,
	"Transfer-Encoding":   true,
	"Upgrade":             true,
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		if hopHeaders[k] {
			continue
		}
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}
