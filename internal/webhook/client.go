package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"syscall"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Defaults of ClientConfig.
const (
	// DefaultAttemptTimeout bounds one attempt: connection, TLS, request
	// and the whole answer. Receivers should answer at once and work
	// later.
	DefaultAttemptTimeout = 10 * time.Second
	// DefaultMaxResponseBytes is the most of an answer's body read; the
	// rest is not read (the connection is closed instead).
	DefaultMaxResponseBytes = 64 << 10
	// MaxRequestBytes is the largest body sent.
	MaxRequestBytes = 256 << 10
	// maxResponseHeaderBytes bounds the answer's header.
	maxResponseHeaderBytes = 16 << 10
)

// userAgent names the sender to receivers.
const userAgent = "jobboard-webhooks/1"

// Resolver looks up the addresses of a host name; *net.Resolver
// implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// ClientConfig is what a Client needs; the zero value is the production
// setting.
type ClientConfig struct {
	// AllowInsecure also allows http, any port and loopback addresses: for
	// local development and tests only (WEBHOOK_ALLOW_INSECURE).
	AllowInsecure bool
	// Timeout bounds one attempt. Zero: DefaultAttemptTimeout.
	Timeout time.Duration
	// MaxResponseBytes bounds what is read of an answer's body. Zero:
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Resolver looks host names up. Nil: net.DefaultResolver.
	Resolver Resolver
}

// Client sends webhook requests, and nothing it must not: only to https
// on port 443 (unless AllowInsecure), only to addresses that are not
// internal (jobboard.BlockedWebhookAddr), checked when the connection is
// made, on the address the connection is made to, so that a name whose
// answer changes between a check and the connection (DNS rebinding) gains
// nothing. It follows no redirect, uses no proxy, sends at most
// MaxRequestBytes, reads at most MaxResponseBytes of an answer, and bounds
// each attempt by Timeout. It is safe for concurrent use and keeps
// connections alive between attempts to one host.
type Client struct {
	c      ClientConfig
	policy jobboard.WebhookURLPolicy
	http   *http.Client
}

// NewClient returns a Client.
func NewClient(c ClientConfig) *Client {
	if c.Timeout <= 0 {
		c.Timeout = DefaultAttemptTimeout
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.Resolver == nil {
		c.Resolver = net.DefaultResolver
	}
	cl := &Client{c: c, policy: jobboard.WebhookURLPolicy{AllowInsecure: c.AllowInsecure}}
	dialer := &net.Dialer{
		Timeout: c.Timeout,
		// The last word: whatever address a connection is about to be made
		// to, it is checked here, on the socket's own address.
		Control: cl.control,
	}
	transport := &http.Transport{
		Proxy: nil, // never through a proxy of the environment
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return cl.dial(ctx, dialer, network, addr)
		},
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    c.Timeout,
		ResponseHeaderTimeout:  c.Timeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		// An answer is read as sent: no transparent decompression, whose
		// output could be far larger than what crossed the network.
		DisableCompression:  true,
		MaxIdleConns:        100,
		MaxIdleConnsPerHost: 10,
		IdleConnTimeout:     90 * time.Second,
	}
	cl.http = &http.Client{
		Transport: transport,
		// A redirect is an answer like any other: not 2xx, so retried.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return cl
}

// ErrDestination is matched by the error of an attempt that went nowhere
// because of where its host led: a *BlockedAddressError, or a lookup of the
// host that failed. Its text is all that the company's delivery log says of
// such an attempt: the address, the resolver's and which of the two it was
// would tell a company about our network (inside a VPC, the private zone's
// names and addresses, and which names exist there); our own logs keep the
// whole error.
var ErrDestination = errors.New("destination not allowed or could not be resolved")

// BlockedAddressError is a connection refused because its address is one
// a webhook may not reach. It matches ErrDestination.
type BlockedAddressError struct {
	Addr   netip.Addr
	Reason string
}

func (e *BlockedAddressError) Error() string {
	return fmt.Sprintf("address %s is %s; webhooks are not delivered there", e.Addr, e.Reason)
}

// Is makes a blocked address match ErrDestination.
func (e *BlockedAddressError) Is(target error) bool { return target == ErrDestination }

// dial resolves the host itself, checks each address, and dials the
// checked address as a literal, so that no second lookup happens between
// the check and the connection.
func (cl *Client) dial(ctx context.Context, d *net.Dialer, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = cl.c.Resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, fmt.Errorf("look up %s: %w: %w", host, ErrDestination, err)
	}
	var errs []error
	for _, a := range addrs {
		if reason, blocked := jobboard.BlockedWebhookAddr(a, cl.c.AllowInsecure); blocked {
			errs = append(errs, &BlockedAddressError{Addr: a, Reason: reason})
			continue
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("look up %s: %w: no addresses", host, ErrDestination)
	}
	return nil, errors.Join(errs...)
}

// control is the dialer's Control function: it runs after the socket is
// made and before it connects, with the address it connects to.
func (cl *Client) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("connect to %q: %w", address, err)
	}
	if reason, blocked := jobboard.BlockedWebhookAddr(ap.Addr(), cl.c.AllowInsecure); blocked {
		return &BlockedAddressError{Addr: ap.Addr(), Reason: reason}
	}
	if !cl.c.AllowInsecure && ap.Port() != 443 {
		return fmt.Errorf("connect to %s: only port 443 is allowed", ap)
	}
	return nil
}

