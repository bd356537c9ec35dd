package localaws

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

var shared struct {
	sqsOnce, sesOnce sync.Once
	sqs, ses         *Server
	sqsErr, sesErr   error
}

// SQS returns the SQS stand-in of this test process, starting it on first
// use; it fails tb if the stand-in cannot start. Tests share it, so each
// should create its own uniquely named queues. It lives as long as the test
// binary: the launcher exits when the binary does.
func SQS(tb testing.TB) *Server {
	tb.Helper()
	shared.sqsOnce.Do(func() { shared.sqs, shared.sqsErr = StartSQS(context.Background()) })
	if shared.sqsErr != nil {
		tb.Fatalf("local SQS: %v", shared.sqsErr)
	}
	return shared.sqs
}

// SES returns the SES stand-in of this test process, starting it on first
// use; it fails tb if the stand-in cannot start. Tests share it, so each
// should send to its own recipients and read with EmailsTo.
func SES(tb testing.TB) *Server {
	tb.Helper()
	shared.sesOnce.Do(func() { shared.ses, shared.sesErr = StartSES(context.Background()) })
	if shared.sesErr != nil {
		tb.Fatalf("local SES: %v", shared.sesErr)
	}
	return shared.ses
}

// TestQueue is a queue with its dead-letter queue on the shared SQS
// stand-in, made for one test.
type TestQueue struct {
	Client *sqs.Client
	URL    string
	DLQURL string
}

var queueSeq atomic.Int64

// NewTestQueue creates, on the shared SQS stand-in, a queue and its DLQ with
// names no other test of the process uses (see CreateQueueWithDLQ for the
// arguments). It fails tb on error.
func NewTestQueue(tb testing.TB, visibilityTimeout, maxReceiveCount int) TestQueue {
	tb.Helper()
	client := NewSQSClient(SQS(tb).Endpoint)
	name := fmt.Sprintf("test-%d-%d", os.Getpid(), queueSeq.Add(1))
	url, dlq, err := CreateQueueWithDLQ(context.Background(), client, name, visibilityTimeout, maxReceiveCount)
	if err != nil {
		tb.Fatalf("local SQS: %v", err)
	}
	return TestQueue{Client: client, URL: url, DLQURL: dlq}
}
