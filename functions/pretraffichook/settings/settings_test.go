package settings_test

import (
	"strings"
	"testing"

	"github.com/jobboard/jobboard/functions/pretraffichook/settings"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// An environment that lacks every required setting, with a malformed one,
// gets one error that names each of them, not the first alone.
func TestMissingSettingsAreListedAtOnce(t *testing.T) {
	t.Parallel()
	_, err := settings.Load(env(map[string]string{"LOG_LEVEL": "loud"}))
	for _, name := range []string{"MIGRATE_FUNCTION_VERSION_ARN", "API_FUNCTION_VERSION_ARN", "LOG_LEVEL"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("nothing set, LOG_LEVEL=loud: %v; want %s named", err, name)
		}
	}
}
