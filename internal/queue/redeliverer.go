package queue

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// maxVisibility is the longest visibility timeout SQS accepts: 12 hours.
const maxVisibility = 12 * time.Hour

// Redeliverer gives failed records of a batch their backoff: it sets each
// message's visibility timeout with ChangeMessageVisibilityBatch, so that
// SQS delivers it again after that delay instead of after the queue's
// visibility timeout. It implements jobboard.Redeliverer.
type Redeliverer struct {
	client   *sqs.Client
	queueURL string
}

var _ jobboard.Redeliverer = (*Redeliverer)(nil)

// NewRedeliverer returns a Redeliverer for the messages of the queue at
// queueURL.
func NewRedeliverer(client *sqs.Client, queueURL string) *Redeliverer {
	return &Redeliverer{client: client, queueURL: queueURL}
}

// Redeliver changes the visibility of the messages, ten per call; delays
// are rounded up to whole seconds and capped at 12 hours. Errors: a call
// failed, or SQS refused entries (a receipt handle that expired, for
// instance); the others are changed regardless.
func (r *Redeliverer) Redeliver(ctx context.Context, rs []jobboard.Redelivery) error {
	var errs []error
	for start := 0; start < len(rs); start += MaxBatch {
		chunk := rs[start:min(start+MaxBatch, len(rs))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, d := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				ReceiptHandle:     aws.String(d.ReceiptHandle),
				VisibilityTimeout: int32(math.Ceil(min(d.After, maxVisibility).Seconds())),
			}
		}
		out, err := r.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{
			QueueUrl: aws.String(r.queueURL), Entries: entries})
		if err != nil {
			errs = append(errs, fmt.Errorf("change visibility of %d messages: %w", len(chunk), err))
			continue
		}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			errs = append(errs, fmt.Errorf("change visibility of message %s: %s %s",
				chunk[i].MessageID, aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	return errors.Join(errs...)
}

var _ jobboard.Requeuer = (*Redeliverer)(nil)

// maxDelay is the longest delay SQS gives a new message: 15 minutes.
const maxDelay = 15 * time.Minute

// Requeue sends the message body again as a new message of the queue,
// with its type attribute, delivered after rq.After (rounded up to whole
// seconds, at most 15 minutes): the new message's receive count starts at
// zero. The original is the caller's to delete (the event source mapping
// deletes a record that did not fail). Errors: the call failed.
func (r *Redeliverer) Requeue(ctx context.Context, rq jobboard.Requeue) error {
	_, err := r.client.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:          aws.String(r.queueURL),
		MessageBody:       aws.String(rq.Body),
		MessageAttributes: typeAttribute(rq.Type),
		DelaySeconds:      int32(math.Ceil(min(rq.After, maxDelay).Seconds())),
	})
	if err != nil {
		return fmt.Errorf("requeue message: %w", err)
	}
	return nil
}
