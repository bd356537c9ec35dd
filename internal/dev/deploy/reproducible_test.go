package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/dev/deploy/settings"
)

// checkout copies the project's files (tracked, and new ones not ignored,
// as they are in the working tree) into a new git repository and commits
// them; edit, if not nil, then changes the copy, committed too. It returns
// the copy's folder.
func checkout(t *testing.T, files []string, edit func(dir string)) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(repoRoot, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := os.Stat(filepath.Join(repoRoot, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	git("init", "-q")
	git("add", "-A")
	git("commit", "-q", "-m", "the project")
	if edit != nil {
		edit(dir)
		git("commit", "-q", "-a", "-m", "a change outside the code")
	}
	return dir
}

// makeIn runs make args in dir with the environment's settings on top of
// this process's (less make's own, which `make test` would pass on).
func makeIn(t *testing.T, dir string, env []string, args ...string) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"--no-print-directory", "-C", dir}, args...)...)
	cmd.Env = append(withoutEnv(os.Environ(), "MAKEFLAGS", "MFLAGS", "MAKELEVEL"), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}

// Two commits that differ only outside the code (README.md) build the same
// Lambda artifacts, byte for byte, through the targets `sam build` runs
// (make build), even where the go command is told to stamp version control
// information into binaries (GOFLAGS=-buildvcs=true; its default, auto,
// stamps in any git checkout): `sam deploy` would otherwise upload new
// artifacts for a commit that changes no code, and SAM would publish a new
// version of every function. Each artifact's settings.sha256 is the digest
// of its function's settings (internal/dev/deploy/settings).
func TestTheSameCodeBuildsTheSameArtifacts(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard")
	cmd.Dir = repoRoot
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Fields(string(out))
	dirs := [2]string{
		checkout(t, files, nil),
		checkout(t, files, func(dir string) {
			f, err := os.OpenFile(filepath.Join(dir, "README.md"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("\nA line that changes no code.\n"); err != nil {
				t.Fatal(err)
			}
		}),
	}
	// One after the other: the second finds the first's packages in the
	// build cache (their keys hold no path: -trimpath), and links.
	for _, dir := range dirs {
		makeIn(t, dir, []string{"GOFLAGS=-buildvcs=true"}, "build")
	}

	st, sets := buildSettings(t)
	tpl := loadTemplate(t)
	for fn, pkg := range functionDirs(t, tpl) {
		var artifacts [2]map[string][]byte
		for i, dir := range dirs {
			artifacts[i] = map[string][]byte{}
			entries, err := os.ReadDir(filepath.Join(dir, "build", pkg))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				data, err := os.ReadFile(filepath.Join(dir, "build", pkg, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				artifacts[i][e.Name()] = data
			}
		}
		for name, a := range artifacts[0] {
			b, ok := artifacts[1][name]
			switch {
			case !ok:
				t.Errorf("%s: %s is in the first build only", fn, name)
			case !bytes.Equal(a, b):
				t.Errorf("%s: %s differs between two commits with the same code (%d and %d bytes)", fn, name, len(a), len(b))
			default:
				t.Logf("%s: %s identical in both builds (%d bytes)", fn, name, len(a))
			}
		}
		if len(artifacts[0]) != len(artifacts[1]) {
			t.Errorf("%s: the builds hold %d and %d files", fn, len(artifacts[0]), len(artifacts[1]))
		}
		digest, err := settings.Digest(st, sets, fn)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(artifacts[0]["settings.sha256"]); got != digest+"\n" {
			t.Errorf("%s: settings.sha256 holds %q; want the digest of its settings %s", fn, got, digest)
		}
		if _, ok := artifacts[0]["bootstrap"]; !ok {
			t.Errorf("%s: no bootstrap in the artifact", fn)
		}
	}
}
