package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/jobboard/jobboard/internal/webhook/webhooktest"
)

// receiverMode is what a receiver does with the requests it gets.
type receiverMode int

const (
	// receiverUp answers 204 at once.
	receiverUp receiverMode = iota
	// receiverSlow answers after longer than the delivery function waits:
	// every attempt times out.
	receiverSlow
	// receiverLagging answers 204, but slowly, within the attempt timeout.
	receiverLagging
	// receiverFailing answers 503.
	receiverFailing
)

// receipt is one request a receiver got.
type receipt struct {
	ID       string    `json:"id"`
	Endpoint int       `json:"receiver"`
	At       time.Time `json:"at"`
	Status   int       `json:"status"` // 0: no answer (timed out, or the receiver was killed)
	Type     string    `json:"type"`
	Fact     string    `json:"fact"`
	Verified bool      `json:"verified"`
}

// receiver is one company's webhook endpoint: an HTTP server on a fixed
// loopback port that the harness kills (the port refuses connections, and
// requests in flight are cut) and restarts on the same port, slows or makes
// fail. Every request is checked against the endpoint's signing secret as
// a receiver would (webhooktest.Verify) and recorded in the run's log.
type receiver struct {
	index  int
	port   int
	secret string
	slow   time.Duration // receiverSlow's delay
	lag    time.Duration // receiverLagging's delay
	log    *receiptLog
	// base is the mode it returns to after a fault: receiverUp, or for a
	// slow tenant's receiver receiverLagging.
	base receiverMode

	mu   sync.Mutex
	mode receiverMode
	srv  *http.Server
	// down is closed while the receiver is killed, to end the requests in
	// flight at once.
	down chan struct{}
}

// receiptLog collects the receipts of every receiver.
type receiptLog struct {
	mu   sync.Mutex
	list []receipt
}

func (l *receiptLog) add(r receipt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.list = append(l.list, r)
}

func (l *receiptLog) all() []receipt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]receipt(nil), l.list...)
}

// URL is the endpoint's address.
func (r *receiver) URL() string { return "http://127.0.0.1:" + strconv.Itoa(r.port) + "/hooks" }

// start listens on the receiver's port. Errors: the port is taken.
func (r *receiver) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		return nil
	}
	ln, err := new(net.ListenConfig).Listen(context.Background(), "tcp", "127.0.0.1:"+strconv.Itoa(r.port))
	if err != nil {
		return fmt.Errorf("receiver %d: %w", r.index, err)
	}
	r.down = make(chan struct{})
	down := r.down
	r.srv = &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { r.serve(w, req, down) }),
		ReadHeaderTimeout: 5 * time.Second,
	}
	srv := r.srv
	go func() { _ = srv.Serve(ln) }()
	return nil
}

// kill closes the listener and every connection: requests in flight get
// no answer, new ones are refused until start.
func (r *receiver) kill() {
	r.mu.Lock()
	srv, down := r.srv, r.down
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		close(down)
		_ = srv.Close()
	}
}

func (r *receiver) setSecret(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secret = s
}

func (r *receiver) setMode(m receiverMode) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mode = m
}

// restore puts the receiver back in its base mode.
func (r *receiver) restore() { r.setMode(r.base) }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request, down <-chan struct{}) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	rec := receipt{ID: req.Header.Get("webhook-id"), Endpoint: r.index, At: time.Now()}
	r.mu.Lock()
	mode, secret := r.mode, r.secret
	r.mu.Unlock()
	rec.Verified = webhooktest.Verify(secret, req.Header, body, time.Now()) == nil
	rec.Type, rec.Fact = factOf(body)
	wait := map[receiverMode]time.Duration{receiverSlow: r.slow, receiverLagging: r.lag}[mode]
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-down:
			t.Stop()
			r.log.add(rec)
			// Killed: the connection ends with no answer at all. (A handler
			// that merely returned would answer 200.)
			panic(http.ErrAbortHandler)
		case <-req.Context().Done():
			t.Stop()
			r.log.add(rec)
			panic(http.ErrAbortHandler)
		}
	}
	rec.Status = http.StatusNoContent
	if mode == receiverFailing {
		rec.Status = http.StatusServiceUnavailable
	}
	if !rec.Verified {
		rec.Status = http.StatusUnauthorized
	}
	r.log.add(rec)
	w.WriteHeader(rec.Status)
}

// factOf names what a payload says happened, independently of its
// webhook-id: two ids with one fact would be one change delivered as two
// events.
func factOf(body []byte) (typ, fact string) {
	var p struct {
		Type string `json:"type"`
		Data struct {
			JobID         int64  `json:"job_id"`
			ApplicationID int64  `json:"application_id"`
			Status        string `json:"status"`
			OldStatus     string `json:"old_status"`
			NewStatus     string `json:"new_status"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return "", ""
	}
	d := p.Data
	return p.Type, fmt.Sprintf("%s job=%d application=%d %s>%s%s", p.Type, d.JobID, d.ApplicationID, d.OldStatus, d.NewStatus, d.Status)
}
