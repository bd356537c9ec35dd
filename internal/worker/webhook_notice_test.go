package worker_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/mail"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

// An endpoint disabled by the delivery function (here, a 410) queues one
// webhook.endpoint_disabled event per member of its company; the worker
// sends each member whose address is verified one email with the fixed
// text, and a second copy of an event sends nothing.
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
		if _, err := e.Pool.Exec(ctx, `UPDATE users SET email_verified_at = now() WHERE id = $1`, u.ID); err != nil {
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
		_, err := st.PingWebhookEndpoint(ctx, boss, company.ID, endpoint.ID, jobboard.DefaultWebhookDispatchPolicy)
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

// disableByGone runs one round of the hostile loop of issue 29: the
// member enables the endpoint (PATCH enabled: true), pings it, and the
// delivery function meets a 410 Gone, which disables it again.
func disableByGone(t *testing.T, e *workertest.Env, deliverer *pgtest.DB, member jobboard.Actor, companyID, endpointID int64) {
	t.Helper()
	ctx := context.Background()
	yes := true
	ping := pgtest.MustWrite(t, e.DB, func(st jobboard.Writes) error {
		if _, err := st.UpdateWebhookEndpoint(ctx, member, companyID, endpointID, jobboard.WebhookEndpointPatch{Enabled: &yes}); err != nil {
			return err
		}
		_, err := st.PingWebhookEndpoint(ctx, member, companyID, endpointID, jobboard.DefaultWebhookDispatchPolicy)
		return err
	})[0]
	target, err := deliverer.BeginWebhookAttempt(ctx, ping.DeliveryID, ping.Generation, time.Minute)
	if err != nil || target.Token == "" {
		t.Fatalf("begin attempt: %+v, %v", target, err)
	}
	gone := 410
	out, err := deliverer.FinishWebhookAttempt(ctx, jobboard.WebhookAttemptRecord{
		DeliveryID: ping.DeliveryID, Generation: ping.Generation, Token: target.Token, Trigger: target.Trigger, EndpointID: endpointID,
		Attempt: jobboard.WebhookAttempt{AttemptedAt: time.Now(), StatusCode: &gone}, State: jobboard.DeliveryFailed,
		FailureReason: jobboard.FailureGone, Gone: true, DisableAfter: jobboard.WebhookDisableAfter,
	})
	if err != nil || !out.Disabled {
		t.Fatalf("finish attempt: %+v, %v", out, err)
	}
}

// The hostile loop of issue 29: register an employer with someone else's
// address (never verified), make a company and an endpoint that answers
// 410, then enable it and ping it again and again. Each round disables the
// endpoint; the address's owner gets no email at all. A verified member
// running the same loop gets one email a day
// (jobboard.WebhookNoticeInterval), not one a round.
func TestWebhookNoticeHostileLoop(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := workertest.New(t, workertest.Options{})
	deliverer := pgtest.Open(t, pgtest.RoleURL(t, e.URL, pgtest.WebhookRole))
	tag := strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	const rounds = 6
	loop := func(email string, verified bool) (endpointID int64, round func()) {
		u, err := pgtest.CreateUser(ctx, e.Pool, jobboard.Registration{Email: email, Name: "Squatter", Role: jobboard.RoleEmployer}, "h")
		if err != nil {
			t.Fatal(err)
		}
		if verified {
			if _, err := e.Pool.Exec(ctx, `UPDATE users SET email_verified_at = now() WHERE id = $1`, u.ID); err != nil {
				t.Fatal(err)
			}
		}
		member := jobboard.Actor{UserID: u.ID, Role: jobboard.RoleEmployer}
		company, err := e.Writes.CreateCompany(ctx, member, jobboard.NewCompany{Name: "Loop"})
		if err != nil {
			t.Fatal(err)
		}
		endpoint, err := e.Writes.CreateWebhookEndpoint(ctx, member, company.ID, jobboard.NewWebhookEndpoint{
			URL: "https://gone.example/hook", EventTypes: []string{jobboard.WebhookJobClosed}}, []byte("sealed"))
		if err != nil {
			t.Fatal(err)
		}
		return endpoint.ID, func() { disableByGone(t, e, deliverer, member, company.ID, endpoint.ID) }
	}
	victim := "victim-" + tag + "@example.com"
	_, squat := loop(victim, false)
	owner := "owner-" + tag + "@example.com"
	ownEndpoint, own := loop(owner, true)
	for range rounds {
		squat()
		own()
	}
	notices := func() int {
		return count(t, e.Pool, `SELECT count(*) FROM outbox WHERE event_type = 'webhook.endpoint_disabled'`)
	}
	queued := notices()

	poller := e.Poller(e.Handler(t, e.Sender))
	send := func() {
		rows, err := e.Pool.Query(ctx, `SELECT payload::text FROM outbox WHERE event_type = 'webhook.endpoint_disabled'
			AND event_id::text NOT IN (SELECT event_id FROM processed_events)`)
		if err != nil {
			t.Fatal(err)
		}
		var bodies []string
		for rows.Next() {
			var b string
			if err := rows.Scan(&b); err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, b)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		for _, b := range bodies {
			e.SendBody(t, b)
		}
		e.Drain(t, poller, 30*time.Second)
	}
	send()
	if got := e.EmailsTo(t, victim); len(got) != 0 {
		t.Errorf("%d rounds mailed %d notices to an address its account never verified, want none", rounds, len(got))
	}
	if got := e.EmailsTo(t, owner); len(got) != 1 {
		t.Errorf("%d rounds mailed %d notices to the verified member, want 1", rounds, len(got))
	}
	if queued != 2 {
		t.Errorf("%d rounds on two endpoints queued %d notices, want one each", rounds, queued)
	}

	// A day later, the next disabling tells the member again: once.
	if _, err := e.Pool.Exec(ctx, `UPDATE webhook_endpoints SET notified_at = notified_at - make_interval(secs => $2)
		WHERE id = $1`, ownEndpoint, jobboard.WebhookNoticeInterval.Seconds()); err != nil {
		t.Fatal(err)
	}
	for range rounds {
		own()
	}
	send()
	if got := e.EmailsTo(t, owner); len(got) != 2 {
		t.Errorf("a day later, %d notices in all to the verified member, want 2", len(got))
	}
}

// count runs a query that counts.
func count(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
