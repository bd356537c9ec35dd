// Command chaos runs the chaos harness (`make chaos`): the whole job board
// under injected faults, then a report of lost and duplicated emails (see
// package chaos). It expects DATABASE_URL to name a PostgreSQL server (the
// Makefile's with-postgres.sh provides one); the run creates and drops a
// database of its own there. It exits 1 when the run broke a promise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jobboard/jobboard/internal/dev/chaos"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// defaultLogs is where a run keeps its logs, one folder per run, whether
// it passes or fails: `make chaos` runs at the repository's root, so they
// land in its ignored build folder.
const defaultLogs = "build/chaos/logs"

// errFailed means the run completed and broke a promise; the report says
// which.
var errFailed = errors.New("the run failed; see the report")

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	short := fs.Bool("short", false, "the short configuration (the one `go test` runs) instead of the full one")
	seed := fs.Int64("seed", 0, "the seed of the fault schedule and the load (0: a random one, printed)")
	bin := fs.String("bin", "", "a folder with prebuilt api, worker, sweeper and webhook binaries (default: build them)")
	logs := fs.String("logs", "", "where to keep every process's log and the verdict (default: "+defaultLogs+"/<start time>)")
	only := fs.String("only", "", "run only one of the runs: email or webhooks (default: both, email first)")
	sendRate := fs.Float64("quota", 0, "the email run's SES sending quota, sends a second (a 429 above it; the workers pace at it); 0: none")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *only != "" && *only != "email" && *only != "webhooks" {
		return fmt.Errorf("-only %q: want email or webhooks", *only)
	}
	cfg := chaos.Full()
	if *short {
		cfg = chaos.Short()
	}
	cfg.ServerURL = getenv("DATABASE_URL")
	if cfg.ServerURL == "" {
		return errors.New("DATABASE_URL is not set (run through `make chaos`)")
	}
	cfg.Seed = *seed
	for cfg.Seed == 0 {
		cfg.Seed = rand.Int64()
	}
	if *logs == "" {
		*logs = filepath.Join(defaultLogs, time.Now().UTC().Format("20060102T150405Z"))
	}
	cfg.BinDir, cfg.LogDir, cfg.Out = *bin, *logs, stdout
	cfg.SendRate = *sendRate

	if *only != "webhooks" {
		rep, err := chaos.Run(ctx, cfg)
		if rep == nil {
			return err
		}
		if err := outcome(rep, err, stdout); err != nil {
			return err
		}
	}
	if *only == "email" {
		return nil
	}
	return runWebhooks(ctx, cfg, *short, stdout)
}

// report is what both runs' reports do.
type report interface {
	Print(io.Writer)
	Passed() bool
}

// outcome prints a run's report and turns it into run's error.
func outcome(rep report, err error, stdout io.Writer) error {
	rep.Print(stdout)
	switch {
	case err != nil:
		return err
	case !rep.Passed():
		return errFailed
	}
	return nil
}

// runWebhooks is the webhook run (chaos.RunWebhooks) with the email run's
// server, seed and binaries, keeping its logs in the folder "webhooks" of
// the email run's.
func runWebhooks(ctx context.Context, base chaos.Config, short bool, stdout io.Writer) error {
	cfg := chaos.WebhookFull()
	if short {
		cfg = chaos.WebhookShort()
	}
	cfg.ServerURL, cfg.Seed, cfg.BinDir, cfg.Out = base.ServerURL, base.Seed, base.BinDir, stdout
	// Its own folder inside the run's: both runs name their processes'
	// logs alike (api.1.log).
	cfg.LogDir = filepath.Join(base.LogDir, "webhooks")
	rep, err := chaos.RunWebhooks(ctx, cfg)
	if rep == nil {
		return err
	}
	return outcome(rep, err, stdout)
}
