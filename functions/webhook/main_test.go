package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/functions/webhook/settings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/secret"
	"github.com/jobboard/jobboard/internal/webhook/webhooktest"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// A sealing key that is set but not a key fails the wiring, before any
// database is opened.
func TestWireRefusesAMalformedKey(t *testing.T) {
	t.Parallel()
	base := map[string]string{"WEBHOOK_EVENTS_QUEUE_URL": "http://127.0.0.1:1/000000000000/q", "DATABASE_URL": "postgres://127.0.0.1:1/none",
		"WEBHOOK_SEALING_KEY": "short"}
	s, err := settings.Load(env(base))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wire(context.Background(), s, io.Discard); err == nil || !strings.Contains(err.Error(), "sealing key") {
		t.Errorf("a short key: %v; want the sealing key named", err)
	}
}

// wire builds a handler that delivers, from the environment alone, with
// its database sessions in the role jobboard_webhooks.
func TestWireBuildsAWorkingHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	key := strings.Repeat("k", 40)
	sealer, err := secret.NewSealer([]byte(key), nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := db.CreateUser(ctx, jobboard.Registration{Email: "boss@example.com", Name: "Boss", Role: jobboard.RoleEmployer}, "h")
	if err != nil {
		t.Fatal(err)
	}
	boss := jobboard.Actor{UserID: u.ID, Role: u.Role}
	company, err := db.CreateCompany(ctx, boss, jobboard.NewCompany{Name: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	rc := webhooktest.NewReceiver(t, nil)
	whsec := jobboard.NewWebhookSecret()
	sealed, _ := sealer.Seal([]byte(whsec), jobboard.WebhookSecretContext(company.ID))
	e, err := db.CreateWebhookEndpoint(ctx, boss, company.ID, jobboard.NewWebhookEndpoint{URL: rc.URL(), EventTypes: []string{"job.closed"}}, sealed)
	if err != nil {
		t.Fatal(err)
	}
	pinged := pgtest.MustWrite(t, db.DB, func(st jobboard.Writes) error {
		_, err := st.PingWebhookEndpoint(ctx, boss, company.ID, e.ID, jobboard.DefaultWebhookDispatchPolicy)
		return err
	})
	body, err := jobboard.EncodeEvent(pinged[0])
	if err != nil {
		t.Fatal(err)
	}

	kv := map[string]string{
		"WEBHOOK_EVENTS_QUEUE_URL": "http://127.0.0.1:1/000000000000/q", "WEBHOOK_ALLOW_INSECURE": "true",
		"WEBHOOK_SEALING_KEY": key, "DATABASE_URL": pgtest.AdminURL(t, db.URL),
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
	}
	s, err := settings.Load(env(kv))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	w, err := wire(ctx, s, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	handle, ok := w.Handler.(func(context.Context, events.SQSEvent) (events.SQSEventResponse, error))
	if !ok {
		t.Fatalf("handler %T; want the SQS batch handler", w.Handler)
	}
	resp, err := handle(ctx, events.SQSEvent{Records: []events.SQSMessage{{MessageId: "m-1", Body: string(body)}}})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v\n%s", resp, err, out.String())
	}
	got := rc.Receipts()
	if len(got) != 1 || webhooktest.Verify(whsec, got[0].Header, got[0].Body, time.Now()) != nil {
		t.Fatalf("receiver got %d requests", len(got))
	}
	if !strings.Contains(out.String(), `"outcome":"delivered"`) || !strings.Contains(out.String(), `"WebhookDelivered":1`) {
		t.Errorf("stdout lacks the record line or the EMF line:\n%s", out.String())
	}
}

func TestRunRefusesArguments(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"webhook", "serve"}, env(nil), io.Discard)
	if err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("run with an argument: %v", err)
	}
}
