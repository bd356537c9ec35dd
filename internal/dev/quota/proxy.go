package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Quota is an SES account's sending rate as SES enforces it: a token
// bucket that refills Rate tokens a second up to Burst, one token a send;
// and the time SES takes to answer.
type Quota struct {
	Rate    float64
	Burst   float64
	Latency time.Duration
}

// Proxy is an SES v2 endpoint with a quota, in front of the SES stand-in.
// Give its URL to the SDK (AWS_ENDPOINT_URL_SESV2). Safe for concurrent
// use.
type Proxy struct {
	// URL is the proxy's base URL.
	URL string

	q    Quota
	next *httputil.ReverseProxy
	srv  *http.Server

	mu       sync.Mutex
	tokens   float64
	refilled time.Time
	calls    []time.Time          // every SendEmail, as it arrived
	accepted []time.Time          // forwarded to the stand-in, as they arrived
	firstTo  map[string]time.Time // when the first accepted email to each address arrived
}

// Start starts a proxy with quota q in front of the SES stand-in at
// upstream. Close stops it.
func Start(ctx context.Context, upstream string, q Quota) (*Proxy, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("quota proxy: upstream %q: want an http URL", upstream)
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("quota proxy: listen: %w", err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), q: q, next: httputil.NewSingleHostReverseProxy(u),
		tokens: q.Burst, refilled: time.Now(), firstTo: map[string]time.Time{}}
	p.next.ErrorLog = log.New(io.Discard, "", 0) // a long poll cut short at the end is no news
	p.next.Transport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Close stops the proxy.
func (p *Proxy) Close() error { return p.srv.Close() }

// ServeHTTP answers GetAccount with the quota, and paces SendEmail; the
// rest goes to the stand-in as it is.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/v2/email/account":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"SendingEnabled": true, "ProductionAccessEnabled": true, "EnforcementStatus": "HEALTHY",
			"SendQuota": map[string]float64{"MaxSendRate": p.q.Rate, "Max24HourSend": 1e7, "SentLast24Hours": 0},
		})
	case r.Method == http.MethodPost && r.URL.Path == "/v2/email/outbound-emails":
		p.send(w, r)
	default:
		p.next.ServeHTTP(w, r)
	}
}

// send takes a token at the request's arrival, waits the latency, then
// forwards the request or answers 429.
func (p *Proxy) send(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.Body = io.NopCloser(strings.NewReader(string(body)))
	var in struct {
		Destination struct{ ToAddresses []string }
	}
	_ = json.Unmarshal(body, &in)
	ok := p.take(in.Destination.ToAddresses)
	t := time.NewTimer(p.q.Latency)
	select {
	case <-r.Context().Done():
		t.Stop()
		return
	case <-t.C:
	}
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", "TooManyRequestsException")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"message":"Maximum sending rate exceeded."}`)
		return
	}
	p.next.ServeHTTP(w, r)
}

// take counts a send arriving now and takes a token for it, if there is
// one.
func (p *Proxy) take(to []string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	p.tokens = min(p.q.Burst, p.tokens+now.Sub(p.refilled).Seconds()*p.q.Rate)
	p.refilled = now
	p.calls = append(p.calls, now)
	if p.tokens < 1 {
		return false
	}
	p.tokens--
	p.accepted = append(p.accepted, now)
	for _, a := range to {
		if _, seen := p.firstTo[strings.ToLower(a)]; !seen {
			p.firstTo[strings.ToLower(a)] = now
		}
	}
	return true
}

// Stats is what the proxy saw.
type Stats struct {
	// Calls counts the SendEmail requests, Throttled those answered 429,
	// Accepted those forwarded.
	Calls, Throttled, Accepted int
	// First and Last are when the first and the last accepted send
	// arrived.
	First, Last time.Time
	// MaxCallsPerSecond is the most SendEmail requests that arrived
	// within any one second.
	MaxCallsPerSecond int
}

// Stats returns what the proxy has seen of the sends that arrived at
// since or later.
func (p *Proxy) Stats(since time.Time) Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	after := func(ts []time.Time) []time.Time {
		i, _ := slices.BinarySearchFunc(ts, since, func(a, b time.Time) int { return a.Compare(b) })
		return ts[i:]
	}
	calls, accepted := after(p.calls), after(p.accepted)
	s := Stats{Calls: len(calls), Throttled: len(calls) - len(accepted), Accepted: len(accepted), MaxCallsPerSecond: maxWithin(calls, time.Second)}
	if len(accepted) > 0 {
		s.First, s.Last = accepted[0], accepted[len(accepted)-1]
	}
	return s
}

// AcceptedTo returns when the first accepted email to the address
// arrived, and how many sends arriving at since or later had been accepted
// before it; false if none has been.
func (p *Proxy) AcceptedTo(addr string, since time.Time) (time.Time, int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.firstTo[strings.ToLower(addr)]
	if !ok {
		return time.Time{}, 0, false
	}
	from, _ := slices.BinarySearchFunc(p.accepted, since, func(a, b time.Time) int { return a.Compare(b) })
	i, _ := slices.BinarySearchFunc(p.accepted, at, func(a, b time.Time) int { return a.Compare(b) })
	return at, max(i-from, 0), true
}

// maxWithin is the most of the times (in order) within any span d.
func maxWithin(ts []time.Time, d time.Duration) int {
	best, j := 0, 0
	for i := range ts {
		for ts[i].Sub(ts[j]) >= d {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}
