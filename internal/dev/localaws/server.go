package localaws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// StartTimeout bounds how long a stand-in may take to start and answer its
// health check when the caller's context has no earlier deadline. Both are
// ready in about a second on a quiet machine.
const StartTimeout = 30 * time.Second

// stopTimeout is how long Close waits after SIGTERM before SIGKILL.
const stopTimeout = 5 * time.Second

// ErrNotInstalled means the npm packages are missing from .ci/localaws.
var ErrNotInstalled = errors.New("local AWS stand-ins are not installed: run `make localaws`")

// Server is a running stand-in.
type Server struct {
	// Endpoint is the base URL, e.g. http://127.0.0.1:41377; pass it as the
	// SDK client's BaseEndpoint.
	Endpoint string

	cmd       *exec.Cmd
	exited    chan struct{} // closed when the process has exited
	waitErr   error         // set before exited is closed
	stderr    *tailBuffer
	closeOnce sync.Once
	closeErr  error
}

// Option changes how a stand-in starts.
type Option func(*options)

type options struct {
	port int
}

// WithPort makes the stand-in listen on a fixed port instead of a free one
// (for `make dev`, where people open the SES page in a browser).
func WithPort(port int) Option { return func(o *options) { o.port = port } }

// StartSQS starts fauxqs on 127.0.0.1 (a free port unless WithPort) and waits
// until GET /health answers. ctx bounds the start only; the server runs until
// Close. Errors: ErrNotInstalled, or what went wrong with the process
// (including the tail of its stderr).
func StartSQS(ctx context.Context, opts ...Option) (*Server, error) {
	return start(ctx, "sqs", "/health", opts)
}

// StartSES starts aws-ses-v2-local on 127.0.0.1 and waits until
// GET /health-check answers. The stored emails can be read with Emails and
// are shown as a web page at Endpoint. Errors as for StartSQS.
func StartSES(ctx context.Context, opts ...Option) (*Server, error) {
	return start(ctx, "ses", "/health-check", opts)
}

func start(ctx context.Context, service, healthPath string, opts []Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	dir, err := Dir()
	if err != nil {
		return nil, fmt.Errorf("start %s stand-in: %w", service, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("start %s stand-in: node (Node.js ≥ 20) is not on PATH: %w", service, err)
	}
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()

	s := &Server{exited: make(chan struct{}), stderr: &tailBuffer{limit: 8 << 10}}
	ready := &firstLine{line: make(chan []byte, 1)}
	// The launcher exits when its stdin closes: the pipe's write end stays
	// open in this process, so the stand-in dies with it even on SIGKILL.
	// The process outlives ctx, which bounds only the start: Close stops it.
	cmd := exec.CommandContext(context.WithoutCancel(ctx), node, "launch.mjs", service, strconv.Itoa(o.port))
	cmd.Dir = dir
	cmd.Stdout = ready
	cmd.Stderr = s.stderr
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start %s stand-in: %w", service, err)
	}
	cmd.WaitDelay = stopTimeout
	setProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s stand-in: %w", service, err)
	}
	s.cmd = cmd
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()

	if err := s.awaitReady(ctx, ready.line, healthPath); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("start %s stand-in: %w%s", service, err, s.stderrTail())
	}
	return s, nil
}

// awaitReady reads the endpoint the launcher prints, then polls the health
// path until it answers 200, the process exits or ctx ends.
func (s *Server) awaitReady(ctx context.Context, line <-chan []byte, healthPath string) error {
	select {
	case b := <-line:
		var msg struct {
			Endpoint string `json:"endpoint"`
		}
		if err := json.Unmarshal(b, &msg); err != nil || msg.Endpoint == "" {
			return fmt.Errorf("unexpected first line from launcher: %q", b)
		}
		s.Endpoint = msg.Endpoint
	case <-s.exited:
		return fmt.Errorf("process exited before listening: %w", s.waitErr)
	case <-ctx.Done():
		return fmt.Errorf("waiting for the launcher to listen: %w", ctx.Err())
	}

	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if healthy(ctx, s.Endpoint+healthPath) {
			return nil
		}
		select {
		case <-tick.C:
		case <-s.exited:
			return fmt.Errorf("process exited before healthy: %w", s.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", s.Endpoint+healthPath, ctx.Err())
		}
	}
}

func healthy(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Close stops the stand-in and everything it started: SIGTERM to its process
// group, SIGKILL after a few seconds. It waits until the process has exited.
// Calling Close again returns the first result. An exit caused by Close is
// not an error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		select {
		case <-s.exited:
			// It died on its own: report why.
			if s.waitErr != nil {
				s.closeErr = fmt.Errorf("stand-in at %s had exited: %w%s", s.Endpoint, s.waitErr, s.stderrTail())
			}
			return
		default:
		}
		_ = signalGroup(s.cmd, sigTerm)
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-s.exited:
		case <-timer.C:
			_ = signalGroup(s.cmd, sigKill)
			<-s.exited
		}
	})
	return s.closeErr
}

// Exited is closed when the stand-in's process has exited.
func (s *Server) Exited() <-chan struct{} { return s.exited }

func (s *Server) stderrTail() string {
	if t := bytes.TrimSpace(s.stderr.Bytes()); len(t) > 0 {
		return "\nstand-in output:\n" + string(t)
	}
	return ""
}

// Dir returns the folder of the npm stand-ins, .ci/localaws of the module
// that contains the working directory (found by walking up to go.mod).
// Errors: ErrNotInstalled when its node_modules lacks the packages.
func Dir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("find module root: no go.mod above %s", wd)
		}
		root = parent
	}
	dir := filepath.Join(root, ".ci", "localaws")
	for _, p := range []string{"launch.mjs", "node_modules/fauxqs/package.json", "node_modules/aws-ses-v2-local/package.json"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			return "", fmt.Errorf("%w (%s missing in %s)", ErrNotInstalled, p, dir)
		}
	}
	return dir, nil
}

// firstLine hands the first complete line written to it to line and discards
// the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	done bool
	line chan []byte
}

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.done = true
		f.line <- bytes.Clone(f.buf[:i])
		f.buf = nil
	}
	return len(p), nil
}

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	buf   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.limit; over > 0 {
		t.buf = t.buf[over:]
	}
	return len(p), nil
}

// Bytes returns a copy of what is kept.
func (t *tailBuffer) Bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.buf)
}
