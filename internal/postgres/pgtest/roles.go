package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WebhookRole is the database role of the delivery function, made by
// migration 008.
const WebhookRole = "jobboard_webhooks"

// ensureRoles makes the roles the migrations grant to, as the server's
// administrator (the user of ServerURL): pgtestdb migrates as a user
// without CREATEROLE, as a migrating user on a server may be, and the
// migration then finds the role made already. Roles belong to the whole
// server; making one that exists is not an error.
func ensureRoles(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return fmt.Errorf("connect to make roles: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, `
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '`+WebhookRole+`') THEN
        CREATE ROLE `+WebhookRole+` NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$$`)
	if err != nil {
		return fmt.Errorf("make role %s: %w", WebhookRole, err)
	}
	return nil
}

// AdminURL returns the URL of the database at dbURL as the server's
// administrator (the user of ServerURL), who may set any session role; the
// test user of pgtestdb is a member of no role.
func AdminURL(tb testing.TB, dbURL string) string {
	tb.Helper()
	db, err := url.Parse(dbURL)
	if err != nil {
		tb.Fatalf("parse database url: %v", err)
	}
	admin, err := url.Parse(ServerURL())
	if err != nil {
		tb.Fatalf("parse server url: %v", err)
	}
	admin.Path = db.Path
	return admin.String()
}

// RoleURL returns AdminURL with role as the session role of every
// connection: its statements then have exactly role's privileges.
func RoleURL(tb testing.TB, dbURL, role string) string {
	tb.Helper()
	u, err := url.Parse(AdminURL(tb, dbURL))
	if err != nil {
		tb.Fatalf("parse admin url: %v", err)
	}
	q := u.Query()
	q.Set("role", role) // pgx sends unknown parameters as run-time parameters
	u.RawQuery = q.Encode()
	return u.String()
}

// RolePool returns a pool over the database at dbURL whose sessions run as
// role (see RoleURL), closed when tb ends.
func RolePool(tb testing.TB, dbURL, role string) *pgxpool.Pool {
	tb.Helper()
	return Pool(tb, RoleURL(tb, dbURL, role))
}
