package localaws_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	sestypes "github.com/aws/aws-sdk-go-v2/service/sesv2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/jobboard/jobboard/internal/dev/localaws"
)

var queueSeq atomic.Int64

// queueName returns a name no other test of this process uses.
func queueName(t *testing.T) string {
	return fmt.Sprintf("localaws-%d-%d", time.Now().UnixNano(), queueSeq.Add(1))
}

func TestStartAndCloseSQS(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := localaws.StartSQS(ctx)
	if err != nil {
		t.Fatalf("StartSQS: %v", err)
	}
	if !strings.HasPrefix(s.Endpoint, "http://127.0.0.1:") {
		t.Errorf("Endpoint = %q, want loopback", s.Endpoint)
	}
	if code := get(t, s.Endpoint+"/health"); code != http.StatusOK {
		t.Errorf("GET /health = %d, want 200", code)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-s.Exited():
	default:
		t.Fatal("process still running after Close")
	}
	if resp, err := http.Get(s.Endpoint + "/health"); err == nil {
		resp.Body.Close()
		t.Error("stand-in still answers after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestStartSESOnFixedPort(t *testing.T) {
	t.Parallel()
	// Find a port that is free now: start on a free one, note it, stop it.
	first, err := localaws.StartSES(context.Background())
	if err != nil {
		t.Fatalf("StartSES: %v", err)
	}
	port, err := strconv.Atoi(first.Endpoint[strings.LastIndexByte(first.Endpoint, ':')+1:])
	if err != nil {
		t.Fatalf("port of %q: %v", first.Endpoint, err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s, err := localaws.StartSES(context.Background(), localaws.WithPort(port))
	if err != nil {
		t.Fatalf("StartSES(WithPort(%d)): %v", port, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if want := "http://127.0.0.1:" + strconv.Itoa(port); s.Endpoint != want {
		t.Errorf("Endpoint = %q, want %q", s.Endpoint, want)
	}
	if code := get(t, s.Endpoint+"/health-check"); code != http.StatusOK {
		t.Errorf("GET /health-check = %d, want 200", code)
	}

	// A second server on the same port cannot start, and says why.
	_, err = localaws.StartSES(context.Background(), localaws.WithPort(port))
	if err == nil {
		t.Fatal("second StartSES on a busy port succeeded")
	}
	if !strings.Contains(err.Error(), "not listening") {
		t.Errorf("error does not show the stand-in's output: %v", err)
	}
}

func TestStartHonoursContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := localaws.StartSQS(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("StartSQS(cancelled ctx) error = %v, want context.Canceled", err)
	}
}

func TestSharedServers(t *testing.T) {
	t.Parallel()
	if a, b := localaws.SQS(t), localaws.SQS(t); a != b {
		t.Error("SQS(t) started two servers")
	}
	if a, b := localaws.SES(t), localaws.SES(t); a != b {
		t.Error("SES(t) started two servers")
	}
	q1, q2 := localaws.NewTestQueue(t, 30, 5), localaws.NewTestQueue(t, 30, 5)
	if q1.URL == q2.URL || q1.DLQURL == q2.DLQURL || q1.URL == q1.DLQURL {
		t.Errorf("NewTestQueue gave overlapping queues: %+v, %+v", q1, q2)
	}
}

func TestCreateQueueWithDLQ(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	client := localaws.NewSQSClient(localaws.SQS(t).Endpoint)
	name := queueName(t)
	queueURL, dlqURL, err := localaws.CreateQueueWithDLQ(ctx, client, name, 7, 3)
	if err != nil {
		t.Fatalf("CreateQueueWithDLQ: %v", err)
	}
	if !strings.HasSuffix(queueURL, "/"+name) || !strings.HasSuffix(dlqURL, "/"+name+"-dlq") {
		t.Fatalf("urls = %q, %q", queueURL, dlqURL)
	}
	dlqARN, err := localaws.QueueARN(ctx, client, dlqURL)
	if err != nil {
		t.Fatal(err)
	}

	attrs := queueAttributes(t, client, queueURL)
	if got := attrs["VisibilityTimeout"]; got != "7" {
		t.Errorf("VisibilityTimeout = %q, want 7", got)
	}
	wantRedrive := fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":3}`, dlqARN)
	if got := attrs["RedrivePolicy"]; got != wantRedrive {
		t.Errorf("RedrivePolicy = %s, want %s", got, wantRedrive)
	}
	dlqAttrs := queueAttributes(t, client, dlqURL)
	if got := dlqAttrs["MessageRetentionPeriod"]; got != "1209600" {
		t.Errorf("DLQ MessageRetentionPeriod = %q, want 1209600", got)
	}

	// The queue works: a message sent is received.
	if _, err := client.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(queueURL), MessageBody: aws.String("hello")}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	out, err := client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), WaitTimeSeconds: 1})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "hello" {
		t.Fatalf("received %+v, want one message \"hello\"", out.Messages)
	}

	if _, _, err := localaws.CreateQueueWithDLQ(ctx, client, queueName(t), 5, 0); err == nil {
		t.Error("maxReceiveCount 0 accepted")
	}
}

func queueAttributes(t *testing.T, client *sqs.Client, url string) map[string]string {
	t.Helper()
	out, err := client.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl:       aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameAll},
	})
	if err != nil {
		t.Fatalf("GetQueueAttributes %s: %v", url, err)
	}
	return out.Attributes
}

