// Package settings reads the API's settings from its environment (the
// variables are listed in the command's documentation, functions/api). It
// is apart from the main so that the deploy's tests can call Load and
// compare the names it reads with template.yaml.
package settings

import (
	"errors"
	"fmt"
	"time"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/secret"
)

// defaultStatementTimeout bounds every statement of the API unless
// DATABASE_STATEMENT_TIMEOUT says otherwise: well under the function's
// 10 s timeout, far above any search served by an index.
const defaultStatementTimeout = 5 * time.Second

// Settings are the API's settings. The secrets they name are looked up by
// the main's wire.
type Settings struct {
	function.Settings
	// DB names the database and how statements are sent.
	DB               database.Settings
	StatementTimeout time.Duration
	// Port is the local server's (127.0.0.1:Port).
	Port string
	// QueueURL is where committed status events are published right away;
	// empty: they wait in the outbox for the sweeper.
	QueueURL string
	// AccountQueueURL is the account emails' queue (verification, password
	// reset); empty: they go to QueueURL.
	AccountQueueURL string
	// JWTKey names the token signing key; locally, when it names none,
	// wire makes a random one.
	JWTKey secret.Key
	// CORSOrigins, PublicMaxAge and StaleWhileRevalidate are the HTTP
	// settings of httpapi.Config of the same names.
	CORSOrigins                        []string
	PublicMaxAge, StaleWhileRevalidate time.Duration
	// PasswordHashes is httpapi.Config.PasswordHashes.
	PasswordHashes int
	// Webhooks are the webhook settings.
	Webhooks Webhooks
}

// Webhooks are the API's webhook settings: the queue that the deliveries a
// change dispatches are relayed to right away (WEBHOOK_EVENTS_QUEUE_URL;
// without it they wait for the sweeper), the URL policy
// (WEBHOOK_ALLOW_INSECURE, local development only, refused inside Lambda),
// and the key that seals the endpoints' signing secrets (locally, when it
// names none, wire makes a random one).
type Webhooks struct {
	QueueURL   string
	URLs       jobboard.WebhookURLPolicy
	SealingKey secret.Key
}

// Load reads the settings through getenv: every variable the API uses,
// whatever their values. The error names every variable that is missing
// or malformed. In Lambda the JWT key and the webhook sealing key must be
// named.
func Load(getenv func(string) string) (Settings, error) {
	shared, err := function.Load(getenv)
	s := Settings{
		Settings:        shared,
		Port:            getenv("PORT"),
		QueueURL:        getenv("STATUS_EVENTS_QUEUE_URL"),
		AccountQueueURL: getenv("ACCOUNT_EMAILS_QUEUE_URL"),
		JWTKey:          secret.LoadJWTKey(getenv),
		Webhooks: Webhooks{
			QueueURL:   getenv("WEBHOOK_EVENTS_QUEUE_URL"),
			SealingKey: secret.LoadWebhookSealingKey(getenv),
		},
	}
	problems := []error{err}
	if s.Port == "" {
		s.Port = "8080"
	}
	if s.DB, err = database.LoadSettings(getenv, ""); err != nil {
		problems = append(problems, err)
	}
	if s.Lambda && s.JWTKey == (secret.Key{}) {
		problems = append(problems, fmt.Errorf("%s or %s is not set", secret.EnvJWTSecret, secret.EnvJWTSecretARN))
	}
	if s.Lambda && s.Webhooks.SealingKey == (secret.Key{}) {
		problems = append(problems, fmt.Errorf("%s or %s is not set", secret.EnvWebhookSealingKey, secret.EnvWebhookSealingKeyARN))
	}
	if s.Webhooks.URLs.AllowInsecure, err = shared.LocalFlag("WEBHOOK_ALLOW_INSECURE", getenv("WEBHOOK_ALLOW_INSECURE")); err != nil {
		problems = append(problems, err)
	}
	if s.StatementTimeout, err = function.ParseDuration("DATABASE_STATEMENT_TIMEOUT", getenv("DATABASE_STATEMENT_TIMEOUT"),
		defaultStatementTimeout, time.Millisecond, 0); err != nil {
		problems = append(problems, err)
	}
	if s.CORSOrigins, err = httpapi.ParseAllowedOrigins(getenv("CORS_ALLOWED_ORIGINS")); err != nil {
		problems = append(problems, fmt.Errorf("CORS_ALLOWED_ORIGINS: %w", err))
	}
	// Cache-Control counts in seconds; unset (zero) is httpapi's default.
	if s.PublicMaxAge, err = function.ParseDuration("CACHE_MAX_AGE", getenv("CACHE_MAX_AGE"), 0, time.Second, 0); err != nil {
		problems = append(problems, err)
	}
	if s.StaleWhileRevalidate, err = function.ParseDuration("CACHE_STALE_WHILE_REVALIDATE", getenv("CACHE_STALE_WHILE_REVALIDATE"), 0, time.Second, 0); err != nil {
		problems = append(problems, err)
	}
	if s.PasswordHashes, err = passwordHashes(getenv); err != nil {
		problems = append(problems, err)
	}
	return s, errors.Join(problems...)
}
