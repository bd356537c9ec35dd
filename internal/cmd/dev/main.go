// Command dev runs the whole job board on this machine (`make dev`): see
// package devstack. It expects DATABASE_URL to name a PostgreSQL server (the
// Makefile's with-postgres.sh provides one) and the function binaries in -bin.
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

	"github.com/jobboard/jobboard/internal/devstack"
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
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	serverURL := getenv("DATABASE_URL")
	if serverURL == "" {
		return fmt.Errorf("DATABASE_URL is not set (run through `make dev`)")
	}
	apiPort, err := port(getenv("PORT"), 8080)
	if err != nil {
		return err
	}
	queue, err := devstack.QueueFromTemplate(*template)
	if err != nil {
		return err
	}
	cfg := devstack.Config{
		ServerURL:     serverURL,
		Database:      "jobboard_dev",
		BinDir:        *bin,
		APIPort:       apiPort,
		SQSPort:       4566,
		SESPort:       8005,
		Queue:         queue,
		SweepInterval: 15 * time.Second,
		Out:           stdout,
	}
	return devstack.Run(ctx, cfg, func(st devstack.Stack) { devstack.PrintBanner(stdout, st) })
}

func port(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("PORT=%q is not a port number", s)
	}
	return p, nil
}
