// Command migrate is the migration Lambda (MigrateFunction in
// template.yaml): it applies the embedded schema migrations under the
// advisory lock (package internal/postgres/schema, the same as `make
// migrate`) from inside the functions' network, where a database in
// private subnets is reachable. CloudFormation invokes it for the custom
// resource SchemaMigration when the stack is created and whenever a deploy
// publishes a new version of it, and it answers CloudFormation's requests;
// the PreTraffic hook (internal/pretraffichook) invokes it again before any
// traffic moves to a new version; any other event (an invocation by hand)
// migrates too, answering {"migrated": true, "schema_version": N, ...} or
// failing the invocation (internal/migrate).
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
	"fmt"
	"io"

	"github.com/jobboard/jobboard/functions/migrate/settings"
	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/migrate"
	"github.com/jobboard/jobboard/internal/postgres/schema"
	"github.com/jobboard/jobboard/internal/secret"
)

func main() { function.Main("migrate", run) }

// run is main without the process, which the tests call: the settings,
// then the wiring (see function.Run).
var run = function.Run(settings.Load, wire)

// wire builds the handler: each migration looks the database's URL up
// again (secret.Database: DATABASE_URL, or the secret), so that a rotated
// password never fails a deploy. It opens no pool (schema.Apply connects
// once), so it does not go through package database, which would link the
// store into a binary that keeps every exported method (text/template).
func wire(_ context.Context, s settings.Settings, stdout io.Writer) (*function.Wiring, error) {
	secrets := secret.NewClient(s.AWS)
	handler, err := migrate.New(migrate.Config{
		Migrate: func(ctx context.Context) (schema.Report, error) {
			databaseURL, _, err := secret.Database(ctx, s.Database, secrets)
			if err != nil {
				return schema.Report{}, fmt.Errorf("database: %w", err)
			}
			return schema.Apply(ctx, databaseURL)
		},
		Logger: s.Logger(stdout),
	})
	if err != nil {
		return nil, err
	}
	return &function.Wiring{
		Handler: handler.Handle,
		Local: func(ctx context.Context) error {
			_, err := handler.Handle(ctx, nil)
			return err
		},
	}, nil
}
