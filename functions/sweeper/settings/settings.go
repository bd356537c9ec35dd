// Package settings reads the sweeper's settings from its environment (the
// variables are listed in the command's documentation, functions/sweeper).
// It is apart from the main so that the deploy's tests can call Load and
// compare the names it reads with template.yaml.
package settings

import (
	"errors"
	"fmt"
	"time"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// defaultSweepInterval is how often the local mode sweeps: the schedule of
// template.yaml.
const defaultSweepInterval = time.Minute

// Settings are the sweeper's settings.
type Settings struct {
	function.Settings
	// QueueURL receives the status events of the outbox,
	// WebhookQueueURL its webhook deliveries.
	QueueURL        string
	WebhookQueueURL string
	// AccountQueueURL receives the account emails' events (verification,
	// password reset); empty: QueueURL does.
	AccountQueueURL string
	Retention       time.Duration
	// Grace is how long a fresh outbox row is left to the API's relay;
	// zero: the sweeper's default.
	Grace time.Duration
	// Interval is the local mode's time between sweeps.
	Interval time.Duration
	// DB names the database and how statements are sent.
	DB database.Settings
}

// Load reads the settings through getenv: every variable the sweeper
// uses, whatever their values. The error names every variable that is
// missing or malformed.
func Load(getenv func(string) string) (Settings, error) {
	shared, err := function.Load(getenv)
	s := Settings{
		Settings:        shared,
		QueueURL:        getenv("STATUS_EVENTS_QUEUE_URL"),
		WebhookQueueURL: getenv("WEBHOOK_EVENTS_QUEUE_URL"),
		AccountQueueURL: getenv("ACCOUNT_EMAILS_QUEUE_URL"),
		Interval:        defaultSweepInterval,
	}
	interval := getenv("SWEEP_INTERVAL")
	problems := []error{err}
	if s.QueueURL == "" {
		problems = append(problems, errors.New("STATUS_EVENTS_QUEUE_URL is not set"))
	}
	if s.WebhookQueueURL == "" {
		problems = append(problems, errors.New("WEBHOOK_EVENTS_QUEUE_URL is not set"))
	}
	if s.Retention, err = jobboard.ParseRetentionDays(getenv("RETENTION_DAYS")); err != nil {
		problems = append(problems, fmt.Errorf("RETENTION_DAYS: %w", err))
	}
	if s.Grace, err = function.ParseDuration("SWEEP_GRACE", getenv("SWEEP_GRACE"), s.Grace, time.Nanosecond, 0); err != nil {
		problems = append(problems, err)
	}
	if s.DB, err = database.LoadSettings(getenv, ""); err != nil {
		problems = append(problems, err)
	}
	// Only the local mode sweeps on a timer; in Lambda the schedule does.
	if !s.Lambda {
		if s.Interval, err = function.ParseDuration("SWEEP_INTERVAL", interval, s.Interval, time.Nanosecond, 0); err != nil {
			problems = append(problems, err)
		}
	}
	return s, errors.Join(problems...)
}
