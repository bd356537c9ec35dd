// Package secret gives the functions their secrets: the database URL and the
// JWT signing key. Locally they come from the environment (DATABASE_URL,
// JWT_SECRET); on AWS the environment holds only the ARNs of Secrets Manager
// secrets (DATABASE_SECRET_ARN, JWT_SECRET_ARN) and the values are fetched
// once, at cold start, by the function's main.
//
// Values never appear in errors or logs: errors name the variable or the
// secret's ARN and say what is wrong, not what was there.
package secret

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// The environment variables this package reads.
const (
	// EnvDatabaseURL is a PostgreSQL URL, for local runs.
	EnvDatabaseURL = "DATABASE_URL"
	// EnvDatabaseSecretARN names a secret holding RDS-style JSON.
	EnvDatabaseSecretARN = "DATABASE_SECRET_ARN"
	// EnvJWTSecret is the JWT signing key itself, for local runs.
	EnvJWTSecret = "JWT_SECRET"
	// EnvJWTSecretARN names a secret whose string is the JWT signing key.
	EnvJWTSecretARN = "JWT_SECRET_ARN"
)

// MinJWTKeyLen is the shortest JWT signing key accepted from Secrets Manager:
// 32 bytes, the output size of HMAC-SHA256. template.yaml generates 64.
const MinJWTKeyLen = 32

var (
	// ErrNotConfigured means neither the value nor the ARN of a secret is set.
	ErrNotConfigured = errors.New("secret not configured")
	// ErrMalformed means the secret's value does not have the expected shape.
	ErrMalformed = errors.New("secret value malformed")
)

// Getter is the one Secrets Manager call this package makes;
// *secretsmanager.Client implements it.
type Getter interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// NewClient returns a newClient function for DatabaseURL and JWTKey that
// builds a Secrets Manager client from cfg (the AWS configuration the
// function loaded once, for all its clients) the first time it is called,
// and returns that same client afterwards. It never fails.
func NewClient(cfg aws.Config) func() (Getter, error) {
	return sync.OnceValues(func() (Getter, error) {
		return secretsmanager.NewFromConfig(cfg), nil
	})
}

// DatabaseURL returns DATABASE_URL when it is set. Otherwise it fetches the
// secret named by DATABASE_SECRET_ARN, which must hold RDS-style JSON
// {"username","password","host","port","dbname"} (port defaults to 5432,
// dbname to "postgres", and an optional "sslmode" to "require"), and returns
// the PostgreSQL URL it describes, with the user and password escaped.
// newClient is called only when the secret must be fetched.
//
// Errors wrap ErrNotConfigured when neither variable is set, ErrMalformed
// when the secret is not such JSON, or the error of newClient or of the
// Secrets Manager call.
func DatabaseURL(ctx context.Context, getenv func(string) string, newClient func() (Getter, error)) (string, error) {
	if u := getenv(EnvDatabaseURL); u != "" {
		return u, nil
	}
	arn := getenv(EnvDatabaseSecretARN)
	if arn == "" {
		return "", fmt.Errorf("database connection: set %s or %s: %w", EnvDatabaseURL, EnvDatabaseSecretARN, ErrNotConfigured)
	}
	value, err := fetch(ctx, newClient, arn)
	if err != nil {
		return "", err
	}
	var s rdsSecret
	if err := json.Unmarshal(value, &s); err != nil {
		// The JSON error may quote the value; leave it out.
		return "", fmt.Errorf("secret %s: not a JSON object of the RDS form: %w", arn, ErrMalformed)
	}
	return s.url(arn)
}

// rdsSecret is the JSON that RDS and the Secrets Manager rotation templates
// store for a database user.
type rdsSecret struct {
	Engine   string   `json:"engine"`
	Username string   `json:"username"`
	Password string   `json:"password"`
	Host     string   `json:"host"`
	Port     flexPort `json:"port"`
	DBName   string   `json:"dbname"`
	SSLMode  string   `json:"sslmode"`
}

func (s rdsSecret) url(arn string) (string, error) {
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"username", s.Username}, {"password", s.Password}, {"host", s.Host},
	} {
		if f.value == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("secret %s: missing %v: %w", arn, missing, ErrMalformed)
	}
	switch s.Engine {
	case "", "postgres", "aurora-postgresql":
	default:
		return "", fmt.Errorf("secret %s: engine %q is not PostgreSQL: %w", arn, s.Engine, ErrMalformed)
	}
	port := int(s.Port)
	if port == 0 {
		port = 5432
	}
	db := s.DBName
	if db == "" {
		db = "postgres"
	}
	sslmode := s.SSLMode
	if sslmode == "" {
		sslmode = "require"
	}
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(s.Username, s.Password),
		Host:     net.JoinHostPort(s.Host, strconv.Itoa(port)),
		Path:     "/" + db,
		RawQuery: url.Values{"sslmode": {sslmode}}.Encode(),
	}
	return u.String(), nil
}

// flexPort accepts a port as a JSON number or a string: both occur in RDS
// secrets.
type flexPort int

func (p *flexPort) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return errors.New("port is neither a number nor a string")
		}
		n = json.Number(s)
	}
	if n == "" {
		*p = 0
		return nil
	}
	v, err := strconv.Atoi(string(n))
	if err != nil || v < 1 || v > 65535 {
		return errors.New("port is not a TCP port")
	}
	*p = flexPort(v)
	return nil
}

// JWTKey returns the JWT signing key: JWT_SECRET when it is set, else the
// string of the secret named by JWT_SECRET_ARN, which must be at least
// MinJWTKeyLen bytes. newClient is called only when the secret must be
// fetched.
//
// Errors wrap ErrNotConfigured when neither variable is set, ErrMalformed
// when the fetched key is too short, or the error of newClient or of the
// Secrets Manager call.
func JWTKey(ctx context.Context, getenv func(string) string, newClient func() (Getter, error)) ([]byte, error) {
	if k := getenv(EnvJWTSecret); k != "" {
		return []byte(k), nil
	}
	arn := getenv(EnvJWTSecretARN)
	if arn == "" {
		return nil, fmt.Errorf("JWT signing key: set %s or %s: %w", EnvJWTSecret, EnvJWTSecretARN, ErrNotConfigured)
	}
	key, err := fetch(ctx, newClient, arn)
	if err != nil {
		return nil, err
	}
	if len(key) < MinJWTKeyLen {
		return nil, fmt.Errorf("secret %s: JWT key shorter than %d bytes: %w", arn, MinJWTKeyLen, ErrMalformed)
	}
	return key, nil
}

// fetch returns the current value of the secret arn: its string, or its
// binary when it has no string.
func fetch(ctx context.Context, newClient func() (Getter, error), arn string) ([]byte, error) {
	c, err := newClient()
	if err != nil {
		return nil, fmt.Errorf("secret %s: client: %w", arn, err)
	}
	out, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &arn})
	if err != nil {
		return nil, fmt.Errorf("get secret %s: %w", arn, err)
	}
	switch {
	case out.SecretString != nil && *out.SecretString != "":
		return []byte(*out.SecretString), nil
	case len(out.SecretBinary) > 0:
		return out.SecretBinary, nil
	}
	return nil, fmt.Errorf("secret %s: empty value: %w", arn, ErrMalformed)
}