func TestEmailsListedAndCleared(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A server of its own: this test clears the store.
	s, err := localaws.StartSES(ctx)
	if err != nil {
		t.Fatalf("StartSES: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	client := localaws.NewSESClient(s.Endpoint)

	before := time.Now().Unix()
	for _, to := range []string{"ada@example.com", "grace@example.com"} {
		_, err := client.SendEmail(ctx, &sesv2.SendEmailInput{
			FromEmailAddress: aws.String("jobs@example.com"),
			Destination:      &sestypes.Destination{ToAddresses: []string{to}},
			Content: &sestypes.EmailContent{Simple: &sestypes.Message{
				Subject: &sestypes.Content{Data: aws.String("Hi " + to)},
				Body: &sestypes.Body{
					Text: &sestypes.Content{Data: aws.String("text for " + to)},
					Html: &sestypes.Content{Data: aws.String("<p>html for " + to + "</p>")},
				},
			}},
		})
		if err != nil {
			t.Fatalf("SendEmail to %s: %v", to, err)
		}
	}

	all, err := localaws.Emails(ctx, s.Endpoint)
	if err != nil {
		t.Fatalf("Emails: %v", err)
	}
	if len(all) != 2 {
		t.Fatalf("Emails = %d emails, want 2", len(all))
	}
	e := all[0]
	if e.MessageID == "" || e.From != "jobs@example.com" || len(e.Destination.To) != 1 || e.Destination.To[0] != "ada@example.com" ||
		e.Subject != "Hi ada@example.com" || e.Body.Text != "text for ada@example.com" || e.Body.HTML != "<p>html for ada@example.com</p>" {
		t.Errorf("first email = %+v", e)
	}
	if e.At < before-1 {
		t.Errorf("At = %d, before sending = %d", e.At, before)
	}

	mine, err := localaws.EmailsTo(ctx, s.Endpoint, "Grace@example.com")
	if err != nil {
		t.Fatalf("EmailsTo: %v", err)
	}
	if len(mine) != 1 || mine[0].Subject != "Hi grace@example.com" {
		t.Errorf("EmailsTo(grace) = %+v, want her one email", mine)
	}

	if err := localaws.ClearEmails(ctx, s.Endpoint); err != nil {
		t.Fatalf("ClearEmails: %v", err)
	}
	all, err = localaws.Emails(ctx, s.Endpoint)
	if err != nil {
		t.Fatalf("Emails after clear: %v", err)
	}
	if len(all) != 0 {
		t.Errorf("after ClearEmails: %d emails, want 0", len(all))
	}
}

func TestEmailsFromAServerThatIsNotThere(t *testing.T) {
	t.Parallel()
	if _, err := localaws.Emails(context.Background(), "http://127.0.0.1:1"); err == nil {
		t.Error("Emails from a closed port succeeded")
	}
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestNotInstalled(t *testing.T) {
	// A module without .ci/localaws/node_modules (t.Chdir: not parallel).
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "a", "b")
	if err := os.MkdirAll(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	_, err := localaws.StartSQS(context.Background())
	if !errors.Is(err, localaws.ErrNotInstalled) {
		t.Fatalf("StartSQS error = %v, want ErrNotInstalled", err)
	}
	if !strings.Contains(err.Error(), "make localaws") || !strings.Contains(err.Error(), filepath.Join(dir, ".ci", "localaws")) {
		t.Errorf("error %q does not say what to run and where it looked", err)
	}
}
