package function

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Loaded is what every function's settings are: they embed Settings, the
// settings all functions share, which Run hands to Wiring.Run.
type Loaded interface {
	shared() Settings
}

func (s Settings) shared() Settings { return s }

// Run returns a function's main without the process, which its tests
// call: it refuses command-line arguments, reads the settings with load
// (every missing or malformed variable in one error), builds the function
// from them with wire (stdout takes its log and metric lines), and runs it
// (Wiring.Run): inside Lambda under the runtime, which does not return;
// elsewhere its local mode, until it is done or ctx ends. Every main has
// this shape; what differs is its settings and what its wire builds.
func Run[S Loaded](load func(getenv func(string) string) (S, error),
	wire func(ctx context.Context, s S, stdout io.Writer) (*Wiring, error)) func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	return func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
		if len(args) > 1 {
			return fmt.Errorf("unknown command %q: a function takes no arguments (migrations: make migrate)", args[1])
		}
		s, err := load(getenv)
		if err != nil {
			return err
		}
		w, err := wire(ctx, s, stdout)
		if err != nil {
			return err
		}
		return w.Run(ctx, s.shared())
	}
}

// Main is the body of every function's main: it calls run with the
// process's arguments, environment and standard output, under a context
// that SIGINT or SIGTERM ends, and when run fails prints "name: error" on
// standard error and exits with status 1. It is the one place that hands
// the environment over and exits: below it everything takes what it needs
// as arguments and returns its errors.
func Main(name string, run func(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
