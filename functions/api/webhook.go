package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"

	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/secret"
)

// webhookSettings are the API's webhook settings: the queue that the
// deliveries a change dispatches are relayed to right away
// (WEBHOOK_EVENTS_QUEUE_URL; without it they wait for the sweeper) and the
// URL policy (WEBHOOK_ALLOW_INSECURE, local development only, refused
// inside Lambda). The sealer of signing secrets comes from loadSealer.
type webhookSettings struct {
	queueURL string
	urls     jobboard.WebhookURLPolicy
}

// loadWebhookSettings reads the plain settings.
func loadWebhookSettings(shared function.Settings, getenv func(string) string) (webhookSettings, error) {
	insecure, err := shared.LocalFlag("WEBHOOK_ALLOW_INSECURE", getenv("WEBHOOK_ALLOW_INSECURE"))
	return webhookSettings{
		queueURL: getenv("WEBHOOK_EVENTS_QUEUE_URL"),
		urls:     jobboard.WebhookURLPolicy{AllowInsecure: insecure},
	}, err
}

// loadSealer looks the sealing key up (WEBHOOK_SEALING_KEY, or
// WEBHOOK_SEALING_KEY_SECRET_ARN). Locally, when none is set, a random key
// is made: the secrets it seals can then be opened by no delivery function
// (make dev shares one key between the two); in Lambda that is an error.
func loadSealer(ctx context.Context, lambda bool, getenv func(string) string, newClient func() (secret.Getter, error), logger *slog.Logger) (jobboard.SecretSealer, error) {
	s, err := secret.WebhookSealer(ctx, getenv, newClient)
	if errors.Is(err, secret.ErrNotConfigured) && !lambda {
		logger.WarnContext(ctx, "WEBHOOK_SEALING_KEY is not set: webhook secrets are sealed with a random key no delivery function has")
		s, err = secret.NewSealer([]byte(rand.Text()+rand.Text()), nil)
	}
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	return s, nil
}
