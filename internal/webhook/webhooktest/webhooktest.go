// Package webhooktest gives the tests of webhooks their receivers: a local
// HTTP server that records what it gets and answers as a test scripts it
// (fail, time out, answer 410, redirect), a Go check of Standard Webhooks
// signatures, and the specification's own JavaScript verifier (npm
// standardwebhooks in .ci/webhooks), an implementation that shares no
// code with ours.
package webhooktest

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/dev/localhost"
)

// Verify checks a delivery as a receiver does: the headers are there, the
// timestamp is within five minutes of now, and one of the v1 signatures is
// the HMAC-SHA256 under secret ("whsec_…") of "<id>.<timestamp>.<body>".
func Verify(secret string, h http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return fmt.Errorf("secret: %w", err)
	}
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q: %w", ts, err)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("webhook-timestamp %s is %v away", ts, d)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", id, ts)
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(sigs) {
		v, sig, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return errors.New("no signature matches")
}

// Verifier runs .ci/webhooks/verify.mjs: the npm package standardwebhooks
// checking signatures. It is safe for concurrent use.
type Verifier struct {
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Scanner
}

var shared struct {
	once sync.Once
	v    *Verifier
	err  error
}

// NpmVerifier returns the verifier of this test process, starting it on
// first use; it fails tb when Node.js or the package is missing (`make
// test` installs it with npm ci --prefix .ci/webhooks). The process lives
// as long as the test binary: it exits when its stdin closes.
func NpmVerifier(tb testing.TB) *Verifier {
	tb.Helper()
	shared.once.Do(func() { shared.v, shared.err = startVerifier() })
	if shared.err != nil {
		tb.Fatalf("webhook verifier: %v", shared.err)
	}
	return shared.v
}

func startVerifier() (*Verifier, error) {
	dir, err := ciDir()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "standardwebhooks", "package.json")); err != nil {
		return nil, fmt.Errorf("npm package standardwebhooks is not installed in %s (make test runs npm ci there): %w", dir, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node is not on PATH: %w", err)
	}
	// It lives as long as the test binary, and exits when its stdin
	// closes with it.
	cmd := exec.CommandContext(context.Background(), node, "verify.mjs")
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &Verifier{in: in, out: sc}, nil
}

// ciDir is .ci/webhooks of the module that holds the working directory.
func ciDir() (string, error) {
	root, err := localhost.ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".ci", "webhooks"), nil
}

// Verify asks the npm library whether the delivery verifies under secret.
// Errors: the library's refusal, or the verifier's failure.
func (v *Verifier) Verify(secret string, h http.Header, body []byte) error {
	headers := map[string]string{}
	for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		if h.Get(k) != "" {
			headers[k] = h.Get(k)
		}
	}
	line, err := json.Marshal(map[string]any{"secret": secret, "headers": headers, "body": string(body)})
	if err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, err := v.in.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("verifier: %w", err)
	}
	if !v.out.Scan() {
		return fmt.Errorf("verifier stopped: %w", v.out.Err())
	}
	var answer struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	}
	if err := json.Unmarshal(v.out.Bytes(), &answer); err != nil {
		return fmt.Errorf("verifier answered %q: %w", v.out.Bytes(), err)
	}
	if !answer.OK {
		return errors.New(answer.Error)
	}
	return nil
}

// Receipt is one request a Receiver got.
type Receipt struct {
	ID        string
	Timestamp string
	Header    http.Header
	Body      []byte
	At        time.Time
	// Status is what the receiver answered (0: it hung up or stalled).
	Status int
}

// Answer is what a receiver does with one request.
type Answer struct {
	// Status to answer; 0 means 204.
	Status int
	// Delay before answering (longer than the client's timeout: a timeout).
	Delay time.Duration
	// Location of a redirect.
	Location string
	// Body to send.
	Body []byte
}

// Script decides the answer to the n-th request (from 1) with a webhook-id,
// given how many came with that id before (seen, from 0).
type Script func(id string, seen int) Answer

// Receiver is a local webhook endpoint. It records every request and
// answers as its script says; Processed tells what a receiver that drops
// duplicates by webhook-id would have processed.
type Receiver struct {
	Server *httptest.Server
	script Script

	mu       sync.Mutex
	receipts []Receipt
	seen     map[string]int
}

// NewReceiver starts a receiver on a free loopback port, closed when tb
// ends. A nil script answers 204 to everything.
func NewReceiver(tb testing.TB, script Script) *Receiver {
	tb.Helper()
	if script == nil {
		script = func(string, int) Answer { return Answer{} }
	}
	r := &Receiver{script: script, seen: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(r.Server.Close)
	return r
}

// URL is the receiver's address.
func (r *Receiver) URL() string { return r.Server.URL + "/hooks" }

// Port is the receiver's port.
func (r *Receiver) Port() string {
	_, port, _ := net.SplitHostPort(r.Server.Listener.Addr().String())
	return port
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	seen := r.seen[id]
	r.seen[id]++
	r.mu.Unlock()
	a := r.script(id, seen)
	rec := Receipt{ID: id, Timestamp: req.Header.Get("webhook-timestamp"), Header: req.Header.Clone(), Body: body, At: time.Now()}
	if a.Delay > 0 {
		t := time.NewTimer(a.Delay)
		select {
		case <-t.C:
		case <-req.Context().Done():
			t.Stop()
			r.add(rec)
			return
		}
	}
	if a.Location != "" {
		w.Header().Set("Location", a.Location)
	}
	rec.Status = a.Status
	if rec.Status == 0 {
		rec.Status = http.StatusNoContent
	}
	r.add(rec)
	w.WriteHeader(rec.Status)
	_, _ = w.Write(a.Body)
}

func (r *Receiver) add(rec Receipt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.receipts = append(r.receipts, rec)
}

// Receipts returns every request received so far.
func (r *Receiver) Receipts() []Receipt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Receipt(nil), r.receipts...)
}

// Processed returns, per webhook-id, how many requests were answered 2xx:
// a receiver that drops duplicates processes each id once when this is at
// least 1.
func (r *Receiver) Processed() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, rec := range r.receipts {
		if rec.Status >= 200 && rec.Status <= 299 {
			out[rec.ID]++
		}
	}
	return out
}
