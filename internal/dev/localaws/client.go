package localaws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// Region is the region the stand-ins' clients use.
const Region = "us-east-1"

var staticCredentials = credentials.NewStaticCredentialsProvider("test", "test", "")

// NewSQSClient returns an SQS client for the stand-in at endpoint, with
// static credentials test/test in us-east-1. optFns adjust it further.
func NewSQSClient(endpoint string, optFns ...func(*sqs.Options)) *sqs.Client {
	return sqs.New(sqs.Options{
		Region:       Region,
		Credentials:  staticCredentials,
		BaseEndpoint: aws.String(endpoint),
	}, optFns...)
}

// NewSESClient returns an SES v2 client for the stand-in at endpoint, with
// static credentials test/test in us-east-1. optFns adjust it further.
func NewSESClient(endpoint string, optFns ...func(*sesv2.Options)) *sesv2.Client {
	return sesv2.New(sesv2.Options{
		Region:       Region,
		Credentials:  staticCredentials,
		BaseEndpoint: aws.String(endpoint),
	}, optFns...)
}

// DLQRetention is how long the dead-letter queue keeps a message: 14 days,
// the SQS maximum, as template.yaml declares it.
const DLQRetention = 14 * 24 * 60 * 60

// CreateQueueWithDLQ creates the queue name and its dead-letter queue
// name+"-dlq", the way template.yaml declares them: the DLQ keeps messages 14
// days; the source queue has
// the visibility timeout (seconds) and a RedrivePolicy moving a message to
// the DLQ after maxReceiveCount receives. It returns both queue URLs.
// (template.yaml also gives the DLQ a RedriveAllowPolicy; fauxqs does not
// know that attribute, and nothing local needs it.)
func CreateQueueWithDLQ(ctx context.Context, client *sqs.Client, name string, visibilityTimeout, maxReceiveCount int) (queueURL, dlqURL string, err error) {
	if name == "" || maxReceiveCount < 1 || visibilityTimeout < 0 {
		return "", "", errors.New("create queue with DLQ: need a name, visibilityTimeout ≥ 0 and maxReceiveCount ≥ 1")
	}
	dlqURL, dlqARN, err := createQueue(ctx, client, name+"-dlq", map[string]string{
		string(types.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(DLQRetention),
	})
	if err != nil {
		return "", "", fmt.Errorf("create queue with DLQ %s: %w", name, err)
	}
	redrive, err := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": maxReceiveCount})
	if err != nil {
		return "", "", fmt.Errorf("create queue with DLQ %s: %w", name, err)
	}
	queueURL, _, err = createQueue(ctx, client, name, map[string]string{
		string(types.QueueAttributeNameVisibilityTimeout): strconv.Itoa(visibilityTimeout),
		string(types.QueueAttributeNameRedrivePolicy):     string(redrive),
	})
	if err != nil {
		return "", "", fmt.Errorf("create queue with DLQ %s: %w", name, err)
	}
	return queueURL, dlqURL, nil
}

// createQueue creates a queue and returns its URL and ARN.
func createQueue(ctx context.Context, client *sqs.Client, name string, attrs map[string]string) (url, arn string, err error) {
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", "", fmt.Errorf("create queue %s: %w", name, err)
	}
	url = aws.ToString(out.QueueUrl)
	arn, err = QueueARN(ctx, client, url)
	return url, arn, err
}

// QueueARN returns the ARN of the queue at url.
func QueueARN(ctx context.Context, client *sqs.Client, url string) (string, error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameQueueArn},
	})
	if err != nil {
		return "", fmt.Errorf("get ARN of queue %s: %w", url, err)
	}
	arn := out.Attributes[string(types.QueueAttributeNameQueueArn)]
	if arn == "" {
		return "", fmt.Errorf("get ARN of queue %s: no QueueArn attribute", url)
	}
	return arn, nil
}

// depthAttributes are the counts whose sum is a queue's depth.
var depthAttributes = []types.QueueAttributeName{
	types.QueueAttributeNameApproximateNumberOfMessages,
	types.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
	types.QueueAttributeNameApproximateNumberOfMessagesDelayed,
}

// QueueDepth returns the messages of the queue at url: visible, in flight
// and delayed. Errors: the request failed, or a count is missing or not a
// number.
func QueueDepth(ctx context.Context, client *sqs.Client, url string) (int, error) {
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: depthAttributes})
	if err != nil {
		return 0, fmt.Errorf("depth of queue %s: %w", url, err)
	}
	total := 0
	for _, k := range depthAttributes {
		n, err := strconv.Atoi(out.Attributes[string(k)])
		if err != nil {
			return 0, fmt.Errorf("depth of queue %s: %s = %q", url, k, out.Attributes[string(k)])
		}
		total += n
	}
	return total, nil
}
