// Package secret gives the functions their secrets: the database URL and the
// JWT signing key. Locally they come from the environment (DATABASE_URL,
// JWT_SECRET); on AWS the environment holds only the ARNs of Secrets Manager
// secrets (DATABASE_SECRET_ARN, JWT_SECRET_ARN). The values are fetched at
// cold start and kept current afterwards: DatabaseCredentials looks the
// database secret up again after DefaultMaxAge or after the server refused
// it, and JWTKeySource does the same for the signing keys (the current
// version and, during a rotation, the previous one), so that a rotation
// reaches warm sandboxes without a restart.
//
// A function's settings loader reads where each secret is (LoadDatabase,
// LoadJWTKey, LoadWebhookSealingKey: every variable, whatever their
// values); the lookups take those values, never the environment.
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
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)

// The environment variables this package's loaders read.
const (
	// EnvDatabaseURL is a PostgreSQL URL, for local runs.
	EnvDatabaseURL = "DATABASE_URL"
	// EnvDatabaseSecretARN names a secret holding RDS-style JSON.
	EnvDatabaseSecretARN = "DATABASE_SECRET_ARN"
	// EnvJWTSecret is the JWT signing key itself, for local runs.
	EnvJWTSecret = "JWT_SECRET"
	// EnvJWTSecretARN names a secret whose string is the JWT signing key.
	EnvJWTSecretARN = "JWT_SECRET_ARN"
	// EnvDatabaseHost, when set, replaces the secret's host in the URL built
	// from DATABASE_SECRET_ARN: an RDS Proxy endpoint in front of the
	// instance that the secret describes.
	EnvDatabaseHost = "DATABASE_HOST"
	// EnvDatabaseSSLRootCert, when set, is the sslrootcert of the URL built
	// from DATABASE_SECRET_ARN: the path of a CA bundle (for RDS, the global
	// bundle), or "system" for the system's roots (an RDS Proxy's
	// certificate). The sslmode then defaults to verify-full.
	EnvDatabaseSSLRootCert = "DATABASE_SSLROOTCERT"
)

// DatabaseSettings say where the database is: URL (DATABASE_URL, local
// runs), which wins, or the secret SecretARN names (DATABASE_SECRET_ARN,
// or a function's own login), adjusted by Host (DATABASE_HOST) and
// SSLRootCert (DATABASE_SSLROOTCERT). See Database.
type DatabaseSettings struct {
	URL, SecretARN, Host, SSLRootCert string
}

// LoadDatabase reads the database's four variables through getenv.
func LoadDatabase(getenv func(string) string) DatabaseSettings {
	return DatabaseSettings{
		URL:         getenv(EnvDatabaseURL),
		SecretARN:   getenv(EnvDatabaseSecretARN),
		Host:        getenv(EnvDatabaseHost),
		SSLRootCert: getenv(EnvDatabaseSSLRootCert),
	}
}

// Key says where a key is: Value, the key itself (local runs), which wins,
// or the secret ARN names.
type Key struct {
	Value, ARN string
}

// LoadJWTKey reads JWT_SECRET and JWT_SECRET_ARN through getenv.
func LoadJWTKey(getenv func(string) string) Key {
	return Key{Value: getenv(EnvJWTSecret), ARN: getenv(EnvJWTSecretARN)}
}

// LoadWebhookSealingKey reads WEBHOOK_SEALING_KEY and
// WEBHOOK_SEALING_KEY_SECRET_ARN through getenv.
func LoadWebhookSealingKey(getenv func(string) string) Key {
	return Key{Value: getenv(EnvWebhookSealingKey), ARN: getenv(EnvWebhookSealingKeyARN)}
}

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

// url is the URL the secret describes, adjusted by the settings' Host and
// SSLRootCert.
func (s rdsSecret) url(arn string, with DatabaseSettings) (string, error) {
	host := s.Host
	if with.Host != "" {
		host = with.Host
	}
	var missing []string
	// An RDS-managed master secret holds the user and password alone: the
	// host then comes from DATABASE_HOST (the proxy's endpoint).
	for _, f := range []struct{ name, value string }{
		{"username", s.Username}, {"password", s.Password}, {"host (or DATABASE_HOST)", host},
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
	query := url.Values{}
	sslmode := s.SSLMode
	if with.SSLRootCert != "" {
		query.Set("sslrootcert", with.SSLRootCert)
		if sslmode == "" {
			sslmode = "verify-full"
		}
	}
	if sslmode == "" {
		sslmode = "require"
	}
	query.Set("sslmode", sslmode)
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(s.Username, s.Password),
		Host:     net.JoinHostPort(host, strconv.Itoa(port)),
		Path:     "/" + db,
		RawQuery: query.Encode(),
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

// Staging labels of Secrets Manager: AWSCURRENT is the version in use;
// when a new version becomes current (PutSecretValue, or the last step of a
// rotation), the one before it is labelled AWSPREVIOUS.
// https://docs.aws.amazon.com/secretsmanager/latest/userguide/whats-in-a-secret.html
const (
	stageCurrent  = "AWSCURRENT"
	stagePrevious = "AWSPREVIOUS"
)

// version is one version of a secret.
type version struct {
	value   []byte
	id      string
	created time.Time
}

// fetch returns the version of the secret arn that carries the staging
// label stage: its string, or its binary when it has no string.
func fetch(ctx context.Context, newClient func() (Getter, error), arn, stage string) (version, error) {
	c, err := newClient()
	if err != nil {
		return version{}, fmt.Errorf("secret %s: client: %w", arn, err)
	}
	out, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &arn, VersionStage: &stage})
	if err != nil {
		return version{}, fmt.Errorf("get secret %s (%s): %w", arn, stage, err)
	}
	v := version{id: aws.ToString(out.VersionId), created: aws.ToTime(out.CreatedDate)}
	switch {
	case out.SecretString != nil && *out.SecretString != "":
		v.value = []byte(*out.SecretString)
	case len(out.SecretBinary) > 0:
		v.value = out.SecretBinary
	default:
		return version{}, fmt.Errorf("secret %s: empty value: %w", arn, ErrMalformed)
	}
	return v, nil
}
