// Command migrate applies the embedded schema migrations (package
// internal/postgres/schema, under an advisory lock) and exits: `make
// migrate`, the way a deployed database gets its schema, and what `make
// dev` does before it starts the API.
//
// The database is DATABASE_URL, or the secret named by DATABASE_SECRET_ARN
// (with the optional DATABASE_HOST and DATABASE_SSLROOTCERT, see
// internal/secret), read with the AWS settings of the environment
// (internal/awsenv).
//
// Migrations live in their own command, not in the API's binary: tern, which
// runs them, renders migrations with text/template, and a binary that links
// text/template keeps every exported method of every type it links (3.5 MB
// of the API's Lambda artifact).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/jobboard/jobboard/internal/awsenv"
	"github.com/jobboard/jobboard/internal/postgres/schema"
	"github.com/jobboard/jobboard/internal/secret"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

// run is main without the process.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	logger := slog.New(slog.NewJSONHandler(stdout, nil))
	databaseURL, _, err := secret.Database(ctx, secret.LoadDatabase(getenv), secret.NewClient(awsenv.Load(getenv)))
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	if err := schema.Migrate(ctx, databaseURL); err != nil {
		return err
	}
	logger.InfoContext(ctx, "migrations applied")
	return nil
}
