package main

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// devloop says how to use it, and says to start `make dev` when nothing
// runs (the stack itself is exercised through make in internal/dev/devstack).
func TestRunArguments(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "stack.json")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"no command", []string{"devloop"}, "usage"},
		{"unknown command", []string{"devloop", "deploy"}, "unknown command"},
		{"invoke without the emulator", []string{"devloop", "invoke", "ApiFunction", "events/api-apply.json"}, "usage"},
		{"invoke without a stack", []string{"devloop", "invoke", "-state", missing, "-rie", "rie", "-bootstrap", "api", "ApiFunction", "x.json"}, "start `make dev` first"},
		{"poison without a stack", []string{"devloop", "poison", "-state", missing}, "start `make dev` first"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run(%q) = %v; want an error saying %q", tt.args, err, tt.want)
			}
		})
	}
}
