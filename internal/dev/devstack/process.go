package devstack

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a child gets to finish after SIGTERM.
const stopGrace = 10 * time.Second

// group runs the stack's child processes. A child that exits on its own
// cancels the whole stack: a half-running system is worse than none.
type group struct {
	out    io.Writer
	outMu  sync.Mutex
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup
	cmds   []*exec.Cmd
}

func newGroup(out io.Writer, cancel context.CancelCauseFunc) *group {
	return &group{out: out, cancel: cancel}
}

// start runs bin with env added to this process's environment, copying its
// output line by line to the group's writer, prefixed with name.
func (g *group) start(ctx context.Context, name, bin string, env []string) error {
	cmd := exec.Command(bin) //nolint:noctx // stopped by group.stop with SIGTERM, not killed by ctx
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	g.cmds = append(g.cmds, cmd)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			g.outMu.Lock()
			fmt.Fprintf(g.out, "%-7s | %s\n", name, sc.Bytes())
			g.outMu.Unlock()
		}
		err := cmd.Wait()
		if ctx.Err() == nil {
			g.cancel(fmt.Errorf("%s exited: %w", name, err))
		}
	}()
	return nil
}

// stop sends SIGTERM to every child's process group and waits for them,
// killing those still running after stopGrace.
func (g *group) stop() {
	for _, cmd := range g.cmds {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() { g.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(stopGrace):
		for _, cmd := range g.cmds {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		<-done
	}
}
