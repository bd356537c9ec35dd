// Package database opens the database of a job-board function, one way for
// all of them: the settings (DATABASE_URL, or a Secrets Manager secret; the
// query exec mode), then the secret, then a pool whose new connections get
// the secret's current password. It is apart from package function so that
// the functions without a database (the deploy hook) link no driver.
package database

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/secret"
)

// EnvQueryExecMode is pgx's query exec mode of the pool (see
// postgres.ParseQueryExecMode).
const EnvQueryExecMode = "DATABASE_QUERY_EXEC_MODE"

// Settings are the database settings of a function.
type Settings struct {
	// QueryExecMode is DATABASE_QUERY_EXEC_MODE's mode; zero: the URL's,
	// else pgx's default.
	QueryExecMode pgx.QueryExecMode
	// SecretARN, when set, names the function's own login (such as
	// WEBHOOK_DATABASE_SECRET_ARN) in place of DATABASE_SECRET_ARN.
	SecretARN string
}

// LoadSettings reads the database settings through getenv. loginEnv, when
// not empty, names the variable of a login of the function's own, which may
// stand in for DATABASE_SECRET_ARN. The database must be named: by
// DATABASE_URL, DATABASE_SECRET_ARN or loginEnv's. Errors: one per variable
// missing or malformed, joined, each naming its variable.
func LoadSettings(getenv func(string) string, loginEnv string) (Settings, error) {
	var (
		s    Settings
		errs []error
		err  error
	)
	if loginEnv != "" {
		s.SecretARN = getenv(loginEnv)
	}
	if getenv(secret.EnvDatabaseURL) == "" && getenv(secret.EnvDatabaseSecretARN) == "" && s.SecretARN == "" {
		errs = append(errs, fmt.Errorf("%s or %s is not set", secret.EnvDatabaseURL, secret.EnvDatabaseSecretARN))
	}
	if s.QueryExecMode, err = postgres.ParseQueryExecMode(getenv(EnvQueryExecMode)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvQueryExecMode, err))
	}
	return s, errors.Join(errs...)
}

// Open opens a pool over the function's database: DATABASE_URL, or the URL
// of the secret (s.SecretARN, else DATABASE_SECRET_ARN) looked up through
// secrets, whose user and password then stay current for every new
// connection (postgres.WithCredentials), so that a rotation needs no
// restart. The pool sends statements in s.QueryExecMode; options adjust it
// further (its size, session settings). Errors: those of secret.DatabaseAs
// and of postgres.Open.
func Open(ctx context.Context, s Settings, getenv func(string) string, secrets func() (secret.Getter, error), options ...func(*pgxpool.Config)) (*postgres.DB, error) {
	url, creds, err := secret.DatabaseAs(ctx, getenv, secrets, s.SecretARN)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	options = append([]func(*pgxpool.Config){postgres.WithQueryExecMode(s.QueryExecMode)}, options...)
	if creds != nil { // a typed nil would make WithCredentials ask nobody
		options = append(options, postgres.WithCredentials(creds))
	}
	db, err := postgres.Open(ctx, url, options...)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	return db, nil
}
