package deploy

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// maxBootstrapBytes is the aim for each function's Lambda artifact (the
// stripped linux/arm64 bootstrap that `make build` writes): a smaller
// binary is less to download into a new sandbox and to page in at start.
const maxBootstrapBytes = 15_000_000

// Each function's bootstrap, built exactly as `make build-<LogicalId>` (and
// so `sam build`) builds it, stays within maxBootstrapBytes. The sizes, and
// the hello-world baseline's, are logged for docs/performance.md.
func TestBootstrapsFitTheSizeAim(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	out := t.TempDir()
	for _, name := range tpl.functions(t) {
		dir := filepath.Join(out, name)
		cmd := exec.Command("make", "--no-print-directory", "-C", repoRoot, "build-"+name, "ARTIFACTS_DIR="+dir)
		cmd.Env = withoutEnv(os.Environ(), "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make build-%s: %v\n%s", name, err, b)
		}
		fi, err := os.Stat(filepath.Join(dir, "bootstrap"))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.1f MB", name, float64(fi.Size())/1e6)
		if fi.Size() > maxBootstrapBytes {
			t.Errorf("%s: bootstrap is %d bytes; the aim is at most %d", name, fi.Size(), maxBootstrapBytes)
		}
	}
	for _, baseline := range []string{baselineHello, baselineHelloDB, workerFloor} {
		if fi, err := os.Stat(buildBaseline(t, baseline, "GOOS=linux", "GOARCH=arm64")); err == nil {
			t.Logf("%s (baseline): %.1f MB", baseline, float64(fi.Size())/1e6)
		}
	}
}

// The baselines of the cold-start figures, in testdata: the smallest Go
// Lambda function, and the same with a database connection at init.
const (
	baselineHello   = "hello"
	baselineHelloDB = "hellodb"
)

// workerFloor, in testdata, is hellodb with the three AWS clients the
// worker cannot do without (SES v2, SQS, Secrets Manager) and nothing else:
// the least the worker's init can be while it connects at init. It is
// measured as a function is, and the worker against it.
const workerFloor = "workerfloor"

// buildBaseline builds testdata/name with the flags of the functions'
// builds (and the extra environment, such as GOARCH), and returns its path.
func buildBaseline(tb testing.TB, name string, env ...string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), name)
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", bin, "./internal/dev/deploy/testdata/"+name)
	cmd.Dir = repoRoot
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build %s: %v\n%s", name, err, b)
	}
	return bin
}

// initReport is the emulator's line for a finished init phase (the
// runtime's start up to its first request for work), as Lambda's REPORT
// line gives Init Duration.
var initReport = regexp.MustCompile(`INIT REPORT\(durationMs: ([0-9.]+)\)`)

// coldStart is one measured cold start.
type coldStart struct {
	// firstAnswer is from starting the emulator to the first invocation's
	// answer: emulator start, process start, init, one event.
	firstAnswer time.Duration
	// init is the emulator's init duration.
	init time.Duration
}

// measureColdStart starts bootstrap under rie, invokes it once with payload
// and stops it.
func measureColdStart(b *testing.B, rie, name, bootstrap string, env map[string]string, payload []byte) coldStart {
	b.Helper()
	start := time.Now()
	e := startEmulator(b, rie, name, bootstrap, env)
	e.invoke(payload)
	cs := coldStart{firstAnswer: time.Since(start)}
	// The emulator logs the init report before it forwards the answer, but
	// its output reaches the buffer through a pipe: poll for it.
	var m []string
	for deadline := time.Now().Add(5 * time.Second); m == nil; {
		if m = initReport.FindStringSubmatch(e.output.String()); m == nil && time.Now().After(deadline) {
			b.Fatalf("%s: no INIT REPORT in the emulator's output:\n%s", name, e.output.String())
		}
		time.Sleep(time.Millisecond) // polling interval, not synchronisation
	}
	ms, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		b.Fatal(err)
	}
	cs.init = time.Duration(ms * float64(time.Millisecond))
	_ = e.cmd.Process.Kill()
	<-e.exited
	return cs
}

