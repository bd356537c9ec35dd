// Package settings reads the worker's settings from its environment (the
// variables are listed in the command's documentation, functions/worker).
// It is apart from the main so that the deploy's tests can call Load and
// compare the names it reads with template.yaml.
package settings

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/worker"
)

// localTimeout is the default deadline of one local invocation: the
// worker's Timeout in template.yaml. LOCAL_INVOCATION_TIMEOUT overrides it,
// so that the chaos harness can reach the deadline within a short run.
const localTimeout = 30 * time.Second

// localVerifyEmailURL and localPasswordResetURL are the links' bases
// outside Lambda: pages of a front end's development server.
const (
	localVerifyEmailURL   = "http://localhost:3000/verify-email"
	localPasswordResetURL = "http://localhost:3000/reset-password"
)

// Settings are the worker's settings.
type Settings struct {
	function.Settings
	// MailFrom is the sender of every email; ConfigurationSet, when set,
	// SES's configuration set that its events go through.
	MailFrom         string
	ConfigurationSet string
	// VerifyEmailURL and PasswordResetURL are the pages the links open.
	VerifyEmailURL   string
	PasswordResetURL string
	// QueueURL is the status events queue: failed records get their
	// backoff there, and the local mode polls it.
	QueueURL string
	// AccountQueueURL is the account emails' queue (verification,
	// password reset), consumed beside QueueURL; empty: none.
	AccountQueueURL string
	Retention       time.Duration
	Concurrency     int
	// MaxSendRate is the SES account's maximum send rate, emails per
	// second (SES_MAX_SEND_RATE); zero: ask SES (GetAccount).
	MaxSendRate  float64
	LocalTimeout time.Duration
	// DB names the database and how statements are sent.
	DB database.Settings
}

// Load reads the settings through getenv: every variable the worker uses,
// whatever their values. The error names every variable that is missing
// or malformed.
func Load(getenv func(string) string) (Settings, error) {
	shared, err := function.Load(getenv)
	s := Settings{
		Settings:         shared,
		MailFrom:         getenv("MAIL_FROM"),
		ConfigurationSet: getenv("SES_CONFIGURATION_SET"),
		QueueURL:         getenv("STATUS_EVENTS_QUEUE_URL"),
		AccountQueueURL:  getenv("ACCOUNT_EMAILS_QUEUE_URL"),
		VerifyEmailURL:   getenv("VERIFY_EMAIL_URL"),
		PasswordResetURL: getenv("ACCOUNT_RECOVERY_URL"),
		Concurrency:      worker.DefaultConcurrency,
	}
	missing := []error{err}
	if s.MailFrom == "" {
		missing = append(missing, errors.New("MAIL_FROM is not set"))
	}
	if s.QueueURL == "" {
		missing = append(missing, errors.New("STATUS_EVENTS_QUEUE_URL is not set"))
	}
	switch {
	case s.VerifyEmailURL == "" && s.Lambda:
		missing = append(missing, errors.New("VERIFY_EMAIL_URL is not set"))
	case s.VerifyEmailURL == "":
		s.VerifyEmailURL = localVerifyEmailURL
	}
	if _, err := worker.ParseVerifyEmailURL(s.VerifyEmailURL); err != nil && s.VerifyEmailURL != "" {
		missing = append(missing, fmt.Errorf("VERIFY_EMAIL_URL: %w", err))
	}
	switch {
	case s.PasswordResetURL == "" && s.Lambda:
		missing = append(missing, errors.New("ACCOUNT_RECOVERY_URL is not set"))
	case s.PasswordResetURL == "":
		s.PasswordResetURL = localPasswordResetURL
	}
	if _, err := worker.ParsePasswordResetURL(s.PasswordResetURL); err != nil && s.PasswordResetURL != "" {
		missing = append(missing, fmt.Errorf("ACCOUNT_RECOVERY_URL: %w", err))
	}
	if s.Retention, err = jobboard.ParseRetentionDays(getenv("RETENTION_DAYS")); err != nil {
		missing = append(missing, fmt.Errorf("RETENTION_DAYS: %w", err))
	}
	if v := getenv("WORKER_CONCURRENCY"); v != "" {
		if s.Concurrency, err = strconv.Atoi(v); err != nil || s.Concurrency < 1 || s.Concurrency > 100 {
			missing = append(missing, fmt.Errorf("WORKER_CONCURRENCY = %q: want a whole number from 1 to 100", v))
		}
	}
	if v := getenv("SES_MAX_SEND_RATE"); v != "" {
		if s.MaxSendRate, err = strconv.ParseFloat(v, 64); err != nil || !(s.MaxSendRate > 0 && s.MaxSendRate <= 100_000) {
			missing = append(missing, fmt.Errorf("SES_MAX_SEND_RATE = %q: want emails per second, more than 0 (unset: SES's GetAccount tells)", v))
		}
	}
	if s.DB, err = database.LoadSettings(getenv, ""); err != nil {
		missing = append(missing, err)
	}
	if s.LocalTimeout, err = function.LocalInvocationTimeout(getenv, localTimeout); err != nil {
		missing = append(missing, err)
	}
	return s, errors.Join(missing...)
}
