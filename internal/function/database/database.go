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

// Settings are the database settings of a function: where the database
// is, and how statements are sent.
type Settings struct {
	secret.DatabaseSettings
	// QueryExecMode is DATABASE_QUERY_EXEC_MODE's mode; zero: the URL's,
	// else pgx's default.
	QueryExecMode pgx.QueryExecMode
}

// LoadSettings reads the database settings through getenv: every variable
// it may use, whatever their values (secret.LoadDatabase's, loginEnv's,
// DATABASE_QUERY_EXEC_MODE). loginEnv, when not empty, names the variable
// of a login of the function's own (such as WEBHOOK_DATABASE_SECRET_ARN),
// which when set stands in for DATABASE_SECRET_ARN. The database must be
// named: by DATABASE_URL, DATABASE_SECRET_ARN or loginEnv's. Errors: one
// per variable missing or malformed, joined, each naming its variable.
func LoadSettings(getenv func(string) string, loginEnv string) (Settings, error) {
	s := Settings{DatabaseSettings: secret.LoadDatabase(getenv)}
	if loginEnv != "" {
		if arn := getenv(loginEnv); arn != "" {
			s.SecretARN = arn
		}
	}
	var errs []error
	if s.URL == "" && s.SecretARN == "" {
		errs = append(errs, fmt.Errorf("%s or %s is not set", secret.EnvDatabaseURL, secret.EnvDatabaseSecretARN))
	}
	var err error
	if s.QueryExecMode, err = postgres.ParseQueryExecMode(getenv(EnvQueryExecMode)); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", EnvQueryExecMode, err))
	}
	return s, errors.Join(errs...)
}

// Source is where a function's database is: its URL, and the credentials
// that keep the user and password of new connections current when they
// come from Secrets Manager (nil with DATABASE_URL).
type Source struct {
	URL         string
	Credentials *secret.DatabaseCredentials
	// QueryExecMode is how the pool sends statements (Settings').
	QueryExecMode pgx.QueryExecMode
}

// Find finds the function's database: its URL, or the URL of its secret
// looked up through secrets. Errors: those of secret.Database.
func Find(ctx context.Context, s Settings, secrets func() (secret.Getter, error)) (Source, error) {
	url, creds, err := secret.Database(ctx, s.DatabaseSettings, secrets)
	if err != nil {
		return Source{}, fmt.Errorf("database: %w", err)
	}
	return Source{URL: url, Credentials: creds, QueryExecMode: s.QueryExecMode}, nil
}

// Open opens a pool over the database: in src.QueryExecMode, and with
// src.Credentials asked for the user and password of every new connection
// (postgres.WithCredentials), so that a rotation needs no restart; options
// adjust it further (its size, session settings). Errors: postgres.Open's.
func (src Source) Open(ctx context.Context, options ...func(*pgxpool.Config)) (*postgres.DB, error) {
	options = append([]func(*pgxpool.Config){postgres.WithQueryExecMode(src.QueryExecMode)}, options...)
	if src.Credentials != nil { // a typed nil would make WithCredentials ask nobody
		options = append(options, postgres.WithCredentials(src.Credentials))
	}
	db, err := postgres.Open(ctx, src.URL, options...)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	return db, nil
}

// Open finds the function's database (Find) and opens a pool over it
// (Source.Open): the one way every function's wire opens its database.
func Open(ctx context.Context, s Settings, secrets func() (secret.Getter, error), options ...func(*pgxpool.Config)) (*postgres.DB, error) {
	src, err := Find(ctx, s, secrets)
	if err != nil {
		return nil, err
	}
	return src.Open(ctx, options...)
}

// Pool is a function's pool option: at most maxConns connections, its
// sessions named name (application_name, which tells the functions'
// sessions apart in pg_stat_activity) unless the database URL names them.
func Pool(maxConns int32, name string) func(*pgxpool.Config) {
	return func(c *pgxpool.Config) {
		c.MaxConns = maxConns
		if c.ConnConfig.RuntimeParams["application_name"] == "" {
			c.ConnConfig.RuntimeParams["application_name"] = name
		}
	}
}
