package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/functions/sweeper/settings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/jobboard/jobboard/internal/dev/localaws"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/sweeper"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// wire wires the real adapters from the environment alone; the scheduled
// invocation publishes a stranded event and logs its report.
func TestWireBuildsAWorkingSweeper(t *testing.T) {
	e := workertest.New(t, workertest.Options{})
	app := e.NewApp(t)
	ctx := context.Background()
	ev := pgtest.MustWrite(t, e.DB, func(st jobboard.Writes) error {
		_, err := st.ChangeStatus(ctx, app.Employer, app.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing})
		return err
	})[0]
	if _, err := e.Pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '1 hour' WHERE event_id = $1`, ev.EventID); err != nil {
		t.Fatal(err)
	}
	// Delivery feedback past the 15 days' retention, and some within it.
	for _, age := range []string{"16 days", "14 days"} {
		if _, err := e.Pool.Exec(ctx, `
			WITH k AS (INSERT INTO email_feedback_events (feedback_id, kind, ses_message_id, received_at)
			           VALUES ('Delivery:m-' || $1, 'delivered', 'm-' || $1, now() - $1::interval))
			INSERT INTO email_deliveries (ses_message_id, email, state, updated_at)
			VALUES ('m-' || $1, 'ada@example.com', 'delivered', now() - $1::interval)`, age); err != nil {
			t.Fatal(err)
		}
	}
	// The AWS settings come through getenv, as everything else (awsenv).
	env := map[string]string{
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL_SQS": localaws.SQS(t).Endpoint,
		"DATABASE_URL":         e.URL, "STATUS_EVENTS_QUEUE_URL": e.QueueURL, "RETENTION_DAYS": "15",
		"WEBHOOK_EVENTS_QUEUE_URL": e.QueueURL}
	var out bytes.Buffer
	getenv := func(k string) string { return env[k] }
	s, err := settings.Load(getenv)
	if err != nil {
		t.Fatal(err)
	}
	w, err := wire(ctx, s, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	handle, ok := w.Handler.(func(context.Context, events.EventBridgeEvent) (sweeper.Report, error))
	if !ok {
		t.Fatalf("handler %T; want the sweeper's", w.Handler)
	}

	r, err := handle(ctx, events.EventBridgeEvent{DetailType: "Scheduled Event", Source: "aws.events"})
	if err != nil || r.Published != 1 || r.Deleted["feedback_events"] != 1 || r.Deleted["email_deliveries"] != 1 {
		t.Fatalf("Handle = %+v, %v; want 1 published, 1 feedback event and 1 delivery deleted", r, err)
	}
	var left int
	if err := e.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM email_feedback_events WHERE ses_message_id = 'm-14 days')
		+ (SELECT count(*) FROM email_deliveries WHERE ses_message_id = 'm-14 days')`).Scan(&left); err != nil || left != 2 {
		t.Errorf("feedback rows within the retention left = %d, %v; want both", left, err)
	}
	if n := e.Depth(t, e.QueueURL); n != 1 {
		t.Errorf("queue depth = %d, want 1", n)
	}
	if !strings.Contains(out.String(), `"msg":"sweep done"`) || !strings.Contains(out.String(), `"published":1`) ||
		!strings.Contains(out.String(), `"OutboxBacklog":0`) || !strings.Contains(out.String(), `"feedback_events_deleted":1`) {
		t.Errorf("stdout lacks the report or the metrics line:\n%s", out.String())
	}
}

// Like the other functions, the sweeper takes no command line arguments.
func TestRunRefusesArguments(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"sweeper", "migrate"}, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("run with an argument: %v; want an unknown-command error", err)
	}
}
