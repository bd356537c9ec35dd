package openapitest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jobboard/jobboard/internal/dev/localhost"
)

// Prism (Stoplight's, pinned in .ci/openapi) is the second, independent
// validator of every response Check is given: its own OpenAPI parser and
// JSON Schema validator, written by other people than kin-openapi's, so
// that the document cannot drift from the API where one of them is lenient
// (kin-openapi let `nullable` beside `allOf` through; Prism did not).
//
// Prism validates only what it proxies, so each exchange is replayed
// through it: Check asks Prism for the same method and path, Prism asks the
// replay server of this process, which answers the recorded status, header
// fields and body byte for byte, and Prism reports what does not match the
// document in the sl-violations field of its answer. The request itself
// never goes through Prism (it re-encodes JSON bodies, and the tests send
// malformed ones on purpose), and Prism does not validate requests here.
//
// Not replayed: HEAD (Prism's proxy reads a JSON body that a HEAD answer
// does not have, and fails), and routes the document does not have (Prism
// has no operation to check them against; Check checks their problems).

// replayHeader carries the token of a recorded exchange from Check through
// Prism to the replay server.
const replayHeader = "X-Openapitest-Replay"

// prismStartTimeout bounds Prism's start: reading the document takes about
// a second.
const prismStartTimeout = 60 * time.Second

// exchange is a recorded answer, waiting to be replayed through Prism.
type exchange struct {
	status int
	header http.Header
	body   []byte
}

// prismProxy is Prism, running as a validating proxy in front of the replay
// server, for the life of the test binary.
type prismProxy struct {
	endpoint string
	client   *http.Client
	replays  sync.Map // token → exchange
	// stdin is Prism's standard input, held open for the life of the test
	// binary: Prism exits when it closes.
	stdin io.WriteCloser
}

var (
	prismOnce sync.Once
	prism     *prismProxy
	prismErr  error
)

// sharedPrism starts Prism on first use. Errors: Prism is not installed
// (make lint installs it) or did not start.
func sharedPrism() (*prismProxy, error) {
	prismOnce.Do(func() {
		root, err := localhost.ModuleRoot()
		if err != nil {
			prismErr = err
			return
		}
		prism, prismErr = startPrism(filepath.Join(root, "internal", "httpapi", "openapi.json"))
	})
	return prism, prismErr
}

// startPrism starts Prism in front of a new replay server, validating
// against the OpenAPI document at the path document.
func startPrism(document string) (*prismProxy, error) {
	root, err := localhost.ModuleRoot()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(root, ".ci", "openapi")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@stoplight", "prism-cli", "package.json")); err != nil {
		return nil, fmt.Errorf("the Prism proxy is not installed in %s: run `make lint` (npm ci --prefix .ci/openapi): %w", dir, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("the Prism proxy needs node: %w", err)
	}
	p := &prismProxy{client: &http.Client{Timeout: time.Minute}}
	ctx := context.Background() // both live as long as the test binary
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("replay server: %w", err)
	}
	replay := &http.Server{Handler: http.HandlerFunc(p.replay), ReadHeaderTimeout: time.Minute}
	go func() { _ = replay.Serve(ln) }() // serves until the test binary exits

	cmd := exec.CommandContext(ctx, node, "prism-proxy.cjs", document, "http://"+ln.Addr().String())
	cmd.Dir = dir
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// Prism exits when this pipe closes: when the test binary does, however
	// it ends.
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start Prism: %w", err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-line:
		var started struct {
			Endpoint string `json:"endpoint"`
		}
		if !ok || json.Unmarshal([]byte(l), &started) != nil || started.Endpoint == "" {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("the Prism proxy did not start (%q): %s", l, stderr.String())
		}
		p.endpoint = started.Endpoint
	case <-time.After(prismStartTimeout):
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("the Prism proxy did not start within %s: %s", prismStartTimeout, stderr.String())
	}
	go func() { _ = cmd.Wait() }()
	return p, nil
}

// replay answers Prism with the exchange its token names.
func (p *prismProxy) replay(w http.ResponseWriter, r *http.Request) {
	v, ok := p.replays.Load(r.Header.Get(replayHeader))
	if !ok {
		http.Error(w, "no such exchange", http.StatusTeapot)
		return
	}
	ex := v.(exchange)
	h := w.Header()
	for name, values := range ex.header {
		switch http.CanonicalHeaderKey(name) {
		case "Content-Length", "Transfer-Encoding", "Connection":
		default:
			h[name] = values
		}
	}
	w.WriteHeader(ex.status)
	_, _ = w.Write(ex.body)
}

// violation is one entry of Prism's sl-violations field.
type violation struct {
	Location []string `json:"location"`
	Severity string   `json:"severity"`
	Code     any      `json:"code"`
	Message  string   `json:"message"`
}

// check replays one exchange of a documented route through Prism and
// returns what Prism says about the response: nil when nothing.
func (p *prismProxy) check(req *http.Request, status int, header http.Header, body []byte) error {
	if req.Method == http.MethodHead {
		return nil
	}
	token := rand.Text()
	p.replays.Store(token, exchange{status: status, header: header.Clone(), body: bytes.Clone(body)})
	defer p.replays.Delete(token)
	preq, err := http.NewRequestWithContext(context.Background(), req.Method, p.endpoint+req.URL.EscapedPath(), nil)
	if err != nil {
		return fmt.Errorf("the Prism proxy: %w", err)
	}
	preq.Header.Set(replayHeader, token)
	resp, err := p.client.Do(preq)
	if err != nil {
		return fmt.Errorf("the Prism proxy: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != status {
		return fmt.Errorf("the Prism proxy relayed %d for a recorded %d (sl-violations %s)", resp.StatusCode, status, resp.Header.Get("sl-violations"))
	}
	field := resp.Header.Get("sl-violations")
	if field == "" {
		return nil
	}
	var all []violation
	if err := json.Unmarshal([]byte(field), &all); err != nil {
		return fmt.Errorf("the Prism proxy's sl-violations %q: %w", field, err)
	}
	var errs []error
	for _, v := range all {
		if len(v.Location) > 0 && v.Location[0] == "response" {
			errs = append(errs, fmt.Errorf("prism: %s %s: %s", v.Severity, strings.Join(v.Location, "."), v.Message))
		}
	}
	return errors.Join(errs...)
}
