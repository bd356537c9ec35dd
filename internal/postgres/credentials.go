package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Credentials supply the user name and password of each new connection, so
// that a rotated password reaches new connections without a restart.
type Credentials interface {
	// Credentials returns the user and password to connect with now.
	Credentials(ctx context.Context) (user, password string, err error)
	// Rejected reports that the server refused user and password, so that
	// the next Credentials call looks them up again.
	Rejected(user, password string)
}

// SQLSTATEs of a refused login: a wrong password, or a role that does not
// exist or may not log in.
const (
	invalidPassword                   = "28P01"
	invalidAuthorizationSpecification = "28000"
)

// WithCredentials is an Open option: every new connection of the pool asks
// creds for its user and password (pgxpool's BeforeConnect), and a
// connection the server refuses for them tells creds (Rejected), so that the
// next connection looks them up again. Connections already open are not
// affected. A nil creds changes nothing.
func WithCredentials(creds Credentials) func(*pgxpool.Config) {
	return func(c *pgxpool.Config) {
		if creds == nil {
			return
		}
		c.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
			user, password, err := creds.Credentials(ctx)
			if err != nil {
				return fmt.Errorf("database credentials: %w", err)
			}
			cc.User, cc.Password = user, password
			return nil
		}
		c.ConnConfig.Tracer = refusalTracer{creds}
	}
}

// refusalTracer sees the end of every connection attempt (pgx's
// ConnectTracer) and reports a refused login to its Credentials. pgx's
// Tracer field is a QueryTracer, whose two methods it implements as no-ops.
type refusalTracer struct{ creds Credentials }

func (refusalTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (refusalTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

type attemptKey struct{}

type attempt struct{ user, password string }

func (t refusalTracer) TraceConnectStart(ctx context.Context, data pgx.TraceConnectStartData) context.Context {
	return context.WithValue(ctx, attemptKey{}, attempt{data.ConnConfig.User, data.ConnConfig.Password})
}

func (t refusalTracer) TraceConnectEnd(ctx context.Context, data pgx.TraceConnectEndData) {
	a, ok := ctx.Value(attemptKey{}).(attempt)
	if !ok || data.Err == nil {
		return
	}
	if code := pgCode(data.Err); code == invalidPassword || code == invalidAuthorizationSpecification {
		t.creds.Rejected(a.user, a.password)
	}
}
