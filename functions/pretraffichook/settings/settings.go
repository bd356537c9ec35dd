// Package settings reads the PreTraffic hook's settings from its
// environment (the variables are listed in the command's documentation,
// functions/pretraffichook). It is apart from the main so that the
// deploy's tests can call Load and compare the names it reads with
// template.yaml.
package settings

import (
	"errors"

	"github.com/jobboard/jobboard/internal/function"
)

// Settings are the hook's settings.
type Settings struct {
	function.Settings
	// MigrateVersionARN and APIVersionARN are the versions this deploy
	// published: the migration function to migrate with, the API to
	// smoke-test.
	MigrateVersionARN string
	APIVersionARN     string
}

// Load reads the settings through getenv: every variable the hook uses,
// whatever their values. The error names every variable that is missing
// or malformed.
func Load(getenv func(string) string) (Settings, error) {
	shared, err := function.Load(getenv)
	s := Settings{
		Settings:          shared,
		MigrateVersionARN: getenv("MIGRATE_FUNCTION_VERSION_ARN"),
		APIVersionARN:     getenv("API_FUNCTION_VERSION_ARN"),
	}
	problems := []error{err}
	if s.MigrateVersionARN == "" {
		problems = append(problems, errors.New("MIGRATE_FUNCTION_VERSION_ARN is not set"))
	}
	if s.APIVersionARN == "" {
		problems = append(problems, errors.New("API_FUNCTION_VERSION_ARN is not set"))
	}
	return s, errors.Join(problems...)
}
