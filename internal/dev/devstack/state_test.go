package devstack

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without a running stack, the tools are told to start one: no state file,
// or one whose API does not answer (a stack that was killed).
func TestReadStateWithoutAStack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := ReadState(context.Background(), filepath.Join(dir, "none.json")); !errors.Is(err, ErrNotRunning) {
		t.Errorf("no state file: %v; want ErrNotRunning", err)
	}
	addrs, err := FreeAddrs(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	dead := addrs[0]
	path := filepath.Join(dir, "stack.json")
	if err := writeState(path, State{APIURL: "http://" + dead, Env: map[string]string{"JWT_SECRET": "k"}}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v (%v); want 0600: it holds the stack's JWT key", fi.Mode(), err)
	}
	if _, err := ReadState(context.Background(), path); !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("state of a dead stack: %v; want ErrNotRunning, saying the API does not answer", err)
	}
	if err := os.WriteFile(path, []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadState(context.Background(), path); err == nil || errors.Is(err, ErrNotRunning) {
		t.Errorf("a file that is not a state: %v; want an error saying so", err)
	}
}

// FillEvent refuses a placeholder it does not know rather than sending it
// as it is, and says so before it asks the API anything. (What it fills in,
// the tokens and the demo's time, TestLocalLoop sees at work.)
func TestFillEventRefusesUnknownPlaceholders(t *testing.T) {
	t.Parallel()
	if _, err := FillEvent(context.Background(), State{}, []byte(`{"a":"{{nope}}","b":"{{nope}}","c":"{{what}}"}`)); err == nil || !strings.Contains(err.Error(), "[nope what]") {
		t.Errorf("FillEvent with unknown placeholders: %v; want an error naming them once each", err)
	}
}

// The ports handed to servers of one start are all different. The kernel
// gives again a port it has just let go often enough (0 to 2 repeats in
// 200 draws, measured) that an emulator once got one port for its two APIs.
func TestFreePortsAreDifferent(t *testing.T) {
	t.Parallel()
	const n = 200
	ports, err := FreePorts(context.Background(), n)
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
	addrs, err := FreeAddrs(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if addrs[0] == addrs[1] {
		t.Errorf("FreeAddrs gave %s twice", addrs[0])
	}
}
