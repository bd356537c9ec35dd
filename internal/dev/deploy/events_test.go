package deploy

import (
	"bytes"
	"crypto/md5" //nolint:gosec // SQS's own checksum algorithm, not security
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/pretraffichook"
)

const eventsDir = repoRoot + "/events"

// decodeStrict decodes the file at path into v, refusing unknown fields: a
// misspelt field in a sample would otherwise pass silently.
func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// sqsAttributesMD5 is SQS's MD5OfMessageAttributes: for each attribute in
// name order, the length-prefixed (4 bytes, big-endian) name and data type,
// a transport byte (1 for String and Number, 2 for Binary) and the
// length-prefixed value.
func sqsAttributesMD5(attrs map[string]events.SQSMessageAttribute) string {
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	field := func(b []byte) {
		_ = binary.Write(&buf, binary.BigEndian, uint32(len(b)))
		buf.Write(b)
	}
	for _, n := range names {
		a := attrs[n]
		field([]byte(n))
		field([]byte(a.DataType))
		if a.StringValue != nil {
			buf.WriteByte(1)
			field([]byte(*a.StringValue))
		} else {
			buf.WriteByte(2)
			field(a.BinaryValue)
		}
	}
	sum := md5.Sum(buf.Bytes()) //nolint:gosec // see import
	return hex.EncodeToString(sum[:])
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// statusEvent decodes an SQS body as the worker does (jobboard.DecodeEvent),
// once its {{occurred_at}} placeholder is filled, and tells whether it is a
// well-formed status event.
func statusEvent(body string) (jobboard.Event, bool) {
	ev, err := jobboard.DecodeEvent([]byte(strings.ReplaceAll(body, "{{occurred_at}}", "2026-12-02T10:00:00Z")))
	return ev, err == nil && ev.Type == jobboard.EventTypeStatusChanged
}

// loadSQSEvent reads events/NAME and checks that each record looks exactly
// like what Lambda's SQS event source delivers.
func loadSQSEvent(t *testing.T, tpl *samTemplate, name string) events.SQSEvent {
	t.Helper()
	var e events.SQSEvent
	decodeStrict(t, filepath.Join(eventsDir, name), &e)
	if len(e.Records) == 0 || len(e.Records) > 10 {
		t.Fatalf("%s: %d records; want 1..10 (the batch size)", name, len(e.Records))
	}
	var q queueProps
	tpl.props(t, "StatusEventsQueue", &q)
	queueSuffix := strings.TrimPrefix(q.QueueName, "${AWS::StackName}")
	ids := map[string]bool{}
	for i, r := range e.Records {
		where := fmt.Sprintf("%s record %d", name, i)
		if !uuidPattern.MatchString(r.MessageId) || ids[r.MessageId] {
			t.Errorf("%s: messageId %q is not a fresh UUID", where, r.MessageId)
		}
		ids[r.MessageId] = true
		sum := md5.Sum([]byte(r.Body)) //nolint:gosec // see import
		if r.Md5OfBody != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: md5OfBody %s; the body's MD5 is %x", where, r.Md5OfBody, sum)
		}
		if want := sqsAttributesMD5(r.MessageAttributes); r.Md5OfMessageAttributes != want {
			t.Errorf("%s: md5OfMessageAttributes %v; want %s", where, r.Md5OfMessageAttributes, want)
		}
		for _, a := range []string{"ApproximateReceiveCount", "SentTimestamp", "SenderId", "ApproximateFirstReceiveTimestamp"} {
			if r.Attributes[a] == "" {
				t.Errorf("%s: no attributes.%s", where, a)
			}
		}
		if r.ReceiptHandle == "" || r.EventSource != "aws:sqs" {
			t.Errorf("%s: receiptHandle %q, eventSource %q", where, r.ReceiptHandle, r.EventSource)
		}
		arn := strings.Split(r.EventSourceARN, ":")
		if len(arn) != 6 || arn[0] != "arn" || arn[2] != "sqs" || arn[3] != r.AWSRegion || !strings.HasSuffix(arn[5], queueSuffix) {
			t.Errorf("%s: eventSourceARN %q, awsRegion %q; want the status events queue (…%s) in that region", where, r.EventSourceARN, r.AWSRegion, queueSuffix)
		}
		typ, ok := r.MessageAttributes["type"]
		if !ok || typ.DataType != "String" || typ.StringValue == nil || *typ.StringValue != jobboard.EventTypeStatusChanged {
			t.Errorf("%s: messageAttributes.type %+v; want String %q", where, typ, jobboard.EventTypeStatusChanged)
		}
	}
	return e
}

