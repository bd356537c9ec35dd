package chaos_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/dev/chaos"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// The short chaos run: the same harness as `make chaos`, with a few
// hundred status changes and every fault kind. It fails on any lost email,
// any duplicate outside the documented window, any second email from the
// redrive or the retention probe, or a stack that does not settle.
func TestShortRunKeepsTheEmailPromise(t *testing.T) {
	t.Parallel() // the two short runs mostly wait (on faults, on settling): side by side they take the time of one
	bin, err := chaos.BuildOnce()
	if err != nil {
		t.Fatal(err)
	}
	cfg := chaos.Short()
	cfg.ServerURL = pgtest.ServerURL()
	cfg.Seed = time.Now().UnixNano()
	cfg.BinDir = bin
	cfg.Out = &lineLogger{t: t}
	cfg.LogDir = filepath.Join(t.TempDir(), "logs") // as `make chaos` names one

	rep, err := chaos.Run(context.Background(), cfg)
	if rep != nil {
		var b bytes.Buffer
		rep.Print(&b)
		t.Logf("\n%s", b.String())
	}
	if err != nil {
		t.Fatalf("chaos run: %v", err)
	}
	if !rep.Passed() {
		t.Fatalf("the short chaos run (seed %d) broke the email promise; repeat it with\n"+
			"  make chaos CHAOS_FLAGS='-short -seed %d'\n- %s", cfg.Seed, cfg.Seed, strings.Join(rep.Failures, "\n- "))
	}
	// A folder the run was given keeps the logs where the report says,
	// although the run passed.
	if rep.LogDir != cfg.LogDir {
		t.Errorf("the report names the logs %q; want %q", rep.LogDir, cfg.LogDir)
	}
	for _, name := range []string{"verdict.json", "api-1.1.log", "worker-1.1.log", "sweeper.1.log"} {
		if _, err := os.Stat(filepath.Join(cfg.LogDir, name)); err != nil {
			t.Errorf("a passing run removed its logs: %v", err)
		}
	}
}

// lineLogger sends the run's progress lines to the test log.
type lineLogger struct {
	t   *testing.T
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		l.t.Log(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
}

// A run that cannot start its processes still stops what it started and
// drops its database, and says why it failed.
func TestRunCleansUpWhenTheStackCannotStart(t *testing.T) {
	cfg := chaos.Short()
	cfg.ServerURL = pgtest.ServerURL()
	cfg.Seed = 1
	cfg.BinDir = t.TempDir() // no binaries in it
	cfg.LogDir = t.TempDir()

	rep, err := chaos.Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "start the stack") {
		t.Fatalf("Run error = %v, want the stack's start failure", err)
	}
	if rep == nil || rep.Passed() || rep.Database == "" {
		t.Fatalf("report = %+v, want a failed run that names its database", rep)
	}
	conn, err := pgx.Connect(context.Background(), cfg.ServerURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, rep.Database).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("database %s is still there", rep.Database)
	}
}
