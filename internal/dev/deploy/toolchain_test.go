package deploy

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// pinnedToolchain returns the toolchain line of go.mod (go1.26.11, say).
func pinnedToolchain(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^toolchain (go\d+\.\d+\.\d+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no toolchain line naming a patch release (toolchain goX.Y.Z)")
	}
	return string(m[1])
}

// Every Lambda is built with the toolchain go.mod pins, whatever Go the
// machine has: a patched standard library is what ships.
func TestLambdaBuildsUseThePinnedToolchain(t *testing.T) {
	t.Parallel()
	want := "GOTOOLCHAIN=" + pinnedToolchain(t)
	for name := range functionDirs(t, loadTemplate(t)) {
		if out := makeDryRun(t, "build-"+name, "ARTIFACTS_DIR=/artifacts"); !strings.Contains(out, want) {
			t.Errorf("make build-%s does not build with %s:\n%s", name, want, out)
		}
	}
}

// fakeGovulncheck writes a stand-in for govulncheck that logs its arguments
// to a file and answers as the script body says.
func fakeGovulncheck(t *testing.T, body string) (bin, argLog string) {
	t.Helper()
	dir := t.TempDir()
	bin, argLog = filepath.Join(dir, "govulncheck"), filepath.Join(dir, "args")
	script := "#!/usr/bin/env bash\necho \"$*\" >> " + argLog + "\n" + body + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argLog
}

// .ci/vuln (make vuln, make vuln-pinned) asks the public database first,
// falls back on the pinned one only when the public one cannot be fetched,
// and passes govulncheck's verdict on: exit status 3, a called
// vulnerability, fails the target.
func TestVulnScriptFallsBackOnlyWhenTheDatabaseIsUnreachable(t *testing.T) {
	t.Parallel()
	db := t.TempDir()
	unreachable := `if [[ "$1" != -db ]]; then echo 'govulncheck: fetching vulnerabilities: Get "https://db.invalid/index/modules.json.gz": no such host' >&2; exit 1; fi; echo "No vulnerabilities found."`
	tests := []struct {
		name     string
		pinned   bool
		body     string
		wantExit int
		wantArgs []string
	}{
		{"public database answers", false, "exit 0", 0, []string{"./..."}},
		{"called vulnerability", false, "echo 'Your code is affected by 1 vulnerability'; exit 3", 3, []string{"./..."}},
		{"other failure is no reason to fall back", false, "echo 'govulncheck: loading packages: boom' >&2; exit 1", 1, []string{"./..."}},
		{"unreachable: the pinned database", false, unreachable, 0, []string{"./...", "-db file://" + db + " ./..."}},
		{"unreachable and vulnerable", false, `[[ "$1" == -db ]] && exit 3; echo 'govulncheck: fetching vulnerabilities: timeout' >&2; exit 1`, 3,
			[]string{"./...", "-db file://" + db + " ./..."}},
		{"pinned only", true, "exit 0", 0, []string{"-db file://" + db + " ./..."}},
		{"pinned only, vulnerable", true, "exit 3", 3, []string{"-db file://" + db + " ./..."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, argLog := fakeGovulncheck(t, tt.body)
			args := []string{bin, db}
			if tt.pinned {
				args = append([]string{"-pinned"}, args...)
			}
			cmd := exec.Command(filepath.Join(repoRoot, ".ci", "vuln"), args...)
			out, err := cmd.CombinedOutput()
			exit := 0
			var ee *exec.ExitError
			switch {
			case errors.As(err, &ee):
				exit = ee.ExitCode()
			case err != nil:
				t.Fatal(err)
			}
			if exit != tt.wantExit {
				t.Errorf("exit status %d, want %d\n%s", exit, tt.wantExit, out)
			}
			logged, err := os.ReadFile(argLog)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Split(strings.TrimSpace(string(logged)), "\n"); strings.Join(got, "|") != strings.Join(tt.wantArgs, "|") {
				t.Errorf("govulncheck ran with %q, want %q\n%s", got, tt.wantArgs, out)
			}
		})
	}
}

// make test runs the scan against the pinned database, so that a commit's
// verdict does not change overnight; make vuln asks the live one.
func TestMakeTestScansAgainstThePinnedDatabase(t *testing.T) {
	t.Parallel()
	test := makeDryRun(t, "test")
	if !regexp.MustCompile(`(?m)^\.ci/vuln -pinned \S+govulncheck-v\S+ \S+vulndb-v\S+$`).MatchString(test) {
		t.Errorf("make test does not run .ci/vuln -pinned:\n%s", test)
	}
	vuln := makeDryRun(t, "vuln")
	if !regexp.MustCompile(`(?m)^\.ci/vuln \S+govulncheck-v\S+ \S+vulndb-v\S+$`).MatchString(vuln) {
		t.Errorf("make vuln does not run .ci/vuln against the live database first:\n%s", vuln)
	}
}
