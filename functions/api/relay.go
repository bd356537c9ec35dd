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

// eventRelay returns the relay that publishes a committed status event to
// the queue at queueURL (STATUS_EVENTS_QUEUE_URL) right after the change,
// and marks its outbox row published. Without a queue URL it returns nil:
// the API then runs without the fast path, and the sweeper publishes every
// outbox row. AWS_ENDPOINT_URL_SQS points the SDK at a local stand-in
// (standard SDK configuration, no special branch).
func eventRelay(ctx context.Context, queueURL string, awsCfg aws.Config, db *postgres.DB, logger *slog.Logger) jobboard.EventRelay {
	if queueURL == "" {
		logger.WarnContext(ctx, "STATUS_EVENTS_QUEUE_URL is not set: status events wait in the outbox for the sweeper")
		return nil
	}
	publisher := queue.NewPublisher(sqs.NewFromConfig(awsCfg), queueURL)
	publisher.Logger = logger
	return outbox.NewRelay(publisher, db)
}
