package quota

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// ReceiveCounter is a proxy in front of the SQS stand-in that counts, per
// event (the event_id of the message body), the messages received: every
// delivery of every message that carried it, requeued copies included,
// and the highest ApproximateReceiveCount one of them reached (how near
// it came to the dead-letter queue). Give its URL to the SDK
// (AWS_ENDPOINT_URL_SQS). Safe for concurrent use.
type ReceiveCounter struct {
	// URL is the proxy's base URL.
	URL string

	srv  *http.Server
	next *httputil.ReverseProxy

	mu       sync.Mutex
	receives map[string]int
	maxCount map[string]int
}

// StartReceiveCounter starts a counter in front of the SQS stand-in at
// upstream. Close stops it.
func StartReceiveCounter(ctx context.Context, upstream string) (*ReceiveCounter, error) {
	u, err := url.Parse(upstream)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("receive counter: upstream %q: want an http URL", upstream)
	}
	ln, err := new(net.ListenConfig).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("receive counter: listen: %w", err)
	}
	c := &ReceiveCounter{URL: "http://" + ln.Addr().String(), next: httputil.NewSingleHostReverseProxy(u),
		receives: map[string]int{}, maxCount: map[string]int{}}
	c.next.ErrorLog = log.New(io.Discard, "", 0) // a long poll cut short at the end is no news
	c.next.Transport = &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
	c.next.ModifyResponse = c.count
	c.srv = &http.Server{Handler: c.next, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = c.srv.Serve(ln) }()
	return c, nil
}

// Close stops the proxy.
func (c *ReceiveCounter) Close() error { return c.srv.Close() }

// count reads the messages of a ReceiveMessage answer (SQS's JSON
// protocol) and hands the body on unchanged.
func (c *ReceiveCounter) count(resp *http.Response) error {
	if resp.Request.Header.Get("X-Amz-Target") != "AmazonSQS.ReceiveMessage" || resp.StatusCode != http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var out struct {
		Messages []struct {
			Body       string
			Attributes map[string]string
		}
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range out.Messages {
		var ev struct {
			EventID string `json:"event_id"`
		}
		_ = json.Unmarshal([]byte(m.Body), &ev)
		c.receives[ev.EventID]++
		n, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
		c.maxCount[ev.EventID] = max(c.maxCount[ev.EventID], n)
	}
	return nil
}

// Receives returns, per event_id, the messages received and the highest
// receive count one of them reached.
func (c *ReceiveCounter) Receives() (receives, maxCount map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	receives, maxCount = make(map[string]int, len(c.receives)), make(map[string]int, len(c.maxCount))
	for k, v := range c.receives {
		receives[k] = v
	}
	for k, v := range c.maxCount {
		maxCount[k] = v
	}
	return receives, maxCount
}
