package main

import (
	"context"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/outbox"
	"github.com/jobboard/jobboard/internal/postgres"
	"github.com/jobboard/jobboard/internal/queue"
)

// eventRelay returns the relay that publishes a committed event to its
// queue right after the change, and marks its outbox row published: status
// events to queueURL (STATUS_EVENTS_QUEUE_URL), verification and password
// reset events to accountQueueURL (ACCOUNT_EMAILS_QUEUE_URL; queueURL when
// unset), webhook deliveries to webhookQueueURL (WEBHOOK_EVENTS_QUEUE_URL). Without a
// queue URL it returns nil: the API then runs without the fast path, and
// the sweeper publishes every outbox row; without the webhook queue's, the
// webhook deliveries wait for the sweeper. AWS_ENDPOINT_URL_SQS points the
// SDK at a local stand-in (standard SDK configuration, no special branch).
func eventRelay(ctx context.Context, queueURL, accountQueueURL, webhookQueueURL string, awsCfg aws.Config, db *postgres.DB, logger *slog.Logger) jobboard.EventRelay {
	if queueURL == "" {
		logger.WarnContext(ctx, "STATUS_EVENTS_QUEUE_URL is not set: status events wait in the outbox for the sweeper")
		return nil
	}
	client := sqs.NewFromConfig(awsCfg)
	publisher := queue.NewPublisher(client, queueURL)
	publisher.Logger = logger
	router := queue.Router{Status: publisher, Logger: logger}
	if accountQueueURL != "" {
		account := queue.NewPublisher(client, accountQueueURL)
		account.Logger = logger
		router.Account = account
	}
	if webhookQueueURL != "" {
		webhooks := queue.NewPublisher(client, webhookQueueURL)
		webhooks.Logger = logger
		router.Webhooks = webhooks
	}
	return outbox.NewRelay(router, db)
}
