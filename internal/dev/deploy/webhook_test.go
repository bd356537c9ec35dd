package deploy

import (
	"context"
	"crypto/md5" //nolint:gosec // SQS's own checksum algorithm, not security
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/webhook"
	"github.com/jobboard/jobboard/internal/webhook/webhooktest"
)

// The webhook queue keeps a message through the whole retry window, and
// its maxReceiveCount outlasts the receives that the backoff makes in that
// window even when every jitter is the shortest, so that only a message
// that outlived its delivery reaches the DLQ.
func TestWebhookQueueCoversTheRetryWindow(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	var q queueProps
	tpl.props(t, "WebhookEventsQueue", &q)
	if q.MessageRetentionPeriod == nil || time.Duration(*q.MessageRetentionPeriod)*time.Second < jobboard.WebhookRetryWindow+12*time.Hour {
		t.Errorf("WebhookEventsQueue keeps a message %s s; want the retry window (%v) and half a day more", intString(q.MessageRetentionPeriod), jobboard.WebhookRetryWindow)
	}
	// Receives in the window with the shortest delays: half of each step.
	receives, elapsed := 0, time.Duration(0)
	for elapsed < jobboard.WebhookRetryWindow {
		receives++
		step := webhook.DefaultBackoffMax
		if n := receives - 1; n < 40 {
			step = min(webhook.DefaultBackoffMax, webhook.DefaultBackoffBase<<n)
		}
		elapsed += step / 2
	}
	if q.RedrivePolicy == nil || q.RedrivePolicy.MaxReceiveCount < receives+5 {
		t.Errorf("WebhookEventsQueue maxReceiveCount %v; the backoff makes up to %d receives in %v, want at least 5 more",
			q.RedrivePolicy, receives, jobboard.WebhookRetryWindow)
	}
	fn := tpl.functionProps(t, "WebhookFunction")
	if time.Duration(fn.Timeout)*time.Second < webhook.DefaultAttemptTimeout+10*time.Second {
		t.Errorf("WebhookFunction Timeout %d s; want the attempt timeout (%v) and its margins", fn.Timeout, webhook.DefaultAttemptTimeout)
	}
	env := tpl.environment(t, "WebhookFunction")
	if env["DATABASE_ROLE"] != "jobboard_webhooks" {
		t.Errorf("WebhookFunction DATABASE_ROLE %q; want jobboard_webhooks, the role of migration 008", env["DATABASE_ROLE"])
	}
	if _, ok := env["WEBHOOK_ALLOW_INSECURE"]; ok {
		t.Error("WebhookFunction sets WEBHOOK_ALLOW_INSECURE: a development setting")
	}
	if _, ok := tpl.environment(t, "ApiFunction")["WEBHOOK_ALLOW_INSECURE"]; ok {
		t.Error("ApiFunction sets WEBHOOK_ALLOW_INSECURE: a development setting")
	}
}

// The webhook pipeline has its alarms: its DLQ, the function's errors and
// throttles, the age of the oldest delivery never attempted, failures at
// a scale no receiver explains, and endpoints disabled in numbers.
func TestWebhookAlarms(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	byMetric := tpl.alarmsByMetric(t)
	fn := "FunctionName=" + refPlaceholder("WebhookFunction")
	for _, key := range []string{
		"AWS/SQS ApproximateNumberOfMessagesVisible QueueName=" + getAttPlaceholder("WebhookEventsDLQ", "QueueName"),
		"AWS/Lambda Errors " + fn,
		"AWS/Lambda Throttles " + fn,
		"jobboard WebhookOldestUnattemptedSeconds Service=sweeper",
		"jobboard WebhookAttemptFailures Service=webhooks",
		"jobboard WebhookEndpointsDisabled Service=webhooks",
	} {
		if n := len(byMetric[key]); n != 1 {
			t.Errorf("%d alarms on %s; want 1", n, key)
		}
	}
}

// The sample event looks exactly like what Lambda's SQS event source
// delivers from the webhook queue.
func TestWebhookSampleEvent(t *testing.T) {
	t.Parallel()
	var e events.SQSEvent
	decodeStrict(t, filepath.Join(eventsDir, "sqs-webhook-delivery.json"), &e)
	if len(e.Records) != 1 {
		t.Fatalf("%d records; want 1", len(e.Records))
	}
	r := e.Records[0]
	sum := md5.Sum([]byte(r.Body)) //nolint:gosec // see import
	if r.Md5OfBody != hex.EncodeToString(sum[:]) || r.Md5OfMessageAttributes != sqsAttributesMD5(r.MessageAttributes) {
		t.Errorf("checksums %s %s", r.Md5OfBody, r.Md5OfMessageAttributes)
	}
	if !strings.HasSuffix(r.EventSourceARN, "-webhook-events") || r.EventSource != "aws:sqs" || !uuidPattern.MatchString(r.MessageId) {
		t.Errorf("source %s %s, message id %s", r.EventSourceARN, r.EventSource, r.MessageId)
	}
	if typ := r.MessageAttributes["type"]; typ.StringValue == nil || *typ.StringValue != jobboard.EventTypeWebhookDelivery {
		t.Errorf("type attribute %+v", typ)
	}
	ev, err := jobboard.DecodeEvent([]byte(strings.ReplaceAll(r.Body, "{{occurred_at}}", "2026-12-02T10:00:00Z")))
	if err != nil || ev.Type != jobboard.EventTypeWebhookDelivery || !uuidPattern.MatchString(ev.EventID) {
		t.Errorf("body %s: %+v, %v", r.Body, ev, err)
	}
}

