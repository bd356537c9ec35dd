package secret

import (
	"context"
)

// EnvWebhookDatabaseSecretARN optionally names a secret like
// DATABASE_SECRET_ARN's for the webhook delivery function's own database
// login.
const EnvWebhookDatabaseSecretARN = "WEBHOOK_DATABASE_SECRET_ARN"

// DatabaseAs is Database for a function that may log in as a user of its
// own: arn, when not empty, names the secret instead of
// DATABASE_SECRET_ARN. DATABASE_URL still wins (local runs).
func DatabaseAs(ctx context.Context, getenv func(string) string, newClient func() (Getter, error), arn string) (string, *DatabaseCredentials, error) {
	if arn == "" {
		return Database(ctx, getenv, newClient)
	}
	return Database(ctx, func(name string) string {
		if name == EnvDatabaseSecretARN {
			return arn
		}
		return getenv(name)
	}, newClient)
}
