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
// visibility timeout. It implements jobboard.Redeliverer, and
// jobboard.Requeuer for records put off without a receive counted.
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

// maxDelay is the longest delivery delay SQS accepts: 15 minutes.
const maxDelay = 15 * time.Minute

// Requeue sends the messages again as new messages of the queue, ten per
// SendMessageBatch call, each delayed by its After (rounded up to whole
// seconds, capped at 15 minutes); the messages received stay as they are,
// for the caller to have deleted. Errors: a call failed, or SQS refused
// entries; the others are sent regardless.
func (r *Redeliverer) Requeue(ctx context.Context, rs []jobboard.Requeue) error {
	var errs []error
	for start := 0; start < len(rs); start += MaxBatch {
		chunk := rs[start:min(start+MaxBatch, len(rs))]
		entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
		for i, q := range chunk {
			var attrs map[string]types.MessageAttributeValue
			for name, v := range q.Attributes {
				if attrs == nil {
					attrs = map[string]types.MessageAttributeValue{}
				}
				attrs[name] = types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
			}
			entries[i] = types.SendMessageBatchRequestEntry{
				Id:                aws.String(strconv.Itoa(i)),
				MessageBody:       aws.String(q.Body),
				MessageAttributes: attrs,
				DelaySeconds:      int32(math.Ceil(min(q.After, maxDelay).Seconds())),
			}
		}
		out, err := r.client.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(r.queueURL), Entries: entries})
		if err != nil {
			errs = append(errs, fmt.Errorf("send %d messages again: %w", len(chunk), err))
			continue
		}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			errs = append(errs, fmt.Errorf("send message %s again: %s %s",
				chunk[i].MessageID, aws.ToString(f.Code), aws.ToString(f.Message)))
		}
	}
	return errors.Join(errs...)
}
