package settings

import (
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// An environment that lacks every required setting gets one error that
// names each of them, not the first alone.
func TestMissingSettingsAreListedAtOnce(t *testing.T) {
	t.Parallel()
	lambdaOnly := map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001", "DATABASE_STATEMENT_TIMEOUT": "soon"}
	_, err := Load(env(lambdaOnly))
	for _, name := range []string{"DATABASE_URL", "DATABASE_SECRET_ARN", "JWT_SECRET", "JWT_SECRET_ARN", "WEBHOOK_SEALING_KEY",
		"WEBHOOK_SEALING_KEY_SECRET_ARN", "DATABASE_STATEMENT_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("nothing set, in Lambda: %v; want %s named", err, name)
		}
	}
	// Locally the keys are made at random: only the database is missing.
	if _, err := Load(env(nil)); err == nil || strings.Contains(err.Error(), "JWT_SECRET") || !strings.Contains(err.Error(), "DATABASE_URL") {
		t.Errorf("nothing set, locally: %v; want only the database named", err)
	}
}
