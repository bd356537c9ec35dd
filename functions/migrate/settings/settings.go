// Package settings reads the migration function's settings from its
// environment (the variables are listed in the command's documentation,
// functions/migrate). It is apart from the main so that the deploy's tests
// can call Load and compare the names it reads with template.yaml.
package settings

import (
	"errors"
	"fmt"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/secret"
)

// Settings are the migration function's settings.
type Settings struct {
	function.Settings
	// Database says where the database is; its secret is looked up at
	// each migration.
	Database secret.DatabaseSettings
}

// Load reads the settings through getenv: every variable the function
// uses, whatever their values. The error names every variable that is
// missing or malformed.
func Load(getenv func(string) string) (Settings, error) {
	shared, err := function.Load(getenv)
	s := Settings{Settings: shared, Database: secret.LoadDatabase(getenv)}
	problems := []error{err}
	if s.Database.URL == "" && s.Database.SecretARN == "" {
		problems = append(problems, fmt.Errorf("%s or %s is not set", secret.EnvDatabaseURL, secret.EnvDatabaseSecretARN))
	}
	return s, errors.Join(problems...)
}
