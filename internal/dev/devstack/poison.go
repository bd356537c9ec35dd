package devstack

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jobboard/jobboard/internal/dev/localaws"
)

// PoisonResult is what Poison saw.
type PoisonResult struct {
	MessageID string
	Body      string
	// Elapsed is from sending the message to finding it in the DLQ.
	Elapsed time.Duration
}

// Poison sends a message that is not an event to the stack's queue and
// waits, at most timeout, until it is in the dead-letter queue, reporting
// progress to out. The stack's worker fails it as malformed and makes it
// visible again at once, so it is received maxReceiveCount times in a few
// seconds, and SQS then moves it to the DLQ. The message is left in the DLQ
// (visible), as a real one would be, for a redrive or a look.
// Errors: SQS failed, or the message did not reach the DLQ in time.
func Poison(ctx context.Context, st State, timeout time.Duration, out io.Writer) (PoisonResult, error) {
	client := localaws.NewSQSClient(st.SQSEndpoint)
	body := "not an event: poison " + rand.Text()
	start := time.Now()
	sent, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &st.QueueURL, MessageBody: &body})
	if err != nil {
		return PoisonResult{}, fmt.Errorf("send to %s: %w", st.QueueURL, err)
	}
	r := PoisonResult{MessageID: aws.ToString(sent.MessageId), Body: body}
	fmt.Fprintf(out, "sent %q to %s (message %s); the worker fails it as malformed each time it is received\n", body, st.QueueURL, r.MessageID)

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		got, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl:                    &st.DLQURL,
			MaxNumberOfMessages:         10,
			WaitTimeSeconds:             1,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		})
		if ctx.Err() != nil {
			return r, fmt.Errorf("message %s not in the dead-letter queue %s after %v", r.MessageID, st.DLQURL, timeout)
		}
		if err != nil {
			return r, fmt.Errorf("receive from %s: %w", st.DLQURL, err)
		}
		for _, m := range got.Messages {
			// Leave every message as it was: visible in the DLQ.
			_, _ = client.ChangeMessageVisibility(context.WithoutCancel(ctx), &sqs.ChangeMessageVisibilityInput{
				QueueUrl: &st.DLQURL, ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: 0,
			})
			if aws.ToString(m.Body) == body {
				r.Elapsed = time.Since(start)
				fmt.Fprintf(out, "in the dead-letter queue %s after %.1f s, body unchanged\n", st.DLQURL, r.Elapsed.Seconds())
				return r, nil
			}
		}
	}
}
