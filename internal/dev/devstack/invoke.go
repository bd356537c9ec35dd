package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/jobboard/jobboard/internal/dev/apiclient"
	"github.com/jobboard/jobboard/internal/dev/localhost"
)

// placeholder is a {{name}} in a sample event.
var placeholder = regexp.MustCompile(`\{\{([a-z_]+)\}\}`)

// FillEvent replaces the placeholders of a sample event from events/:
// {{employer_token}} and {{candidate_token}} with tokens of the stack's demo
// accounts, signed in through its API, and {{occurred_at}} with the time the
// demo candidate registered. That time is the same on every run against one
// database, so a sample sent twice is one event delivered twice (the worker
// skips it as a duplicate), not a second payload under the same event id;
// and it is recent enough for the worker, which refuses events older than
// the claim retention, unless the demo itself is that old. Errors: a
// placeholder it does not know, or a failed sign-in.
func FillEvent(ctx context.Context, st State, event []byte) ([]byte, error) {
	// Each placeholder and the demo account whose sign-in fills it.
	accounts := map[string]string{
		"employer_token":  st.EmployerEmail,
		"candidate_token": st.CandidateEmail,
		"occurred_at":     st.CandidateEmail,
	}
	var unknown []string
	for _, m := range placeholder.FindAllSubmatch(event, -1) {
		if _, ok := accounts[string(m[1])]; !ok {
			unknown = append(unknown, string(m[1]))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		return nil, fmt.Errorf("the event has placeholders that cannot be filled: %v", slices.Compact(unknown))
	}

	c := client{&apiclient.Client{BaseURL: st.APIURL}}
	type session struct {
		Token string `json:"token"`
		User  struct {
			CreatedAt time.Time `json:"created_at"`
		} `json:"user"`
	}
	sessions := map[string]session{}
	values := map[string]string{}
	for name, email := range accounts {
		if !bytes.Contains(event, []byte("{{"+name+"}}")) {
			continue
		}
		s, ok := sessions[email]
		if !ok {
			if err := c.Do(ctx, http.MethodPost, "/v1/auth/login", "", map[string]any{"email": email, "password": st.Password}, http.StatusOK, &s); err != nil {
				return nil, fmt.Errorf("sign in as the demo's %s for {{%s}}: %w", email, name, err)
			}
			sessions[email] = s
		}
		values[name] = s.Token
		if name == "occurred_at" {
			values[name] = s.User.CreatedAt.UTC().Format(time.RFC3339)
		}
	}
	return placeholder.ReplaceAllFunc(event, func(m []byte) []byte {
		return []byte(values[string(placeholder.FindSubmatch(m)[1])])
	}), nil
}

// ErrFunction means the function answered with an error
// ({"errorMessage": ..., "errorType": ...}) rather than a result.
var ErrFunction = errors.New("the function failed")

// Invocation is one function run under aws-lambda-rie (the emulator inside
// `sam local invoke`'s container) for one event.
type Invocation struct {
	// RIE is the aws-lambda-rie binary; Bootstrap the function's.
	RIE       string
	Bootstrap string
	// Function is the logical id (AWS_LAMBDA_FUNCTION_NAME); Settings its
	// memory and timeout, which the emulator enforces and reports.
	Function string
	Settings FunctionSettings
	// Env is the function's environment: the stack's (State.Env).
	Env map[string]string
	// Log receives the emulator's and the function's output.
	Log io.Writer
}

// localOnlySwitch is the stack's switch that lets the API and the delivery
// function take local endpoints (http on loopback). A function refuses it
// inside Lambda (function.Settings.LocalFlag), and under the emulator it
// is inside Lambda: an invoked function keeps the production URL policy.
const localOnlySwitch = "WEBHOOK_ALLOW_INSECURE"

// Run starts the emulator on free loopback ports, sends event once, and
// stops the emulator. It returns the function's answer. Errors: the
// emulator did not start or answer within the function's timeout (plus a
// margin for the start); ErrFunction (wrapped, with the answer returned
// too) when the function answered with an error.
func (inv Invocation) Run(ctx context.Context, event []byte) ([]byte, error) {
	addrs, err := FreeAddrs(ctx, 2)
	if err != nil {
		return nil, err
	}
	invokeAt, runtimeAt := addrs[0], addrs[1]
	cmd := exec.Command(inv.RIE, //nolint:noctx // stopped below with SIGTERM, so that it stops the function too
		"--runtime-interface-emulator-address", invokeAt,
		"--runtime-api-address", runtimeAt,
		inv.Bootstrap)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + os.Getenv("HOME"),
		"AWS_LAMBDA_FUNCTION_NAME=" + inv.Function,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(inv.Settings.MemorySize),
		"AWS_LAMBDA_FUNCTION_TIMEOUT=" + strconv.Itoa(inv.Settings.Timeout),
	}
	for k, v := range inv.Env {
		if k == localOnlySwitch {
			continue
		}
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = inv.Log, inv.Log
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", inv.RIE, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	timeout := time.Duration(inv.Settings.Timeout)*time.Second + 30*time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	answer, err := postUntilListening(ctx, "http://"+invokeAt+"/2015-03-31/functions/function/invocations", event, exited)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", inv.Function, err)
	}
	var fnErr struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if json.Unmarshal(answer, &fnErr) == nil && fnErr.ErrorMessage != "" {
		return answer, fmt.Errorf("%w: %s: %s", ErrFunction, fnErr.ErrorType, fnErr.ErrorMessage)
	}
	return answer, nil
}

// postUntilListening posts body to url, retrying while nothing listens
// there yet (the emulator is starting), until ctx ends or exited closes.
func postUntilListening(ctx context.Context, url string, body []byte, exited <-chan struct{}) ([]byte, error) {
	retry := time.NewTicker(10 * time.Millisecond)
	defer retry.Stop()
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			answer, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("the emulator answered %d: %s", resp.StatusCode, answer)
			}
			return answer, err
		}
		if opErr := (*net.OpError)(nil); !errors.As(err, &opErr) || opErr.Op != "dial" {
			return nil, err
		}
		select {
		case <-exited:
			return nil, errors.New("the emulator exited before it answered (see its output above)")
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-retry.C:
		}
	}
}

// FreeAddrs returns n different loopback addresses with ports nobody
// listens on (see localhost.FreePorts), or the error of a listen that failed.
func FreeAddrs(ctx context.Context, n int) ([]string, error) {
	ports, err := localhost.FreePorts(ctx, n)
	if err != nil {
		return nil, err
	}
	addrs := make([]string, n)
	for i, p := range ports {
		addrs[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	}
	return addrs, nil
}
