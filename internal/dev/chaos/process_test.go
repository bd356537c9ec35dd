package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The fleet's tests run this test binary itself as the child process:
// with CHAOS_HELPER=run it logs a JSON line and runs until killed, with
// CHAOS_HELPER=crash it exits 3 at once.
func TestMain(m *testing.M) {
	switch os.Getenv("CHAOS_HELPER") {
	case "run":
		fmt.Println(`{"time":"2026-01-02T03:04:05Z","msg":"sweep done"}`)
		for {
			time.Sleep(time.Hour)
		}
	case "crash":
		os.Exit(3)
	}
	dir, err := os.MkdirTemp("", "jobboard-chaos-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedBinDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sharedBinDir holds the functions' binaries that the chaos runs of this
// test process share (TestMain removes it).
var sharedBinDir string

// BuildOnce builds the functions into one folder for every run of this test
// process and returns it: the runs' own builds would link the same five
// binaries again, each time.
var BuildOnce = sync.OnceValues(func() (string, error) {
	return sharedBinDir, buildBinaries(context.Background(), sharedBinDir)
})

func helperFleet(t *testing.T) *fleet {
	t.Helper()
	f := newFleet(t.TempDir())
	t.Cleanup(f.stopAll)
	return f
}

// processState reads a process's state letter from /proc (R, S, T, Z...).
func processState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "gone"
	}
	// pid (comm) state ...; comm may contain spaces, so cut at the last ')'.
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFleetKillsFreezesAndRestarts(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatalf("this test reads process states from /proc: %v", err)
	}
	f := helperFleet(t)
	s, err := f.add("worker-1", roleWorker, os.Args[0], []string{"CHAOS_HELPER=run"})
	if err != nil {
		t.Fatal(err)
	}
	first := f.current(s)
	waitFor(t, "the first instance to log", func() bool {
		b, _ := os.ReadFile(first.logPath)
		return len(b) > 0
	})
	if got := f.pick(roleWorker, func(int) int { return 0 }); got != s {
		t.Fatalf("pick = %v, want the running worker", got)
	}
	if got := f.pick(roleAPI, func(int) int { return 0 }); got != nil {
		t.Fatalf("pick(api) = %v, want nil", got)
	}

	frozen := f.freeze(s)
	if frozen != first {
		t.Fatalf("freeze = %v", frozen)
	}
	waitFor(t, "the process to stop", func() bool { return processState(t, first.cmd.Process.Pid) == "T" })
	if got := f.pick(roleWorker, func(int) int { return 0 }); got != nil {
		t.Error("pick chose a frozen worker")
	}
	f.thaw(frozen)
	waitFor(t, "the process to run again", func() bool { return processState(t, first.cmd.Process.Pid) != "T" })

	if killed := f.kill(s); killed != first {
		t.Fatalf("kill = %v", killed)
	}
	var exit *exec.ExitError
	if !errors.As(first.waitErr, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the killed process ended with %v, want SIGKILL", first.waitErr)
	}
	if f.current(s) != nil {
		t.Error("the slot still has a current instance after kill")
	}
	if err := f.restoreAll(); err != nil {
		t.Fatal(err)
	}
	second := f.current(s)
	if second == nil || second.id != "worker-1#2" {
		t.Fatalf("after restoreAll the slot runs %v, want worker-1#2", second)
	}
	if got := f.disturbedIDs(); !got["worker-1#1"] || got["worker-1#2"] {
		t.Errorf("disturbedIDs = %v, want only worker-1#1", got)
	}
	started, killed := f.counts()
	if started[roleWorker] != 2 || killed[roleWorker] != 1 {
		t.Errorf("counts = %v started, %v killed", started, killed)
	}

	// Each instance logs to its own file; the sweep line can be read back.
	waitFor(t, "the second instance to log", func() bool {
		b, _ := os.ReadFile(second.logPath)
		return len(b) > 0
	})
	if filepath.Base(second.logPath) != "worker-1.2.log" {
		t.Errorf("log path %s", second.logPath)
	}
	if n, err := sweepsSince([]*instance{first, second}, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil || n != 2 {
		t.Errorf("sweepsSince = %d, %v; want 2", n, err)
	}

	// A frozen process is killed too when the fleet stops.
	f.freeze(s)
	f.stopAll()
	select {
	case <-second.exited:
	default:
		t.Fatal("stopAll returned with a process running")
	}
	if err := f.start(s); err == nil {
		t.Error("start after stopAll succeeded")
	}
	if c := f.crashed(); len(c) != 0 {
		t.Errorf("crashed = %v, want none: the fleet stopped them", c)
	}
}

func TestFleetReportsAProcessThatExitsOnItsOwn(t *testing.T) {
	t.Parallel()
	f := helperFleet(t)
	s, err := f.add("api-1", roleAPI, os.Args[0], []string{"CHAOS_HELPER=crash"})
	if err != nil {
		t.Fatal(err)
	}
	in := f.current(s)
	if in == nil {
		in = f.instancesOf(roleAPI)[0] // it crashed already
	}
	<-in.exited
	waitFor(t, "the crash to be recorded", func() bool { return len(f.crashed()) == 1 })
	if c := f.crashed()[0]; !strings.HasPrefix(c, "api-1#1: exit status 3") {
		t.Errorf("crashed = %q", c)
	}
}

func TestReadRecordLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "worker-1.1.log")
	log := strings.Join([]string{
		`{"time":"2026-01-02T03:04:05Z","level":"DEBUG","msg":"claimed","event_id":"e1","outcome":"claimed","lease_token":"L1"}`,
		`{"time":"2026-01-02T03:04:06Z","level":"INFO","msg":"batch processed","received":1}`,
		`goroutine 1 [running]:`,
		`{"_aws":{"Timestamp":1},"EmailsSent":1}`,
		`{"time":"2026-01-02T03:04:07Z","level":"INFO","msg":"status email sent","event_id":"e1","outcome":"sent","lease_token":"L1","ses_message_id":"s-1"}`,
	}, "\n") + "\n"
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, err := readRecordLines([]*instance{{id: "worker-1#1", logPath: path}})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 {
		t.Fatalf("lines = %+v, want the two record lines", lines)
	}
	if l := lines[0]; l.Instance != "worker-1#1" || l.Seq != 0 || l.EventID != "e1" || l.Outcome != "claimed" || l.LeaseToken != "L1" {
		t.Errorf("first = %+v", l)
	}
	if l := lines[1]; l.Seq != 4 || l.Outcome != "sent" || l.SESID != "s-1" || l.Time.Second() != 7 {
		t.Errorf("second = %+v", l)
	}
}