// BenchmarkColdStart: every function's bootstrap, two baselines and the
// worker's floor, each started under aws-lambda-rie and invoked once, in
// turn, b.N rounds (`make coldstart` runs 20). The baselines are a
// hello-world Go function, and the same with a pgx pool opened and pinged
// at init (as every function does, so that the first request finds a
// connection); the floor is workerFloor. Everything is built for
// this machine with the flags of `make build`, and the functions connect
// to PostgreSQL and the stand-ins as they do in Lambda.
//
// Reported per function: the median of its first answer (emulator start to
// the first invocation's answer) and of its init (the emulator's INIT
// REPORT: process start to the runtime's first request for work), in
// milliseconds, and the medians of the ratios to each baseline's figures of
// the same round (the worker's also to its floor's), so that a machine
// whose speed drifts still compares like with like.
func BenchmarkColdStart(b *testing.B) {
	tpl := loadTemplate(b)
	rie := rieBinary(b)
	bins := buildBootstraps(b, tpl)
	baselines := []string{baselineHello, baselineHelloDB}
	for _, name := range append(slices.Clone(baselines), workerFloor) {
		bins[name] = buildBaseline(b, name)
	}
	env, _ := localEnv(b, "cold.example.com")
	payloads := map[string][]byte{
		baselineHello:     []byte(`{}`),
		baselineHelloDB:   []byte(`{}`),
		workerFloor:       []byte(`{}`),
		"ApiFunction":     readEvent(b, "api-list-jobs.json", nil),
		"WorkerFunction":  readEvent(b, "sqs-malformed.json", nil),
		"SweeperFunction": readEvent(b, "sweeper-schedule.json", nil),
		"WebhookFunction": readEvent(b, "sqs-webhook-delivery.json", nil),
	}
	// The webhook function sets its session role, which only the server's
	// administrator may for pgtestdb's databases (webhook_test.go).
	webhookEnv := maps.Clone(env)
	webhookEnv["DATABASE_URL"] = pgtest.AdminURL(b, env["DATABASE_URL"])
	names := append(slices.Clone(baselines), workerFloor)
	for _, fn := range tpl.functions(b) {
		// The deploy's own functions run once per deploy: their cold start
		// is nobody's wait (their size is held to the aim all the same).
		if fn != "MigrateFunction" && fn != "PreTrafficHookFunction" {
			names = append(names, fn)
		}
	}
	// Each name's figures are compared with these, round by round.
	comparedWith := func(name string) []string {
		switch name {
		case baselineHello:
			return nil
		case baselineHelloDB:
			return []string{baselineHello}
		case "WorkerFunction":
			return append(slices.Clone(baselines), workerFloor)
		}
		return baselines
	}
	samples := map[string][]coldStart{}
	for b.Loop() {
		for _, name := range names {
			fenv := env
			if name == "WebhookFunction" {
				fenv = webhookEnv
			}
			samples[name] = append(samples[name], measureColdStart(b, rie, name, bins[name], fenv, payloads[name]))
		}
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, name := range names {
		var first, init []float64
		for _, s := range samples[name] {
			first = append(first, ms(s.firstAnswer))
			init = append(init, ms(s.init))
		}
		b.ReportMetric(median(first), name+"-first-ms")
		b.ReportMetric(median(init), name+"-init-ms")
		for _, base := range comparedWith(name) {
			var firstRatio, initRatio []float64
			for i, s := range samples[name] {
				firstRatio = append(firstRatio, ms(s.firstAnswer)/ms(samples[base][i].firstAnswer))
				initRatio = append(initRatio, ms(s.init)/ms(samples[base][i].init))
			}
			b.ReportMetric(median(firstRatio), name+"-first/"+base)
			b.ReportMetric(median(initRatio), name+"-init/"+base)
		}
	}
}

// median of xs (not empty); xs is sorted in place.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
