package worker

import (
	"context"
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// ByQueue returns the Lambda handler of a worker that consumes the status
// events queue and others beside it (the account emails'), one event
// source mapping each: every batch comes from one queue (its records'
// EventSourceARN) and goes to the Handler of that queue in others, keyed
// by queue URL, whose failed records get their backoff, and whose
// deferred records go back, on that queue; any other batch goes to
// status.
func ByQueue(status *Handler, others map[string]*Handler) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	byName := make(map[string]*Handler, len(others))
	for url, h := range others {
		byName[queueName(url, "/")] = h
	}
	return func(ctx context.Context, batch events.SQSEvent) (events.SQSEventResponse, error) {
		if len(batch.Records) > 0 {
			if h, ok := byName[queueName(batch.Records[0].EventSourceARN, ":")]; ok {
				return h.Handle(ctx, batch)
			}
		}
		return status.Handle(ctx, batch)
	}
}

// queueName is the last part of a queue's URL (by "/") or ARN (by ":"):
// its name.
func queueName(s, sep string) string {
	return s[strings.LastIndex(s, sep)+1:]
}
