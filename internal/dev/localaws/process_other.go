//go:build !unix

package localaws

import (
	"os"
	"os/exec"
)

var (
	sigTerm = os.Kill
	sigKill = os.Kill
)

func setProcessGroup(*exec.Cmd) {}

// signalGroup kills the process; without process groups its children rely on
// noticing that their stdin closed.
func signalGroup(cmd *exec.Cmd, sig os.Signal) error {
	return cmd.Process.Signal(sig)
}
