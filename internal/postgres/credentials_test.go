package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// switchingCredentials answers the user a test sets, and records refusals.
type switchingCredentials struct {
	mu       sync.Mutex
	user     string
	asked    int
	rejected []string
}

func (c *switchingCredentials) Credentials(context.Context) (string, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked++
	return c.user, "unused-with-trust", nil
}

func (c *switchingCredentials) Rejected(user, _ string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rejected = append(c.rejected, user)
}

// Every new connection asks for its credentials, and a login the server
// refuses (here a role that may not log in: SQLSTATE 28000, which the
// trusting test server checks too) is reported with the values it used.
// The password case (28P01) is tested in functions/api on a cluster that
// checks passwords.
func TestWithCredentials(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pgtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	suffix := time.Now().UnixNano()
	good, barred := fmt.Sprintf("creds_ok_%d", suffix), fmt.Sprintf("creds_barred_%d", suffix)
	for _, stmt := range []string{
		"CREATE ROLE " + good + " LOGIN",
		"CREATE ROLE " + barred + " NOLOGIN",
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), pgtest.ServerURL())
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		_, _ = conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+good)
		_, _ = conn.Exec(context.Background(), "DROP ROLE IF EXISTS "+barred)
	})

	u, err := url.Parse(pgtest.NewURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User("someone-else") // replaced by the credentials
	creds := &switchingCredentials{user: good}
	db, err := postgres.Open(ctx, u.String(), postgres.WithCredentials(creds))
	if err != nil {
		t.Fatalf("open with credentials: %v", err)
	}
	defer db.Close()
	var user string
	if err := postgres.Pool(db).QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != good {
		t.Fatalf("connected as %q (%v); want %q from the credentials", user, err, good)
	}

	creds.mu.Lock()
	creds.user = barred
	creds.mu.Unlock()
	postgres.Pool(db).Reset() // the next query needs a new connection
	err = db.Ping(ctx)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "28000" {
		t.Fatalf("ping as a role that may not log in: %v; want SQLSTATE 28000", err)
	}
	creds.mu.Lock()
	defer creds.mu.Unlock()
	if len(creds.rejected) != 1 || creds.rejected[0] != barred || creds.asked != 2 {
		t.Errorf("asked %d times, rejected %v; want 2 and [%s]", creds.asked, creds.rejected, barred)
	}
}
