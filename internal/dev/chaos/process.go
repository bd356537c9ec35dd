package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"
)

// role is what a process of the stack is.
type role string

const (
	roleAPI     role = "api"
	roleWorker  role = "worker"
	roleSweeper role = "sweeper"
)

// slot is one member of the stack, e.g. worker-2, played by successive
// process instances as the harness kills and restarts it.
type slot struct {
	name string
	role role
	bin  string
	env  []string

	cur *instance // nil while down; guarded by fleet.mu
	n   int       // instances started so far
}

// instance is one process. Its output goes to its own log file, so that a
// log line can be traced to the process that wrote it.
type instance struct {
	id      string // e.g. "worker-2#3"
	slot    *slot
	cmd     *exec.Cmd
	logPath string
	started time.Time
	exited  chan struct{}
	waitErr error // set before exited is closed

	// Guarded by fleet.mu.
	frozen    bool
	disturbed bool // the harness killed or froze it
	killed    bool
	crashed   bool // it exited while nobody was stopping it
}

// fleet runs the stack's processes.
type fleet struct {
	logDir string

	mu        sync.Mutex
	slots     []*slot
	instances []*instance
	stopping  bool
}

func newFleet(logDir string) *fleet { return &fleet{logDir: logDir} }

// add registers a slot and starts its first instance.
func (f *fleet) add(name string, r role, bin string, env []string) (*slot, error) {
	s := &slot{name: name, role: r, bin: bin, env: env}
	f.mu.Lock()
	f.slots = append(f.slots, s)
	f.mu.Unlock()
	return s, f.start(s)
}

// start starts a new instance of s, which must be down.
func (f *fleet) start(s *slot) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopping {
		return fmt.Errorf("start %s: the fleet is stopping", s.name)
	}
	if s.cur != nil {
		return fmt.Errorf("start %s: already running as %s", s.name, s.cur.id)
	}
	s.n++
	in := &instance{
		id:      fmt.Sprintf("%s#%d", s.name, s.n),
		slot:    s,
		logPath: filepath.Join(f.logDir, fmt.Sprintf("%s.%d.log", s.name, s.n)),
		exited:  make(chan struct{}),
	}
	logFile, err := os.Create(in.logPath)
	if err != nil {
		return fmt.Errorf("start %s: %w", in.id, err)
	}
	cmd := exec.Command(s.bin) //nolint:noctx // the fleet stops it with SIGKILL, on every path
	cmd.Env = s.env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("start %s: %w", in.id, err)
	}
	in.cmd, in.started = cmd, time.Now()
	s.cur = in
	f.instances = append(f.instances, in)
	go func() {
		in.waitErr = cmd.Wait()
		_ = logFile.Close()
		f.mu.Lock()
		if s.cur == in {
			s.cur = nil
		}
		in.crashed = !in.killed && !f.stopping
		f.mu.Unlock()
		close(in.exited)
	}()
	return nil
}

// current returns the running instance of s, or nil.
func (f *fleet) current(s *slot) *instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	return s.cur
}

// signalGroup sends sig to the process group of s's current instance.
func signalGroup(in *instance, sig syscall.Signal) {
	_ = syscall.Kill(-in.cmd.Process.Pid, sig)
}

// kill SIGKILLs the current instance of s and waits until it is gone. It
// returns the instance, or nil when s was down.
func (f *fleet) kill(s *slot) *instance {
	f.mu.Lock()
	in := s.cur
	if in != nil {
		in.disturbed, in.killed = true, true
	}
	f.mu.Unlock()
	if in == nil {
		return nil
	}
	signalGroup(in, syscall.SIGKILL)
	<-in.exited
	return in
}

// freeze SIGSTOPs the current instance of s; thaw SIGCONTs it.
func (f *fleet) freeze(s *slot) *instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := s.cur
	if in == nil || in.frozen {
		return nil
	}
	in.frozen, in.disturbed = true, true
	signalGroup(in, syscall.SIGSTOP)
	return in
}

func (f *fleet) thaw(in *instance) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.frozen {
		signalGroup(in, syscall.SIGCONT)
		in.frozen = false
	}
}

// pick returns a slot of role r that is running and not frozen, chosen by
// choose(n) among n candidates, or nil.
func (f *fleet) pick(r role, choose func(n int) int) *slot {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ok []*slot
	for _, s := range f.slots {
		if s.role == r && s.cur != nil && !s.cur.frozen {
			ok = append(ok, s)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	return ok[choose(len(ok))]
}

// restoreAll thaws every frozen instance and starts every slot that is
// down, so that the stack is whole again before it is asked to settle.
func (f *fleet) restoreAll() error {
	f.mu.Lock()
	var down []*slot
	for _, s := range f.slots {
		switch {
		case s.cur == nil:
			down = append(down, s)
		case s.cur.frozen:
			signalGroup(s.cur, syscall.SIGCONT)
			s.cur.frozen = false
		}
	}
	f.mu.Unlock()
	for _, s := range down {
		if err := f.start(s); err != nil {
			return err
		}
	}
	return nil
}

// stopAll kills every process the fleet started and waits for them. It is
// safe to call more than once and on every path.
func (f *fleet) stopAll() {
	f.mu.Lock()
	f.stopping = true
	all := slices.Clone(f.instances)
	f.mu.Unlock()
	for _, in := range all {
		select {
		case <-in.exited:
			continue
		default:
		}
		signalGroup(in, syscall.SIGKILL) // also ends a stopped process
	}
	for _, in := range all {
		<-in.exited
	}
}

// crashed returns the instances that exited without the harness killing
// them, with their exit status.
func (f *fleet) crashed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, in := range f.instances {
		if in.crashed {
			out = append(out, fmt.Sprintf("%s: %v", in.id, in.waitErr))
		}
	}
	return out
}

// instancesOf returns every instance of role r started so far.
func (f *fleet) instancesOf(r role) []*instance {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*instance
	for _, in := range f.instances {
		if in.slot.role == r {
			out = append(out, in)
		}
	}
	return out
}

// disturbedIDs returns the ids of the instances the harness killed or
// froze.
func (f *fleet) disturbedIDs() map[string]bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]bool{}
	for _, in := range f.instances {
		if in.disturbed {
			out[in.id] = true
		}
	}
	return out
}

// counts returns, per role, how many instances were started and killed.
func (f *fleet) counts() (started, killed map[role]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	started, killed = map[role]int{}, map[role]int{}
	for _, in := range f.instances {
		started[in.slot.role]++
		if in.killed {
			killed[in.slot.role]++
		}
	}
	return started, killed
}
