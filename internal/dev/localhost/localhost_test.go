package localhost_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/jobboard/jobboard/internal/dev/localhost"
)

// The ports handed to servers of one start are all different. The kernel
// gives again a port it has just let go often enough (0 to 2 repeats in
// 200 draws, measured) that an emulator once got one port for its two APIs.
func TestFreePortsAreDifferent(t *testing.T) {
	t.Parallel()
	const n = 200
	ports, err := localhost.FreePorts(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice among %d", p, n)
		}
		seen[p] = true
	}
	if len(ports) != n {
		t.Errorf("%d ports; want %d", len(ports), n)
	}
}

// The module root is the repository's: three folders up from this
// package (internal/dev/localhost), with the go.mod in it.
func TestModuleRoot(t *testing.T) {
	t.Parallel()
	root, err := localhost.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	want, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if root != want {
		t.Errorf("ModuleRoot() = %s; want %s", root, want)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("no go.mod in %s: %v", root, err)
	}
}
