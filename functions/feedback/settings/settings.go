// Package settings reads the feedback function's settings from its
// environment (the variables are listed in the command's documentation,
// functions/feedback). It is apart from the main so that the deploy's
// tests can call Load and compare the names it reads with template.yaml.
package settings

import (
	"errors"
	"time"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/function/database"
)

// localTimeout is the default deadline of one local invocation: the
// function's Timeout in template.yaml.
const localTimeout = 30 * time.Second

// Settings are the feedback function's settings.
type Settings struct {
	function.Settings
	// QueueURL is the feedback queue, which the local mode polls.
	QueueURL string
	// LocalTimeout is the deadline of one local invocation.
	LocalTimeout time.Duration
	// DB names the database and how statements are sent.
	DB database.Settings
}

// Load reads the settings through getenv: every variable the function
// uses, whatever their values. The error names every variable that is
// missing or malformed.
func Load(getenv func(string) string) (Settings, error) {
	shared, err := function.Load(getenv)
	s := Settings{Settings: shared, QueueURL: getenv("FEEDBACK_QUEUE_URL")}
	problems := []error{err}
	if s.QueueURL == "" && !s.Lambda {
		problems = append(problems, errors.New("FEEDBACK_QUEUE_URL is not set (the local mode polls it)"))
	}
	if s.DB, err = database.LoadSettings(getenv, ""); err != nil {
		problems = append(problems, err)
	}
	if s.LocalTimeout, err = function.LocalInvocationTimeout(getenv, localTimeout); err != nil {
		problems = append(problems, err)
	}
	return s, errors.Join(problems...)
}
