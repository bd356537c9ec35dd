package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/secret"
)

// loadSealer looks the sealing key up (WEBHOOK_SEALING_KEY, or
// WEBHOOK_SEALING_KEY_SECRET_ARN). Locally, when key names none, a random
// key is made: the secrets it seals can then be opened by no delivery function
// (make dev shares one key between the two); in Lambda that is an error.
func loadSealer(ctx context.Context, lambda bool, key secret.Key, newClient func() (secret.Getter, error), logger *slog.Logger) (jobboard.SecretSealer, error) {
	s, err := secret.WebhookSealer(ctx, key, newClient)
	if errors.Is(err, secret.ErrNotConfigured) && !lambda {
		logger.WarnContext(ctx, "WEBHOOK_SEALING_KEY is not set: webhook secrets are sealed with a random key no delivery function has")
		s, err = secret.NewSealer([]byte(rand.Text()+rand.Text()), nil)
	}
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	return s, nil
}
