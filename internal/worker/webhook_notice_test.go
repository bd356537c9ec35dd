package worker_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// An endpoint disabled by the delivery function (here, a 410) queues one
// webhook.endpoint_disabled event per member of its company; the worker
// sends each member one email with the fixed text, verified address or
// not, and a second copy of an event sends nothing.
func TestWebhookDisabledNoticeReachesEveryMember(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := workertest.New(t, workertest.Options{})
	tag := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	var members []jobboard.User
	for i := range 2 {
		u, err := pgtest.CreateUser(ctx, e.Pool, jobboard.Registration{Email: "member" + strconv.Itoa(i) + "-" + tag + "@example.com",
			Name: "Evil <b>Name</b> https://phish.example", Role: jobboard.RoleEmployer}, "h")
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, u)
	}
	boss := jobboard.Actor{UserID: members[0].ID, Role: jobboard.RoleEmployer}
	company, err := e.Writes.CreateCompany(ctx, boss, jobboard.NewCompany{Name: "PayPal Security"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Pool.Exec(ctx, `INSERT INTO company_members (company_id, user_id) VALUES ($1, $2)`, company.ID, members[1].ID); err != nil {
		t.Fatal(err)
	}
	endpoint, err := e.Writes.CreateWebhookEndpoint(ctx, boss, company.ID, jobboard.NewWebhookEndpoint{
		URL: "https://evil.example/login", EventTypes: []string{jobboard.WebhookJobClosed}}, []byte("sealed"))
	if err != nil {
		t.Fatal(err)
	}
	ping := pgtest.MustWrite(t, e.DB, func(st jobboard.Writes) error {
		_, err := st.PingWebhookEndpoint(ctx, boss, company.ID, endpoint.ID)
		return err
	})[0]
	deliverer := pgtest.Open(t, pgtest.RoleURL(t, e.URL, pgtest.WebhookRole))
	target, err := deliverer.BeginWebhookAttempt(ctx, ping.DeliveryID, ping.Generation, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	gone := 410
	if _, err := deliverer.FinishWebhookAttempt(ctx, jobboard.WebhookAttemptRecord{
		DeliveryID: ping.DeliveryID, Generation: ping.Generation, Token: target.Token, Trigger: target.Trigger, EndpointID: endpoint.ID,
		Attempt: jobboard.WebhookAttempt{AttemptedAt: time.Now(), StatusCode: &gone}, State: jobboard.DeliveryFailed,
		FailureReason: jobboard.FailureGone, Gone: true, DisableAfter: jobboard.WebhookDisableAfter,
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := e.Pool.Query(ctx, `SELECT payload::text FROM outbox WHERE event_type = 'webhook.endpoint_disabled'`)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for rows.Next() {
		var b string
		_ = rows.Scan(&b)
		bodies = append(bodies, b)
	}
	if len(bodies) != 2 {
		t.Fatalf("%d notices queued, want 2", len(bodies))
	}
	poller := e.Poller(e.Handler(t, e.Sender))
	for _, b := range bodies {
		e.SendBody(t, b)
	}
	e.Drain(t, poller, 30*time.Second)
	// A second copy of one of them, later: a duplicate, no second email.
	e.SendBody(t, bodies[0])
	e.Drain(t, poller, 30*time.Second)

	for _, m := range members {
		got := e.EmailsTo(t, m.Email)
		if len(got) != 1 {
			t.Fatalf("%d emails to %s, want 1", len(got), m.Email)
		}
		mail := got[0]
		if mail.Subject != "A webhook endpoint of your company was disabled" ||
			!strings.Contains(mail.Body.Text, "webhook endpoint "+strconv.FormatInt(endpoint.ID, 10)+" of your company "+strconv.FormatInt(company.ID, 10)) ||
			!strings.Contains(mail.Body.Text, "410 Gone") {
			t.Errorf("email %q:\n%s", mail.Subject, mail.Body.Text)
		}
		for _, userText := range []string{"PayPal", "evil.example", "phish", "Evil"} {
			if strings.Contains(mail.Body.Text, userText) || strings.Contains(mail.Body.HTML, userText) {
				t.Errorf("the notice carries %q, which a user wrote", userText)
			}
		}
	}
}

func TestRenderWebhookDisabled(t *testing.T) {
	t.Parallel()
	for reason, want := range map[string]string{jobboard.DisabledGone: "410 Gone", jobboard.DisabledFailing: "three days"} {
		subject, text, html, err := mail.RenderWebhookDisabled(jobboard.WebhookDisabledEmail{EventID: "e", CompanyID: 3, EndpointID: 9, Reason: reason})
		if err != nil || subject == "" || !strings.Contains(text, want) || !strings.Contains(html, want) || !strings.Contains(text, "/v1/companies/3/webhooks/9") {
			t.Errorf("%s: %q %q %v", reason, subject, text, err)
		}
	}
	if _, _, _, err := mail.RenderWebhookDisabled(jobboard.WebhookDisabledEmail{Reason: "bored"}); err == nil {
		t.Error("an unknown reason rendered")
	}
}
