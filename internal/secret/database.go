package secret

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// DefaultMaxAge is how long a looked-up secret is used before it is looked
// up again. AWS's caching client for Secrets Manager keeps a value one hour
// by default (https://docs.aws.amazon.com/secretsmanager/latest/userguide/retrieving-secrets_cache-go.html);
// five minutes makes a rotated JWT key reach every warm sandbox well within
// a token's lifetime, at 12 GetSecretValue calls per sandbox and hour. A
// refused database password does not wait for it (see Rejected).
const DefaultMaxAge = 5 * time.Minute

// DefaultMinInterval is the least time between two lookups that a refusal
// (Rejected, or JWTKeySource.Keys with refresh) can force, so that a burst
// of failing connections or forged tokens costs one Secrets Manager call,
// not one each.
const DefaultMinInterval = time.Second

// Database returns the PostgreSQL URL: s.URL (DATABASE_URL) when it is set
// (creds is then nil), else the URL described by the secret s.SecretARN
// names (DATABASE_SECRET_ARN), which must hold RDS-style JSON
// {"username","password","host","port","dbname"} (port defaults to 5432,
// dbname to "postgres", and an optional "sslmode" to "require", or to
// "verify-full" with DATABASE_SSLROOTCERT). DATABASE_HOST replaces the
// secret's host, which it may then lack (an RDS-managed master secret
// holds the user and password alone); DATABASE_SSLROOTCERT adds an
// sslrootcert. The user and password are escaped.
//
// creds keeps the user and password current for new connections: it starts
// with the values just fetched (no second call) and looks them up again
// later (see DatabaseCredentials). newClient is called only when the secret
// must be fetched.
//
// Errors wrap ErrNotConfigured when neither variable is set, ErrMalformed
// when the secret is not such JSON, or the error of newClient or of the
// Secrets Manager call.
func Database(ctx context.Context, s DatabaseSettings, newClient func() (Getter, error)) (dbURL string, creds *DatabaseCredentials, err error) {
	if s.URL != "" {
		return s.URL, nil, nil
	}
	arn := s.SecretARN
	if arn == "" {
		return "", nil, fmt.Errorf("database connection: set %s or %s: %w", EnvDatabaseURL, EnvDatabaseSecretARN, ErrNotConfigured)
	}
	creds = &DatabaseCredentials{
		arn:         arn,
		newClient:   newClient,
		MaxAge:      DefaultMaxAge,
		MinInterval: DefaultMinInterval,
		Now:         time.Now,
	}
	rds, err := creds.lookup(ctx)
	if err != nil {
		return "", nil, err
	}
	dbURL, err = rds.url(arn, s)
	if err != nil {
		return "", nil, err
	}
	return dbURL, creds, nil
}

// DatabaseCredentials are the user and password of the database secret, for
// each new connection (postgres.WithCredentials). They are looked up again
// when they are older than MaxAge, and at the next call after the server
// refused them (Rejected): RDS rotates a managed master password every 7
// days by default, and with single-user rotation the old password stops
// working at once for new connections
// (https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/rds-secrets-manager.html,
// https://docs.aws.amazon.com/secretsmanager/latest/userguide/rotation-strategy.html).
// Connections already open stay open. A DatabaseCredentials is safe for
// concurrent use.
type DatabaseCredentials struct {
	// MaxAge, MinInterval and Now are DefaultMaxAge, DefaultMinInterval
	// and time.Now; tests change them before first use.
	MaxAge      time.Duration
	MinInterval time.Duration
	Now         func() time.Time

	arn       string
	newClient func() (Getter, error)

	mu       sync.Mutex
	current  rdsSecret
	fetched  time.Time // when current was looked up
	rejected bool      // the server refused current
}

// lookup fetches the secret, makes it current and returns it. The caller
// holds no lock; lookup takes it.
func (c *DatabaseCredentials) lookup(ctx context.Context) (rdsSecret, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookupLocked(ctx)
}

func (c *DatabaseCredentials) lookupLocked(ctx context.Context) (rdsSecret, error) {
	c.fetched = c.Now()
	v, err := fetch(ctx, c.newClient, c.arn, stageCurrent)
	if err != nil {
		return rdsSecret{}, err
	}
	var s rdsSecret
	if err := json.Unmarshal(v.value, &s); err != nil {
		// The JSON error may quote the value; leave it out.
		return rdsSecret{}, fmt.Errorf("secret %s: not a JSON object of the RDS form: %w", c.arn, ErrMalformed)
	}
	if s.Username == "" || s.Password == "" {
		return rdsSecret{}, fmt.Errorf("secret %s: missing username or password: %w", c.arn, ErrMalformed)
	}
	c.current, c.rejected = s, false
	return s, nil
}

// Credentials returns the user and password for a new connection: the ones
// looked up last, or fresh ones when those are older than MaxAge or were
// refused (and the last lookup is at least MinInterval old).
//
// When a lookup fails, the previous values are returned if the server has
// not refused them (they most likely still work); otherwise the error of the
// lookup (see Database).
func (c *DatabaseCredentials) Credentials(ctx context.Context) (user, password string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.Now()
	due := now.Sub(c.fetched) >= c.MaxAge || (c.rejected && now.Sub(c.fetched) >= c.MinInterval)
	if due {
		s, err := c.lookupLocked(ctx)
		if err == nil {
			return s.Username, s.Password, nil
		}
		if c.rejected || c.current.Password == "" {
			return "", "", err
		}
	}
	return c.current.Username, c.current.Password, nil
}

// Rejected reports that the server refused user and password (SQLSTATE
// 28P01 invalid_password or 28000 invalid_authorization_specification), so
// that the next Credentials call looks them up again. A refusal of values
// other than the current ones (a connection attempt that started before the
// last lookup) is ignored.
func (c *DatabaseCredentials) Rejected(user, password string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if user == c.current.Username && password == c.current.Password {
		c.rejected = true
	}
}
