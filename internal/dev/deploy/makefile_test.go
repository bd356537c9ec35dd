package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// makeDryRun returns the commands `make -n args...` would run at the
// repository root: the Makefile exactly as make reads it, variables expanded.
func makeDryRun(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-n", "--no-print-directory", "-C", repoRoot}, args...)...)
	// Under `make test` the parent's flags (jobserver, -k, ...) would leak in.
	cmd.Env = withoutEnv(os.Environ(), "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || name == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

var functionPackage = regexp.MustCompile(`\./functions/([A-Za-z0-9_-]+)`)

// functionDirs maps each AWS::Serverless::Function of the template to the
// folder under functions/ that its build-<LogicalId> target compiles. It
// fails t if a target is missing or builds something else.
func functionDirs(t testing.TB, tpl *samTemplate) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	for _, name := range tpl.functions(t) {
		out := makeDryRun(t, "build-"+name, "ARTIFACTS_DIR=/artifacts")
		m := functionPackage.FindAllStringSubmatch(out, -1)
		if len(m) != 1 {
			t.Fatalf("make build-%s does not build exactly one ./functions/<dir> package:\n%s", name, out)
		}
		dirs[name] = m[0][1]
	}
	return dirs
}

// goArch is the GOARCH of each Lambda architecture.
var goArch = map[string]string{"arm64": "arm64", "x86_64": "amd64"}

func TestMakefileBuildsEveryFunctionForLambda(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	g, err := tpl.typed.GetServerlessGlobalFunction()
	if err != nil {
		t.Fatal(err)
	}
	for name, dir := range functionDirs(t, tpl) {
		fn, err := tpl.typed.GetServerlessFunctionWithName(name)
		if err != nil {
			t.Fatal(err)
		}
		arch := fn.Architectures
		if arch == nil && g.Architectures != nil {
			arch = *g.Architectures
		}
		if len(arch) != 1 {
			t.Fatalf("%s: architectures %v", name, arch)
		}
		out := makeDryRun(t, "build-"+name, "ARTIFACTS_DIR=/artifacts")
		for _, want := range []string{
			"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + goArch[arch[0]],
			"-tags lambda.norpc", "-o /artifacts/bootstrap", "./functions/" + dir,
		} {
			if !strings.Contains(out, want) {
				t.Errorf("make build-%s (%s) lacks %q:\n%s", name, arch[0], want, out)
			}
		}
		if _, err := os.Stat(filepath.Join(repoRoot, "functions", dir)); err != nil {
			t.Errorf("%s: make build-%s compiles ./functions/%s, which does not exist: %v", name, name, dir, err)
		}
	}
}

func TestMakeBuildBuildsEveryFunction(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	out := makeDryRun(t, "build")
	for name, dir := range functionDirs(t, tpl) {
		want := "-o build/" + dir + "/bootstrap ./functions/" + dir
		if !strings.Contains(out, want) {
			t.Errorf("make build does not build %s (%q):\n%s", name, want, out)
		}
	}
}

// template.yaml documents `make migrate` as the way to migrate a deployed
// database; internal/dev/cmd/migrate's tests cover the command itself.
func TestMakeMigrateRunsTheMigrateCommand(t *testing.T) {
	t.Parallel()
	out := strings.TrimSpace(makeDryRun(t, "migrate"))
	if !regexp.MustCompile(`(^|\s)run \./internal/dev/cmd/migrate$`).MatchString(out) {
		t.Errorf("make migrate runs %q; want `go run ./internal/dev/cmd/migrate`", out)
	}
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "make migrate") {
		t.Error("template.yaml does not document `make migrate`")
	}
}
