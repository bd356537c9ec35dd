//go:build unix && !linux

package chaos

import "syscall"

// sysProcAttr puts a child in its own process group, so that a terminal's
// Ctrl-C reaches only the harness, which stops the children itself.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