// The webhook function's bootstrap under the emulator, with the settings
// of a deployment (no WEBHOOK_ALLOW_INSECURE, which Lambda refuses): an
// endpoint made and pinged through the API's; its URL then pointed at a
// receiver on this machine (as a name that resolves to an internal address
// would); the ping's delivery (the sample event names it: delivery 1 of a
// fresh database), and its relayed copy, are attempted, refused by the
// client's policy and logged as failed attempts, and the receiver gets
// nothing.
func TestWebhookFunctionUnderTheLambdaEmulator(t *testing.T) {
	t.Parallel()
	rie := rieBinary(t)
	bins := buildBootstraps(t, loadTemplate(t), "ApiFunction", "WebhookFunction")
	domain := fmt.Sprintf("rie-hooks%d.example.com", time.Now().UnixNano())
	env, _ := localEnv(t, domain)
	hooks := localaws.NewTestQueue(t, 200, 30)
	env["WEBHOOK_EVENTS_QUEUE_URL"] = hooks.URL

	api := startEmulator(t, rie, "ApiFunction", bins["ApiFunction"], env)
	var s struct {
		Token string `json:"token"`
	}
	resp := apiCall(t, api, apiRequest(t, "POST", "/v1/auth/register", "", map[string]any{
		"email": "boss@" + domain, "password": "correct horse battery", "name": "Boss", "role": "employer"}), http.StatusCreated)
	if err := json.Unmarshal([]byte(resp.Body), &s); err != nil {
		t.Fatal(err)
	}
	apiCall(t, api, apiRequest(t, "POST", "/v1/companies", s.Token, map[string]any{"name": "Acme"}), http.StatusCreated)
	resp = apiCall(t, api, apiRequest(t, "POST", "/v1/companies/1/webhooks", s.Token, map[string]any{
		"url": "https://hooks." + domain + "/receive", "event_types": []string{"job.closed"}}), http.StatusCreated)
	var created struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(resp.Body), &created); err != nil || created.ID != 1 {
		t.Fatalf("created %s (%v)", resp.Body, err)
	}
	apiCall(t, api, apiRequest(t, "POST", "/v1/companies/1/webhooks/1/ping", s.Token, nil), http.StatusAccepted)
	relayed := receiveAsLambdaEvent(t, hooks)
	if len(relayed.Records) != 1 {
		t.Fatalf("the webhook queue holds %d messages after the ping; want 1", len(relayed.Records))
	}

	ctx := context.Background()
	admin := pgtest.Pool(t, pgtest.AdminURL(t, env["DATABASE_URL"]))
	rc := webhooktest.NewReceiver(t, nil)
	if _, err := admin.Exec(ctx, `UPDATE webhook_endpoints SET url = $1 WHERE id = 1`, rc.URL()); err != nil {
		t.Fatal(err)
	}
	// Its sessions take the role jobboard_webhooks, which the test user of
	// pgtestdb may not; the administrator may.
	env["DATABASE_URL"] = pgtest.AdminURL(t, env["DATABASE_URL"])
	fn := startEmulator(t, rie, "WebhookFunction", bins["WebhookFunction"], env)
	for i, payload := range [][]byte{readEvent(t, "sqs-webhook-delivery.json", nil), mustJSON(t, relayed)} {
		var r events.SQSEventResponse
		if body := fn.invoke(payload); json.Unmarshal(body, &r) != nil || len(r.BatchItemFailures) != 1 {
			t.Fatalf("invocation %d: %s; want the record failed, to be retried after its backoff", i+1, body)
		}
	}
	if got := rc.Receipts(); len(got) != 0 {
		t.Errorf("the receiver on this machine got %d requests; want none", len(got))
	}
	rows, err := admin.Query(ctx, `SELECT coalesce(error, '') FROM webhook_attempts ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	attempts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) != 2 || !strings.Contains(attempts[0], "not allowed") || !strings.Contains(attempts[1], "not allowed") {
		t.Errorf("attempts %q; want two, refused by the URL policy", attempts)
	}
	// What the rollback alarms read by version is written by version.
	checkVersionedMetrics(t, "webhooks", "7", emfLines(t, fn.output.String()))
}

// The insecure webhook switch (http, any port, loopback) is for local
// development only: under the Lambda runtime emulator, which sets
// AWS_LAMBDA_RUNTIME_API as Lambda does, the API and the webhook function
// refuse to start with it, and say why.
func TestTheInsecureWebhookSwitchIsRefusedInsideLambda(t *testing.T) {
	t.Parallel()
	rie := rieBinary(t)
	bins := buildBootstraps(t, loadTemplate(t), "ApiFunction", "WebhookFunction")
	env, _ := localEnv(t, "insecure.example.com")
	env["WEBHOOK_ALLOW_INSECURE"] = "true"
	for name, bin := range bins {
		fn := startEmulator(t, rie, name, bin, env)
		status, body := fn.call([]byte(`{}`))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		said := fn.output.Contains(ctx, `WEBHOOK_ALLOW_INSECURE = "true": for local development and tests only, refused inside Lambda`)
		cancel()
		if status == http.StatusOK || !said {
			t.Errorf("%s with WEBHOOK_ALLOW_INSECURE=true: status %d %s, output:\n%s\nwant the cold start refused, naming the switch", name, status, body, fn.output.String())
		}
	}
}
