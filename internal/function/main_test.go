package function_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/jobboard/jobboard/internal/function"
)

// demoSettings are a function's settings, as every main's: they embed
// function.Settings.
type demoSettings struct {
	function.Settings
	name string
}

// Run is every main's shape: arguments refused, then the settings (their
// error stops it before any wiring), then the wiring (its error returned),
// then the local mode with the caller's context, and Close after it.
func TestRun(t *testing.T) {
	t.Parallel()
	var steps []string
	load := func(getenv func(string) string) (demoSettings, error) {
		steps = append(steps, "load")
		s, err := function.Load(getenv)
		if getenv("NAME") == "" {
			return demoSettings{}, errors.Join(err, errors.New("NAME is not set"))
		}
		return demoSettings{Settings: s, name: getenv("NAME")}, err
	}
	wireErr := errors.New("no database")
	wire := func(ctx context.Context, s demoSettings, stdout io.Writer) (*function.Wiring, error) {
		steps = append(steps, "wire "+s.name)
		if s.name == "broken" {
			return nil, wireErr
		}
		return &function.Wiring{
			Local: func(ctx context.Context) error {
				steps = append(steps, "local "+ctx.Value(ctxKey{}).(string))
				_, err := io.WriteString(stdout, "ran")
				return err
			},
			Close: func() { steps = append(steps, "close") },
		}, nil
	}
	run := function.Run(load, wire)
	ctx := context.WithValue(context.Background(), ctxKey{}, "the caller's")
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

	for _, tt := range []struct {
		args    []string
		env     map[string]string
		wantErr string
		steps   string
	}{
		{[]string{"demo", "migrate"}, map[string]string{"NAME": "x"}, "unknown command", ""},
		{[]string{"demo"}, map[string]string{"LOG_LEVEL": "loud"}, "NAME is not set", "load"},
		{[]string{"demo"}, map[string]string{"NAME": "broken"}, wireErr.Error(), "load, wire broken"},
		{[]string{"demo"}, map[string]string{"NAME": "x"}, "", "load, wire x, local the caller's, close"},
	} {
		steps = nil
		var out strings.Builder
		err := run(ctx, tt.args, env(tt.env), &out)
		if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%v %v: %v; want an error with %q", tt.args, tt.env, err, tt.wantErr)
		}
		if got := strings.Join(steps, ", "); got != tt.steps {
			t.Errorf("%v %v: steps %q; want %q", tt.args, tt.env, got, tt.steps)
		}
		if tt.wantErr == "" && out.String() != "ran" {
			t.Errorf("%v %v: stdout %q; want the local mode's", tt.args, tt.env, out.String())
		}
	}
}

type ctxKey struct{}

// mainChild, when set, makes this test binary a function's process: it
// runs function.Main with the run its value names.
const mainChild = "FUNCTION_MAIN_TEST_CHILD"

// TestMain runs the tests or, with mainChild set, a function's process
// (see child).
func TestMain(m *testing.M) {
	switch os.Getenv(mainChild) {
	case "":
		os.Exit(m.Run())
	case "fail":
		function.Main("demo", func(context.Context, []string, func(string) string, io.Writer) error {
			return errors.New("no settings")
		})
	case "wait":
		function.Main("demo", func(ctx context.Context, _ []string, getenv func(string) string, stdout io.Writer) error {
			fmt.Fprintln(stdout, getenv(mainChild)+"ing")
			<-ctx.Done()
			fmt.Fprintln(stdout, "stopped")
			return nil
		})
	}
	os.Exit(0)
}

// child starts this test binary as a function's process running the run
// named by mode, with its standard output piped.
func child(t *testing.T, mode string) (*exec.Cmd, *bufio.Reader, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), mainChild+"="+mode)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewReader(stdout), stderr
}

// Main prints a failed run's error after the function's name and exits 1.
func TestMainReportsAFailureAndExits(t *testing.T) {
	t.Parallel()
	cmd, _, stderr := child(t, "fail")
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("exit: %v; want status 1", err)
	}
	if stderr.String() != "demo: no settings\n" {
		t.Errorf("stderr %q; want %q", stderr.String(), "demo: no settings\n")
	}
}

// SIGTERM (what Lambda and `make dev` send) ends run's context: run
// returns and the process exits 0. run gets the process's environment.
func TestMainStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	cmd, stdout, stderr := child(t, "wait")
	if line, err := stdout.ReadString('\n'); line != "waiting\n" {
		t.Fatalf("first line %q, %v; want waiting (run's getenv reads the process's environment)\n%s", line, err, stderr)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if line, _ := stdout.ReadString('\n'); line != "stopped\n" {
		t.Errorf("after SIGTERM: %q; want stopped", line)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit: %v; want 0\n%s", err, stderr)
	}
}
