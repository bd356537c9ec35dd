package settings_test

import (
	"strings"
	"testing"

	"github.com/jobboard/jobboard/functions/migrate/settings"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// An environment that lacks the database and has a malformed setting gets
// one error that names both, not the first alone.
func TestMissingSettingsAreListedAtOnce(t *testing.T) {
	t.Parallel()
	_, err := settings.Load(env(map[string]string{"LOG_LEVEL": "loud"}))
	for _, name := range []string{"DATABASE_URL", "DATABASE_SECRET_ARN", "LOG_LEVEL"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("no database, LOG_LEVEL=loud: %v; want %s named", err, name)
		}
	}
}
