package devstack

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The stack's own database is admin work for a local run, not part of the
// job board's store: these statements live here rather than in
// internal/postgres.

// duplicateDatabase is the SQLSTATE of a CREATE DATABASE that lost a race
// with another.
const duplicateDatabase = "42P04"

const queryDatabaseExists = `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`

// ensureDatabase creates the database name on the server at serverURL unless
// it exists, and returns the URL of that database, so that the demo lives in
// its own database, not in the server's default one. Errors: connection
// errors, and a failed CREATE DATABASE.
func ensureDatabase(ctx context.Context, serverURL, name string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", fmt.Errorf("ensure database %s: parse server url: %w", name, err)
	}
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", fmt.Errorf("ensure database %s: %w", name, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, queryDatabaseExists, name).Scan(&exists); err != nil {
		return "", fmt.Errorf("ensure database %s: %w", name, err)
	}
	if !exists {
		// CREATE DATABASE takes no parameters; the name is quoted as an
		// identifier instead.
		create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
		if _, err := conn.Exec(ctx, create); err != nil {
			// Another `make dev` may have created it since the check.
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != duplicateDatabase {
				return "", fmt.Errorf("ensure database %s: %w", name, err)
			}
		}
	}
	u.Path = "/" + name
	return u.String(), nil
}
