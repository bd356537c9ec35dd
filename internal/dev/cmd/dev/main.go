// Command dev runs the whole job board on this machine (`make dev`): see
// package devstack. It expects DATABASE_URL to name a PostgreSQL server (the
// Makefile's with-postgres.sh provides one) and the function binaries in -bin.
//
// Where things run comes from the environment, so that two stacks (or a
// stack and the tests) can share a machine:
//
//	PORT          the API (default 8080)
//	SQS_PORT      the SQS stand-in (default 4566)
//	SES_PORT      the SES stand-in and its web page (default 8005)
//	DEV_DATABASE  the database on the server, created if missing (default jobboard_dev)
//
// A port of 0 picks a free one. -state names the file where the running
// stack describes itself for `make invoke` and `make poison`; -log the file
// that receives the processes' logs, so that the terminal shows only the
// banner.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jobboard/jobboard/internal/dev/devstack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	bin := fs.String("bin", "build/dev", "folder with the api, worker and sweeper binaries")
	template := fs.String("template", "template.yaml", "the SAM template whose queue settings the local queue copies")
	state := fs.String("state", devstack.DefaultStateFile, "where to describe the running stack for make invoke and make poison (empty: nowhere)")
	logFile := fs.String("log", "build/dev/dev.log", "where the api, worker and sweeper log (emptied at start; empty: this terminal)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	serverURL := getenv("DATABASE_URL")
	if serverURL == "" {
		return fmt.Errorf("DATABASE_URL is not set (run through `make dev`)")
	}
	apiPort, err := port(getenv, "PORT", devstack.DefaultAPIPort)
	if err != nil {
		return err
	}
	sqsPort, err := port(getenv, "SQS_PORT", devstack.DefaultSQSPort)
	if err != nil {
		return err
	}
	sesPort, err := port(getenv, "SES_PORT", devstack.DefaultSESPort)
	if err != nil {
		return err
	}
	database := getenv("DEV_DATABASE")
	if database == "" {
		database = "jobboard_dev"
	}
	queue, err := devstack.QueueFromTemplate(*template)
	if err != nil {
		return err
	}
	cfg := devstack.Config{
		ServerURL:     serverURL,
		Database:      database,
		BinDir:        *bin,
		APIPort:       apiPort,
		SQSPort:       sqsPort,
		SESPort:       sesPort,
		Queue:         queue,
		SweepInterval: 15 * time.Second,
		LogFile:       *logFile,
		Out:           stdout,
		StateFile:     *state,
	}
	if err := devstack.Run(ctx, cfg, func(st devstack.Stack) { devstack.PrintBanner(stdout, st) }); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "jobboard stopped.")
	return nil
}

// port reads the port in the variable name: def when it is empty, 0 for a
// free port.
func port(getenv func(string) string, name string, def int) (int, error) {
	s := getenv(name)
	if s == "" {
		return def, nil
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 || p > 65535 {
		return 0, fmt.Errorf("%s=%q is not a port number (0 picks a free one)", name, s)
	}
	return p, nil
}
