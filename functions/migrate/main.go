// Command migrate is the migration Lambda (MigrateFunction in
// template.yaml): it applies the embedded schema migrations under the
// advisory lock (package internal/postgres/schema, the same as `make
// migrate`) from inside the functions' network, where a database in
// private subnets is reachable. The PreTraffic hook of every deploy invokes
// it before any traffic moves to a new version (internal/deployhook); after
// a stack's first deploy, which runs no hooks, invoke it by hand
// (docs/deploying.md). Any event will do; it answers {"migrated": true} or
// fails the invocation.
//
// Outside Lambda (AWS_LAMBDA_RUNTIME_API unset) it migrates once and exits.
//
// Migrations live in their own function, apart from the hook: tern, which
// runs them, links text/template, and a binary that links text/template
// keeps every exported method of every type it links, which with the
// hook's Lambda and CodeDeploy clients would take it past the size aim.
//
// Environment: DATABASE_URL, or on AWS DATABASE_SECRET_ARN (required, with
// the optional DATABASE_HOST and DATABASE_SSLROOTCERT, see internal/secret;
// read again at each invocation, so a rotated password never fails a
// deploy); LOG_LEVEL (debug, info, warn, error; default info). AWS settings
// come from the environment (internal/function, internal/awsenv).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/postgres/schema"
	"github.com/jobboard/jobboard/internal/secret"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args, os.Getenv, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrate:", err)
		os.Exit(1)
	}
}

// result is the invocation's answer.
type result struct {
	Migrated bool `json:"migrated"`
}

// run is main without the process: it reads the settings and hands the
// migration to the Lambda runtime, which does not return, or outside
// Lambda migrates once.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 1 {
		return fmt.Errorf("unknown command %q: the migration function takes none", args[1])
	}
	s, err := function.Load(getenv)
	if err != nil {
		return err
	}
	logger := s.Logger(stdout)
	secrets := secret.NewClient(s.AWS)
	migrate := func(ctx context.Context, _ json.RawMessage) (result, error) {
		start := time.Now()
		databaseURL, _, err := secret.Database(ctx, getenv, secrets)
		if err != nil {
			return result{}, fmt.Errorf("database: %w", err)
		}
		if err := schema.Migrate(ctx, databaseURL); err != nil {
			logger.ErrorContext(ctx, "migration failed", slog.String("error", err.Error()))
			return result{}, err
		}
		logger.InfoContext(ctx, "migrations applied", slog.Duration("duration", time.Since(start)))
		return result{Migrated: true}, nil
	}
	if s.Lambda {
		lambda.StartWithOptions(migrate, lambda.WithContext(ctx))
		return nil
	}
	_, err = migrate(ctx, nil)
	return err
}