func TestSQSSampleEvents(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)

	one := loadSQSEvent(t, tpl, "sqs-status-event.json")
	if len(one.Records) != 1 {
		t.Errorf("sqs-status-event.json: %d records; want 1", len(one.Records))
	}
	for _, r := range one.Records {
		if _, ok := statusEvent(r.Body); !ok {
			t.Errorf("sqs-status-event.json: body %s is not a well-formed status event", r.Body)
		}
	}

	dup := loadSQSEvent(t, tpl, "sqs-duplicate-event.json")
	eventIDs := map[string]int{}
	for _, r := range dup.Records {
		ev, ok := statusEvent(r.Body)
		if !ok {
			t.Errorf("sqs-duplicate-event.json: body %s is not a well-formed status event", r.Body)
		}
		eventIDs[ev.EventID]++
	}
	if len(dup.Records) < 2 || len(eventIDs) != 1 {
		t.Errorf("sqs-duplicate-event.json: %d records with event ids %v; want two or more deliveries of one event", len(dup.Records), eventIDs)
	}

	bad := loadSQSEvent(t, tpl, "sqs-malformed.json")
	var malformed, good int
	for _, r := range bad.Records {
		if _, ok := statusEvent(r.Body); ok {
			good++
		} else {
			malformed++
		}
	}
	if malformed != 1 || good < 1 {
		t.Errorf("sqs-malformed.json: %d malformed and %d good records; want one malformed beside good ones", malformed, good)
	}

	// Every good record of the samples is the one event of application 1
	// moving from submitted to reviewing, the change api-change-status.json
	// makes on the demo (see docs/development.md, "Sample events").
	want, _ := statusEvent(one.Records[0].Body)
	if want.ApplicationID != 1 || want.OldStatus != jobboard.StatusSubmitted || want.NewStatus != jobboard.StatusReviewing {
		t.Errorf("sqs-status-event.json: %+v; want application 1 moving from submitted to reviewing", want)
	}
	for name, e := range map[string]events.SQSEvent{"sqs-duplicate-event.json": dup, "sqs-malformed.json": bad} {
		for _, r := range e.Records {
			if ev, ok := statusEvent(r.Body); ok && ev != want {
				t.Errorf("%s: record %s carries %+v; want the event of sqs-status-event.json, %+v", name, r.MessageId, ev, want)
			}
		}
	}
}

func TestSweeperSampleEvent(t *testing.T) {
	t.Parallel()
	var e events.EventBridgeEvent
	decodeStrict(t, filepath.Join(eventsDir, "sweeper-schedule.json"), &e)
	if e.DetailType != "Scheduled Event" || e.Source != "aws.events" || e.Time.IsZero() || len(e.Resources) != 1 ||
		!strings.HasPrefix(e.Resources[0], "arn:aws:events:"+e.Region+":"+e.AccountID+":rule/") || string(e.Detail) != "{}" {
		t.Errorf("sweeper-schedule.json = %+v; want an EventBridge Scheduled Event from a rule", e)
	}
}

// What CodeDeploy sends a PreTraffic hook: the deployment and the hook
// execution to report on (make invoke with it reports to CodeDeploy, so
// it needs AWS_ENDPOINT_URL_CODEDEPLOY pointed at a stand-in).
func TestDeployHookSampleEvent(t *testing.T) {
	t.Parallel()
	var e pretraffichook.Event
	decodeStrict(t, filepath.Join(eventsDir, "codedeploy-pretraffic.json"), &e)
	if !strings.HasPrefix(e.DeploymentID, "d-") || e.LifecycleEventHookExecutionID == "" {
		t.Errorf("codedeploy-pretraffic.json = %+v; want a deployment id and a hook execution id", e)
	}
}

// The checksum helper, on values computed independently.
func TestSQSAttributesMD5(t *testing.T) {
	t.Parallel()
	v := "application.status_changed"
	got := sqsAttributesMD5(map[string]events.SQSMessageAttribute{"type": {StringValue: &v, DataType: "String"}})
	// MD5 of 00000004 "type" 00000006 "String" 01 0000001a "application.status_changed".
	var want bytes.Buffer
	want.Write([]byte{0, 0, 0, 4})
	want.WriteString("type")
	want.Write([]byte{0, 0, 0, 6})
	want.WriteString("String")
	want.Write([]byte{1, 0, 0, 0, 26})
	want.WriteString(v)
	sum := md5.Sum(want.Bytes()) //nolint:gosec // see import
	if got != hex.EncodeToString(sum[:]) {
		t.Errorf("sqsAttributesMD5 = %s; want %x", got, sum)
	}
}