// Request is one attempt to send.
type Request struct {
	URL       string
	ID        string
	Timestamp time.Time
	Body      []byte
	// Signature is the webhook-signature value (Sign).
	Signature string
}

// Response is what an attempt got.
type Response struct {
	StatusCode int
	// Body is the start of the answer's body, at most MaxResponseBytes;
	// Truncated tells that it was longer.
	Body      []byte
	Truncated bool
	// RetryAfter is the answer's Retry-After in seconds, when it has one.
	RetryAfter time.Duration
}

// ErrURLNotAllowed is matched by the error of a URL the policy refuses (it
// may have been allowed when it was stored, by a looser deployment).
var ErrURLNotAllowed = errors.New("the endpoint's URL is not allowed")

// Send makes one attempt, bounded by the client's Timeout (and ctx).
// Errors: ErrURLNotAllowed, a body larger than MaxRequestBytes,
// ErrDestination (a *BlockedAddressError or a failed lookup, inside a
// *url.Error), a timeout, or any failure to connect or to read the answer;
// an answer of any status is not an error.
func (cl *Client) Send(ctx context.Context, r Request) (Response, error) {
	if err := cl.policy.Check(r.URL); err != nil {
		return Response{}, fmt.Errorf("%w: %w", ErrURLNotAllowed, err)
	}
	if len(r.Body) > MaxRequestBytes {
		return Response{}, fmt.Errorf("request body of %d bytes is larger than %d", len(r.Body), MaxRequestBytes)
	}
	ctx, cancel := context.WithTimeout(ctx, cl.c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		return Response{}, err
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", userAgent)
	h[HeaderID] = []string{r.ID} // lower case as the specification writes them
	h[HeaderTimestamp] = []string{strconv.FormatInt(r.Timestamp.Unix(), 10)}
	h[HeaderSignature] = []string{r.Signature}
	resp, err := cl.http.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	// A body cut short (the deadline, a reset) still leaves the status:
	// the receiver answered, and the status decides.
	body, _ := io.ReadAll(io.LimitReader(resp.Body, cl.c.MaxResponseBytes+1))
	out := Response{StatusCode: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"))}
	if int64(len(body)) > cl.c.MaxResponseBytes {
		body, out.Truncated = body[:cl.c.MaxResponseBytes], true
	}
	out.Body = body
	return out, nil
}

// retryAfter reads a Retry-After of whole seconds (the HTTP-date form is
// ignored).
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// urlError returns the error inside a *url.Error: its text without the
// URL, which may carry a receiver's token in its query and has no place in
// our logs.
func urlError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
