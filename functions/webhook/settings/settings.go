// Package settings reads the webhook delivery function's settings from its
// environment (the variables are listed in the command's documentation,
// functions/webhook). It is apart from the main so that the deploy's tests
// can call Load and compare the names it reads with template.yaml.
package settings

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/secret"
	"github.com/jobboard/jobboard/internal/webhook"
)

// localTimeout is the default deadline of one local invocation: the
// function's Timeout in template.yaml.
const localTimeout = 30 * time.Second

// EnvDatabaseSecretARN optionally names a secret like DATABASE_SECRET_ARN's
// for the function's own database login.
const EnvDatabaseSecretARN = "WEBHOOK_DATABASE_SECRET_ARN"

// Settings are the webhook delivery function's settings.
type Settings struct {
	function.Settings
	// QueueURL is the webhook queue: failed deliveries get their backoff
	// there, and the local mode polls it.
	QueueURL string
	// Role is the database role of the function's sessions.
	Role string
	// SealingKey opens the endpoints' signing secrets (the API's key).
	SealingKey secret.Key
	// AllowInsecure lets endpoints be plain http, on any port, on
	// loopback: local development and tests only.
	AllowInsecure  bool
	Concurrency    int
	AttemptTimeout time.Duration
	BackoffBase    time.Duration
	BackoffMax     time.Duration
	LocalTimeout   time.Duration
	// DB names the database (WEBHOOK_DATABASE_SECRET_ARN, a login of its
	// own, or the API's) and how statements are sent.
	DB database.Settings
}

// Load reads the settings through getenv: every variable the function
// uses, whatever their values. The error names every variable that is
// missing or malformed.
func Load(getenv func(string) string) (Settings, error) {
	shared, err := function.Load(getenv)
	s := Settings{
		Settings:       shared,
		QueueURL:       getenv("WEBHOOK_EVENTS_QUEUE_URL"),
		Role:           getenv("DATABASE_ROLE"),
		SealingKey:     secret.LoadWebhookSealingKey(getenv),
		Concurrency:    webhook.DefaultConcurrency,
		AttemptTimeout: webhook.DefaultAttemptTimeout,
	}
	problems := []error{err}
	if s.QueueURL == "" {
		problems = append(problems, errors.New("WEBHOOK_EVENTS_QUEUE_URL is not set"))
	}
	if s.Role == "" {
		s.Role = postgres.WebhookRole
	}
	if s.SealingKey == (secret.Key{}) {
		problems = append(problems, fmt.Errorf("%s or %s is not set", secret.EnvWebhookSealingKey, secret.EnvWebhookSealingKeyARN))
	}
	if s.DB, err = database.LoadSettings(getenv, EnvDatabaseSecretARN); err != nil {
		problems = append(problems, err)
	}
	if s.AllowInsecure, err = shared.LocalFlag("WEBHOOK_ALLOW_INSECURE", getenv("WEBHOOK_ALLOW_INSECURE")); err != nil {
		problems = append(problems, err)
	}
	if v := getenv("WEBHOOK_CONCURRENCY"); v != "" {
		if s.Concurrency, err = strconv.Atoi(v); err != nil || s.Concurrency < 1 || s.Concurrency > 100 {
			problems = append(problems, fmt.Errorf("WEBHOOK_CONCURRENCY = %q: want a whole number from 1 to 100", v))
		}
	}
	for _, d := range []struct {
		name, value string
		into        *time.Duration
		least, most time.Duration
	}{
		{"WEBHOOK_ATTEMPT_TIMEOUT", getenv("WEBHOOK_ATTEMPT_TIMEOUT"), &s.AttemptTimeout, time.Second, 20 * time.Second},
		{"WEBHOOK_BACKOFF_BASE", getenv("WEBHOOK_BACKOFF_BASE"), &s.BackoffBase, time.Second, time.Hour},
		{"WEBHOOK_BACKOFF_MAX", getenv("WEBHOOK_BACKOFF_MAX"), &s.BackoffMax, time.Second, webhook.DefaultBackoffMax},
	} {
		if *d.into, err = function.ParseDuration(d.name, d.value, *d.into, d.least, d.most); err != nil {
			problems = append(problems, err)
		}
	}
	if s.LocalTimeout, err = function.LocalInvocationTimeout(getenv, localTimeout); err != nil {
		problems = append(problems, err)
	}
	return s, errors.Join(problems...)
}
