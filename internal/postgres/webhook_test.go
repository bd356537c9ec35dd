package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// mustEndpoint creates an endpoint of the world's company subscribed to
// types, with a stand-in sealed secret.
func mustEndpoint(t testing.TB, w world, types ...string) jobboard.WebhookEndpoint {
	t.Helper()
	e, err := w.db.CreateWebhookEndpoint(context.Background(), w.employer, w.company.ID,
		jobboard.NewWebhookEndpoint{URL: "https://hooks.example.com/in", EventTypes: types}, []byte("sealed-secret"))
	if err != nil {
		t.Fatalf("create endpoint: %v", err)
	}
	return e
}

// webhookRows counts the webhook events, deliveries and their outbox rows.
func webhookRows(t testing.TB, w world) (events, deliveries, outbox int) {
	t.Helper()
	return count(t, w.db, `SELECT count(*) FROM webhook_events`),
		count(t, w.db, `SELECT count(*) FROM webhook_deliveries`),
		count(t, w.db, `SELECT count(*) FROM outbox WHERE event_type = 'webhook.delivery_requested'`)
}

// A company without an enabled endpoint that wants an event gets no rows
// at all; one that has gets the event, a delivery per endpoint and an
// outbox row per delivery, written with the change and handed back by
// its unit of work for the relay.
func TestWebhookEventsAreWrittenWithTheChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)

	// No endpoint: nothing.
	if _, err := w.db.Apply(ctx, w.candidate, w.job.ID, jobboard.NewApplication{}); err != nil {
		t.Fatal(err)
	}
	if e, d, o := webhookRows(t, w); e+d+o != 0 {
		t.Fatalf("without endpoints: %d events, %d deliveries, %d outbox rows", e, d, o)
	}

	// An endpoint for other types, and a disabled one: nothing either.
	mustEndpoint(t, w, jobboard.WebhookJobClosed)
	off := false
	if _, err := w.db.CreateWebhookEndpoint(ctx, w.employer, w.company.ID, jobboard.NewWebhookEndpoint{
		URL: "https://off.example.com", EventTypes: []string{jobboard.WebhookApplicationSubmitted}, Enabled: &off}, []byte("s")); err != nil {
		t.Fatal(err)
	}
	other := mustUser(t, w.db, jobboard.RoleCandidate)
	if _, err := w.db.Apply(ctx, other, w.job.ID, jobboard.NewApplication{}); err != nil {
		t.Fatal(err)
	}
	if e, d, o := webhookRows(t, w); e+d+o != 0 {
		t.Fatalf("no wanting endpoint: %d events, %d deliveries, %d outbox rows", e, d, o)
	}

	// Two endpoints that want everything: one event, two deliveries.
	all := jobboard.WebhookEventTypes
	e1, e2 := mustEndpoint(t, w, all...), mustEndpoint(t, w, all...)
	third := mustUser(t, w.db, jobboard.RoleCandidate)
	app, noted, err := pgtest.Write(ctx, w.db.DB, func(st jobboard.Writes) (jobboard.Application, error) {
		return st.Apply(ctx, third, w.job.ID, jobboard.NewApplication{})
	})
	if err != nil {
		t.Fatal(err)
	}
	if e, d, o := webhookRows(t, w); e != 1 || d != 2 || o != 2 {
		t.Fatalf("apply: %d events, %d deliveries, %d outbox rows; want 1, 2, 2", e, d, o)
	}
	if len(noted) != 2 || noted[0].Type != jobboard.EventTypeWebhookDelivery || noted[0].Generation != 1 {
		t.Fatalf("noted %+v, want two delivery events of generation 1", noted)
	}
	var typ, status string
	var companyID, appID, candID int64
	if err := w.db.Pool.QueryRow(ctx, `SELECT type, company_id, application_id, candidate_id, new_status FROM webhook_events`).
		Scan(&typ, &companyID, &appID, &candID, &status); err != nil {
		t.Fatal(err)
	}
	if typ != jobboard.WebhookApplicationSubmitted || companyID != w.company.ID || appID != app.ID || candID != third.UserID || status != "submitted" {
		t.Errorf("event %s company %d application %d candidate %d status %s", typ, companyID, appID, candID, status)
	}
	endpoints := map[int64]bool{}
	for _, ev := range noted {
		var endpoint int64
		if err := w.db.Pool.QueryRow(ctx, `SELECT endpoint_id FROM webhook_deliveries WHERE id = $1`, ev.DeliveryID).Scan(&endpoint); err != nil {
			t.Fatal(err)
		}
		endpoints[endpoint] = true
	}
	if !endpoints[e1.ID] || !endpoints[e2.ID] {
		t.Errorf("deliveries to %v, want %d and %d", endpoints, e1.ID, e2.ID)
	}

	// A status change: its email row and a status_changed event; a
	// withdrawal: status_changed and withdrawn.
	_, changed, err := pgtest.Write(ctx, w.db.DB, func(st jobboard.Writes) (jobboard.Application, error) {
		return st.ChangeStatus(ctx, w.employer, app.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing})
	})
	if err != nil || len(changed) == 0 || changed[0].Type != jobboard.EventTypeStatusChanged {
		t.Fatalf("change status: %+v, %v", changed, err)
	}
	if n := len(changed[1:]); n != 2 || changed[1].Type != jobboard.EventTypeWebhookDelivery {
		t.Errorf("status change handed back %d deliveries (%+v), want 2 (one per endpoint)", n, changed[1:])
	}
	if _, err := w.db.ChangeStatus(ctx, third, app.ID, jobboard.StatusChange{Status: jobboard.StatusWithdrawn}); err != nil {
		t.Fatal(err)
	}
	rows, _ := w.db.Pool.Query(ctx, `SELECT type FROM webhook_events WHERE application_id = $1 ORDER BY occurred_at, type`, app.ID)
	var types []string
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		types = append(types, s)
	}
	want := []string{"application.submitted", "application.status_changed", "application.status_changed", "application.withdrawn"}
	if !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
	if n := count(t, w.db, `SELECT count(*) FROM outbox WHERE event_type = 'application.status_changed'`); n != 2 {
		t.Errorf("%d status emails in the outbox, want 2", n)
	}

	// Closing the job: job.closed for all three endpoints that want it;
	// a patch that does not close it: nothing more.
	closing := pgtest.MustWrite(t, w.db.DB, func(st jobboard.Writes) error {
		closed := jobboard.JobClosed
		_, err := st.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{Status: &closed})
		return err
	})
	if n := len(closing); n != 3 {
		t.Errorf("closing handed back %d events, want 3", n)
	}
	if _, err := w.db.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{Title: ptr("Renamed")}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, w.db, `SELECT count(*) FROM webhook_events WHERE type = 'job.closed'`); n != 1 {
		t.Errorf("%d job.closed events, want 1", n)
	}
}

// Two closes of an open job at once make one job.closed event: the status
// before the update is read under the row lock, so the second close waits
// for the first and then finds the job closed.
func TestConcurrentClosesMakeOneJobClosedEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	mustEndpoint(t, w, jobboard.WebhookJobClosed)
	// Hold the job's row, so that both closes are waiting for it when it
	// is let go.
	tx, err := w.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM jobs WHERE id = $1 FOR UPDATE`, w.job.ID); err != nil {
		t.Fatal(err)
	}
	closed := jobboard.JobClosed
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := w.db.UpdateJob(ctx, w.employer, w.job.ID, jobboard.JobPatch{Status: &closed})
			errs <- err
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for count(t, w.db, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the two closes never both waited for the row")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("close: %v", err)
		}
	}
	if n := count(t, w.db, `SELECT count(*) FROM webhook_events WHERE type = 'job.closed'`); n != 1 {
		t.Errorf("%d job.closed events after two closes at once, want 1", n)
	}
}

// A change that rolls back leaves no webhook rows: they are part of it.
func TestWebhookEventsRollBackWithTheChange(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	mustEndpoint(t, w, jobboard.WebhookEventTypes...)
	app, err := w.db.Apply(ctx, w.candidate, w.job.ID, jobboard.NewApplication{})
	if err != nil {
		t.Fatal(err)
	}
	// A stale If-Match fails the change after its lock: nothing is written.
	stale := app.Version + 5
	if _, err := w.db.ChangeStatus(ctx, w.employer, app.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing, IfVersion: &stale}); !errors.Is(err, jobboard.ErrPreconditionFailed) {
		t.Fatalf("stale change: %v", err)
	}
	// A keyed write rolled back takes its webhook rows along.
	_, err = w.db.Write(ctx, &jobboard.IdempotentRequest{Scope: "user:1", Key: "k-0123456789abcdef", Fingerprint: []byte("f")}, func(st jobboard.Writes) (*jobboard.StoredResponse, error) {
		_, err := st.ChangeStatus(ctx, w.employer, app.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing})
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if e, d, o := webhookRows(t, w); e != 1 || d != 1 || o != 1 {
		t.Errorf("%d events, %d deliveries, %d outbox rows; want only the application's 1, 1, 1", e, d, o)
	}
}

func TestWebhookEndpointsAreForMembersOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	e := mustEndpoint(t, w, jobboard.WebhookJobClosed)
	stranger := mustUser(t, w.db, jobboard.RoleEmployer)
	mustCompany(t, w.db, stranger)
	on := true
	calls := map[string]func(a jobboard.Actor, company, id int64) error{
		"create": func(a jobboard.Actor, company, _ int64) error {
			_, err := w.db.CreateWebhookEndpoint(ctx, a, company, jobboard.NewWebhookEndpoint{URL: "https://x.example.com", EventTypes: []string{"job.closed"}}, []byte("s"))
			return err
		},
		"list": func(a jobboard.Actor, company, _ int64) error {
			_, err := w.db.WebhookEndpoints(ctx, a, company)
			return err
		},
		"get": func(a jobboard.Actor, company, id int64) error {
			_, err := w.db.WebhookEndpoint(ctx, a, company, id)
			return err
		},
		"update": func(a jobboard.Actor, company, id int64) error {
			_, err := w.db.UpdateWebhookEndpoint(ctx, a, company, id, jobboard.WebhookEndpointPatch{Enabled: &on})
			return err
		},
		"rotate": func(a jobboard.Actor, company, id int64) error {
			_, err := w.db.RotateWebhookSecret(ctx, a, company, id, []byte("s2"), time.Hour)
			return err
		},
		"deliveries": func(a jobboard.Actor, company, id int64) error {
			_, err := w.db.WebhookDeliveries(ctx, a, company, id, jobboard.WebhookDeliveryFilter{})
			return err
		},
		"ping": func(a jobboard.Actor, company, id int64) error {
			_, err := w.db.PingWebhookEndpoint(ctx, a, company, id, jobboard.DefaultWebhookDispatchPolicy)
			return err
		},
		"replay": func(a jobboard.Actor, company, id int64) error {
			_, err := w.db.ReplayWebhookDelivery(ctx, a, company, id, 1, jobboard.DefaultWebhookDispatchPolicy)
			return err
		},
		"delete": func(a jobboard.Actor, company, id int64) error {
			return w.db.DeleteWebhookEndpoint(ctx, a, company, id)
		},
	}
	for name, call := range calls {
		// A stranger, the member through another company's id, an
		// unknown company: all 404.
		wantErr(t, call(stranger, w.company.ID, e.ID), jobboard.ErrNotFound)
		wantErr(t, call(w.employer, w.company.ID+1000, e.ID), jobboard.ErrNotFound)
		if name != "create" && name != "list" {
			wantErr(t, call(w.employer, w.company.ID, e.ID+1000), jobboard.ErrNotFound)
		}
	}
	if n := count(t, w.db, `SELECT count(*) FROM webhook_endpoints`); n != 1 {
		t.Errorf("%d endpoints after the strangers' attempts, want 1", n)
	}
	got, err := w.db.WebhookEndpoint(ctx, w.employer, w.company.ID, e.ID)
	if err != nil || got.URL != e.URL || got.CompanyID != w.company.ID {
		t.Fatalf("member reads %+v, %v", got, err)
	}
}

func TestWebhookEndpointLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	e := mustEndpoint(t, w, jobboard.WebhookJobClosed)
	if !e.Enabled || e.DisabledReason != "" || e.PreviousSecretExpiresAt != nil {
		t.Fatalf("new endpoint %+v", e)
	}
	off, on := false, true
	got, err := w.db.UpdateWebhookEndpoint(ctx, w.employer, w.company.ID, e.ID, jobboard.WebhookEndpointPatch{Enabled: &off, URL: ptr("https://new.example.com/x")})
	if err != nil || got.Enabled || got.DisabledReason != jobboard.DisabledByMember || got.DisabledAt == nil || got.URL != "https://new.example.com/x" {
		t.Fatalf("disable: %+v, %v", got, err)
	}
	if _, err := w.db.PingWebhookEndpoint(ctx, w.employer, w.company.ID, e.ID, jobboard.DefaultWebhookDispatchPolicy); !errors.Is(err, jobboard.ErrWebhookEndpointDisabled) {
		t.Errorf("ping a disabled endpoint: %v", err)
	}
	if _, err := w.db.Pool.Exec(ctx, `UPDATE webhook_endpoints SET failing_since = now() WHERE id = $1`, e.ID); err != nil {
		t.Fatal(err)
	}
	got, err = w.db.UpdateWebhookEndpoint(ctx, w.employer, w.company.ID, e.ID, jobboard.WebhookEndpointPatch{Enabled: &on})
	if err != nil || !got.Enabled || got.DisabledReason != "" || got.DisabledAt != nil || got.FailingSince != nil {
		t.Fatalf("enable: %+v, %v", got, err)
	}

	rotated, err := w.db.RotateWebhookSecret(ctx, w.employer, w.company.ID, e.ID, []byte("second"), time.Hour)
	if err != nil || rotated.PreviousSecretExpiresAt == nil || time.Until(*rotated.PreviousSecretExpiresAt) < 59*time.Minute {
		t.Fatalf("rotate with overlap: %+v, %v", rotated, err)
	}
	var secret, previous []byte
	_ = w.db.Pool.QueryRow(ctx, `SELECT secret, previous_secret FROM webhook_endpoints WHERE id = $1`, e.ID).Scan(&secret, &previous)
	if string(secret) != "second" || string(previous) != "sealed-secret" {
		t.Errorf("secrets %q, %q", secret, previous)
	}
	rotated, err = w.db.RotateWebhookSecret(ctx, w.employer, w.company.ID, e.ID, []byte("third"), 0)
	if err != nil || rotated.PreviousSecretExpiresAt != nil {
		t.Fatalf("rotate without overlap: %+v, %v", rotated, err)
	}

	for range jobboard.MaxWebhookEndpoints - 1 {
		mustEndpoint(t, w, jobboard.WebhookJobClosed)
	}
	_, err = w.db.CreateWebhookEndpoint(ctx, w.employer, w.company.ID, jobboard.NewWebhookEndpoint{URL: "https://x.example.com", EventTypes: []string{"job.closed"}}, []byte("s"))
	wantErr(t, err, jobboard.ErrTooManyWebhookEndpoints)
	list, err := w.db.WebhookEndpoints(ctx, w.employer, w.company.ID)
	if err != nil || len(list) != jobboard.MaxWebhookEndpoints || list[0].ID != e.ID {
		t.Fatalf("list: %d endpoints, %v", len(list), err)
	}
	if err := w.db.DeleteWebhookEndpoint(ctx, w.employer, w.company.ID, e.ID); err != nil {
		t.Fatal(err)
	}
	wantErr(t, w.db.DeleteWebhookEndpoint(ctx, w.employer, w.company.ID, e.ID), jobboard.ErrNotFound)
}

// deliverer is the store as the delivery function sees it: its sessions
// run as the role jobboard_webhooks.
func deliverer(t testing.TB, w world) *pgtest.DB {
	t.Helper()
	return pgtest.Open(t, pgtest.RoleURL(t, w.db.URL, pgtest.WebhookRole))
}

// pingEndpoint pings the endpoint and returns the delivery event that the
// ping committed.
func pingEndpoint(t testing.TB, w world, endpointID int64) jobboard.Event {
	t.Helper()
	evs := pgtest.MustWrite(t, w.db.DB, func(st jobboard.Writes) error {
		_, err := st.PingWebhookEndpoint(context.Background(), w.employer, w.company.ID, endpointID, jobboard.DefaultWebhookDispatchPolicy)
		return err
	})
	if len(evs) != 1 {
		t.Fatalf("ping handed back %d events", len(evs))
	}
	return evs[0]
}

// closeJobDelivery posts a job and closes it: a job.closed delivery to
// each endpoint that wants it, of which it returns the first's event (a
// second ping while one is pending would be that one, so tests that need
// two pending deliveries make the second this way).
func closeJobDelivery(t testing.TB, w world) jobboard.Event {
	t.Helper()
	ctx := context.Background()
	closed := jobboard.JobClosed
	for _, ev := range pgtest.MustWrite(t, w.db.DB, func(st jobboard.Writes) error {
		j, err := st.CreateJob(ctx, w.employer, w.company.ID, newJob("Closing"))
		if err != nil {
			return err
		}
		_, err = st.UpdateJob(ctx, w.employer, j.ID, jobboard.JobPatch{Status: &closed})
		return err
	}) {
		if ev.Type == jobboard.EventTypeWebhookDelivery {
			return ev
		}
	}
	t.Fatal("closing a job dispatched no delivery")
	return jobboard.Event{}
}

func TestWebhookAttemptsAsTheDeliveryRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	d := deliverer(t, w)
	e := mustEndpoint(t, w, jobboard.WebhookEventTypes...)
	ev := pingEndpoint(t, w, e.ID)

	target, err := d.BeginWebhookAttempt(ctx, ev.DeliveryID, ev.Generation, time.Minute)
	if err != nil || target.Outcome != "" || target.Token == "" {
		t.Fatalf("begin: %+v, %v", target, err)
	}
	if target.URL != e.URL || string(target.Secret) != "sealed-secret" || target.PreviousSecret != nil ||
		target.Event.Type != jobboard.WebhookPing || target.Event.EndpointID != e.ID || target.Trigger != "ping" || target.CompanyID != w.company.ID {
		t.Errorf("target %+v", target)
	}
	// A second copy of the message meets the lease.
	busy, err := d.BeginWebhookAttempt(ctx, ev.DeliveryID, ev.Generation, time.Minute)
	if err != nil || busy.Outcome != jobboard.TargetBusy || busy.BusyFor < 50*time.Second {
		t.Fatalf("second begin: %+v, %v", busy, err)
	}

	// A failed attempt: pending, with its next attempt; the endpoint's
	// failure record starts.
	code := 503
	next := time.Now().Add(time.Minute).Truncate(time.Microsecond)
	out, err := d.FinishWebhookAttempt(ctx, jobboard.WebhookAttemptRecord{
		DeliveryID: ev.DeliveryID, Generation: ev.Generation, Token: target.Token, Trigger: target.Trigger, EndpointID: e.ID,
		Attempt: jobboard.WebhookAttempt{AttemptedAt: time.Now(), StatusCode: &code, LatencyMS: 12, ResponseBody: "busy", ResponseTruncated: true},
		State:   jobboard.DeliveryPending, NextAttemptAt: &next, DisableAfter: jobboard.WebhookDisableAfter,
	})
	if err != nil || out.LeaseLost || out.Disabled {
		t.Fatalf("finish failed attempt: %+v, %v", out, err)
	}
	got, _ := w.db.WebhookEndpoint(ctx, w.employer, w.company.ID, e.ID)
	if got.FailingSince == nil || !got.Enabled {
		t.Errorf("after a failure: %+v", got)
	}

	// The next attempt succeeds: delivered, the failure record cleared.
	target, err = d.BeginWebhookAttempt(ctx, ev.DeliveryID, ev.Generation, time.Minute)
	if err != nil || target.Outcome != "" || target.Attempts != 1 {
		t.Fatalf("begin again: %+v, %v", target, err)
	}
	ok := 204
	out, err = d.FinishWebhookAttempt(ctx, jobboard.WebhookAttemptRecord{
		DeliveryID: ev.DeliveryID, Generation: ev.Generation, Token: target.Token, Trigger: target.Trigger, EndpointID: e.ID,
		Attempt: jobboard.WebhookAttempt{AttemptedAt: time.Now(), StatusCode: &ok, LatencyMS: 3}, State: jobboard.DeliveryDelivered,
	})
	if err != nil || out.LeaseLost {
		t.Fatalf("finish delivered: %+v, %v", out, err)
	}
	got, _ = w.db.WebhookEndpoint(ctx, w.employer, w.company.ID, e.ID)
	if got.FailingSince != nil {
		t.Errorf("after a success: failing since %v", got.FailingSince)
	}
	// A duplicate message finds it done.
	again, err := d.BeginWebhookAttempt(ctx, ev.DeliveryID, ev.Generation, time.Minute)
	if err != nil || again.Outcome != jobboard.TargetDone {
		t.Fatalf("begin after delivery: %+v, %v", again, err)
	}

	// The log shows both attempts, newest first, and the payload.
	page, err := w.db.WebhookDeliveries(ctx, w.employer, w.company.ID, e.ID, jobboard.WebhookDeliveryFilter{})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("log: %+v, %v", page, err)
	}
	entry := page.Items[0]
	if entry.State != jobboard.DeliveryDelivered || entry.Attempts != 2 || entry.DeliveredAt == nil || entry.NextAttemptAt != nil ||
		len(entry.AttemptLog) != 2 || *entry.AttemptLog[0].StatusCode != 204 || *entry.AttemptLog[1].StatusCode != 503 ||
		entry.AttemptLog[1].ResponseBody != "busy" || !entry.AttemptLog[1].ResponseTruncated || entry.AttemptLog[1].Trigger != "ping" {
		t.Errorf("log entry %+v", entry)
	}
	var payload map[string]any
	if err := json.Unmarshal(entry.Payload, &payload); err != nil || payload["type"] != jobboard.WebhookPing {
		t.Errorf("payload %s: %v", entry.Payload, err)
	}

	// A replay is a new dispatch of the same event: the message of the
	// first finds it stale, the new one leases it.
	replayed, re, err := pgtest.Write(ctx, w.db.DB, func(st jobboard.Writes) (jobboard.WebhookDelivery, error) {
		return st.ReplayWebhookDelivery(ctx, w.employer, w.company.ID, e.ID, ev.DeliveryID, jobboard.DefaultWebhookDispatchPolicy)
	})
	if err != nil || replayed.State != jobboard.DeliveryPending || replayed.EventID != entry.EventID || replayed.Attempts != 0 {
		t.Fatalf("replay: %+v, %v", replayed, err)
	}
	if len(re) != 1 || re[0].Generation != 2 || re[0].DeliveryID != ev.DeliveryID || re[0].EventID == ev.EventID {
		t.Fatalf("replay handed back %+v", re)
	}
	if old, err := d.BeginWebhookAttempt(ctx, ev.DeliveryID, ev.Generation, time.Minute); err != nil || old.Outcome != jobboard.TargetStale {
		t.Errorf("the first dispatch's message: %+v, %v", old, err)
	}
	if cur, err := d.BeginWebhookAttempt(ctx, re[0].DeliveryID, re[0].Generation, time.Minute); err != nil || cur.Outcome != "" || cur.Trigger != "replay" {
		t.Errorf("the replay's message: %+v, %v", cur, err)
	}
	// The filter keeps a state.
	if p, _ := w.db.WebhookDeliveries(ctx, w.employer, w.company.ID, e.ID, jobboard.WebhookDeliveryFilter{State: jobboard.DeliveryDelivered}); len(p.Items) != 0 {
		t.Errorf("delivered filter: %d entries", len(p.Items))
	}
}

// 410 disables the endpoint at once; failing for longer than DisableAfter
// too; each queues one email per member of the company, once.
func TestWebhookEndpointIsDisabled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		gone   bool
		reason string
	}{{"gone", true, jobboard.DisabledGone}, {"failing", false, jobboard.DisabledFailing}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t)
			colleague := mustUser(t, w.db, jobboard.RoleEmployer)
			if _, err := w.db.Pool.Exec(ctx, `INSERT INTO company_members (company_id, user_id) VALUES ($1, $2)`, w.company.ID, colleague.UserID); err != nil {
				t.Fatal(err)
			}
			d := deliverer(t, w)
			e := mustEndpoint(t, w, jobboard.WebhookEventTypes...)
			if !c.gone {
				// Failing for four days already.
				if _, err := w.db.Pool.Exec(ctx, `UPDATE webhook_endpoints SET failing_since = now() - interval '4 days' WHERE id = $1`, e.ID); err != nil {
					t.Fatal(err)
				}
			}
			ev := pingEndpoint(t, w, e.ID)
			second := closeJobDelivery(t, w)
			target, err := d.BeginWebhookAttempt(ctx, ev.DeliveryID, ev.Generation, time.Minute)
			if err != nil || target.Outcome != "" {
				t.Fatalf("begin: %+v, %v", target, err)
			}
			code := 500
			state, reason := jobboard.DeliveryPending, ""
			if c.gone {
				code, state, reason = 410, jobboard.DeliveryFailed, jobboard.FailureGone
			}
			rec := jobboard.WebhookAttemptRecord{
				DeliveryID: ev.DeliveryID, Generation: ev.Generation, Token: target.Token, Trigger: target.Trigger, EndpointID: e.ID,
				Attempt: jobboard.WebhookAttempt{AttemptedAt: time.Now(), StatusCode: &code}, State: state, FailureReason: reason,
				Gone: c.gone, DisableAfter: jobboard.WebhookDisableAfter,
			}
			out, err := d.FinishWebhookAttempt(ctx, rec)
			if err != nil || !out.Disabled || out.DisabledReason != c.reason {
				t.Fatalf("finish: %+v, %v", out, err)
			}
			got, _ := w.db.WebhookEndpoint(ctx, w.employer, w.company.ID, e.ID)
			if got.Enabled || got.DisabledReason != c.reason || got.DisabledAt == nil {
				t.Errorf("endpoint %+v", got)
			}
			// The same statement again (a retry after a lost answer) queues
			// no second email.
			if _, err := d.FinishWebhookAttempt(ctx, rec); err != nil {
				t.Fatal(err)
			}
			rows, _ := w.db.Pool.Query(ctx, `SELECT payload FROM outbox WHERE event_type = 'webhook.endpoint_disabled'`)
			var users []int64
			for rows.Next() {
				var p []byte
				_ = rows.Scan(&p)
				n, err := jobboard.DecodeEvent(p)
				if err != nil || n.EndpointID != e.ID || n.CompanyID != w.company.ID || n.Reason != c.reason {
					t.Errorf("notice %s: %v", p, err)
				}
				users = append(users, n.UserID)
			}
			slices.Sort(users)
			if want := []int64{w.employer.UserID, colleague.UserID}; !slices.Equal(users, want) {
				t.Errorf("notices to %v, want %v", users, want)
			}
			// The other delivery meets the disabled endpoint and fails.
			other, err := d.BeginWebhookAttempt(ctx, second.DeliveryID, second.Generation, time.Minute)
			if err != nil || other.Outcome != jobboard.TargetDisabled {
				t.Fatalf("begin on a disabled endpoint: %+v, %v", other, err)
			}
			var st, fr string
			_ = w.db.Pool.QueryRow(ctx, `SELECT state, failure_reason FROM webhook_deliveries WHERE id = $1`, second.DeliveryID).Scan(&st, &fr)
			if st != jobboard.DeliveryFailed || fr != jobboard.FailureEndpointDisabled {
				t.Errorf("the other delivery: %s %s", st, fr)
			}
			_, err = w.db.ReplayWebhookDelivery(ctx, w.employer, w.company.ID, e.ID, second.DeliveryID, jobboard.DefaultWebhookDispatchPolicy)
			wantErr(t, err, jobboard.ErrWebhookEndpointDisabled)
		})
	}
}

// The delivery role reads and writes only what the delivery function
// needs: nothing about users, applications, jobs or companies, no claims,
// no descriptions of endpoints, and it cannot change a URL or a secret.
func TestWebhookRoleIsNarrow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	d := deliverer(t, w)
	mustEndpoint(t, w, jobboard.WebhookJobClosed)
	denied := []string{
		`SELECT email FROM users`,
		`SELECT password_hash FROM users`,
		`SELECT cover_letter FROM applications`,
		`SELECT title FROM jobs`,
		`SELECT name FROM companies`,
		`SELECT event_id FROM processed_events`,
		`SELECT payload FROM outbox`,
		`SELECT description FROM webhook_endpoints`,
		`SELECT * FROM webhook_attempts`,
		`SELECT key FROM idempotency_keys`,
		`UPDATE webhook_endpoints SET url = 'https://evil.example.com'`,
		`UPDATE webhook_endpoints SET secret = 'x'`,
		`DELETE FROM webhook_deliveries`,
		`DELETE FROM outbox`,
		`UPDATE outbox SET published_at = now()`,
		`INSERT INTO company_members (company_id, user_id) VALUES (1, 1)`,
	}
	for _, sql := range denied {
		_, err := d.Pool.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
			t.Errorf("%s as the delivery role: %v, want insufficient_privilege", sql, err)
		}
	}
}

func TestWebhookBacklogAndRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	e := mustEndpoint(t, w, jobboard.WebhookEventTypes...)
	pingEndpoint(t, w, e.ID)
	closeJobDelivery(t, w)
	if _, err := w.db.Pool.Exec(ctx, `UPDATE webhook_deliveries SET dispatched_at = now() - interval '90 seconds'
		WHERE id = (SELECT min(id) FROM webhook_deliveries)`); err != nil {
		t.Fatal(err)
	}
	b, err := w.db.WebhookBacklog(ctx)
	if err != nil || b.Pending != 2 || b.OldestUnattempted < 89*time.Second || b.DisabledEndpoints != 0 {
		t.Fatalf("backlog %+v, %v", b, err)
	}
	if _, err := w.db.Pool.Exec(ctx, `UPDATE webhook_events SET occurred_at = now() - interval '40 days'
		WHERE id = (SELECT event_id FROM webhook_deliveries ORDER BY id LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	n, err := w.db.DeleteExpired(ctx, jobboard.DefaultRetention, 1)
	if err != nil || n["webhook_events"] != 1 {
		t.Fatalf("retention deleted %v, %v; want 1 webhook event", n, err)
	}
	if left := count(t, w.db, `SELECT count(*) FROM webhook_deliveries`); left != 1 {
		t.Errorf("%d deliveries left, want 1", left)
	}
}

// webhookState is a digest of every webhook row a member's request could
// write: endpoints (their secrets too), deliveries, events and their
// outbox rows.
func webhookState(t testing.TB, w world) string {
	t.Helper()
	var s string
	err := w.db.Pool.QueryRow(context.Background(), `SELECT concat_ws('|',
		(SELECT string_agg(concat_ws(',', id, url, description, event_types, enabled, md5(secret), md5(previous_secret), updated_at), ';' ORDER BY id) FROM webhook_endpoints),
		(SELECT string_agg(concat_ws(',', id, generation, state, attempts, dispatched_at), ';' ORDER BY id) FROM webhook_deliveries),
		(SELECT count(*) FROM webhook_events),
		(SELECT count(*) FROM outbox WHERE event_type = 'webhook.delivery_requested'))`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Every webhook method of a member refuses a session issued before the
// account's last password reset, in its own statement, and writes
// nothing; the same member with the session of the new password is
// served.
func TestWebhookStoreRefusesEndedSessions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	e := mustEndpoint(t, w, jobboard.WebhookJobClosed)
	ping := pingEndpoint(t, w, e.ID)
	if _, err := w.db.Pool.Exec(ctx, `UPDATE users SET password_changed_at = now() WHERE id = $1`, w.employer.UserID); err != nil {
		t.Fatal(err)
	}
	off := false
	calls := []struct {
		name string
		call func(a jobboard.Actor) error
	}{
		{"create", func(a jobboard.Actor) error {
			_, err := w.db.CreateWebhookEndpoint(ctx, a, w.company.ID, jobboard.NewWebhookEndpoint{URL: "https://x.example.com", EventTypes: []string{"job.closed"}}, []byte("s"))
			return err
		}},
		{"list", func(a jobboard.Actor) error { _, err := w.db.WebhookEndpoints(ctx, a, w.company.ID); return err }},
		{"get", func(a jobboard.Actor) error { _, err := w.db.WebhookEndpoint(ctx, a, w.company.ID, e.ID); return err }},
		{"deliveries", func(a jobboard.Actor) error {
			_, err := w.db.WebhookDeliveries(ctx, a, w.company.ID, e.ID, jobboard.WebhookDeliveryFilter{})
			return err
		}},
		{"deliveries of a state with none", func(a jobboard.Actor) error {
			_, err := w.db.WebhookDeliveries(ctx, a, w.company.ID, e.ID, jobboard.WebhookDeliveryFilter{State: jobboard.DeliveryDelivered})
			return err
		}},
		{"ping", func(a jobboard.Actor) error {
			_, err := w.db.PingWebhookEndpoint(ctx, a, w.company.ID, e.ID, jobboard.DefaultWebhookDispatchPolicy)
			return err
		}},
		{"replay", func(a jobboard.Actor) error {
			_, err := w.db.ReplayWebhookDelivery(ctx, a, w.company.ID, e.ID, ping.DeliveryID, jobboard.DefaultWebhookDispatchPolicy)
			return err
		}},
		{"rotate", func(a jobboard.Actor) error {
			_, err := w.db.RotateWebhookSecret(ctx, a, w.company.ID, e.ID, []byte("s2"), time.Hour)
			return err
		}},
		{"update", func(a jobboard.Actor) error {
			_, err := w.db.UpdateWebhookEndpoint(ctx, a, w.company.ID, e.ID, jobboard.WebhookEndpointPatch{Enabled: &off})
			return err
		}},
		{"delete", func(a jobboard.Actor) error { return w.db.DeleteWebhookEndpoint(ctx, a, w.company.ID, e.ID) }},
	}
	before := webhookState(t, w)
	for _, c := range calls {
		if err := c.call(w.employer); !errors.Is(err, jobboard.ErrSessionRevoked) {
			t.Errorf("%s with an ended session: %v, want ErrSessionRevoked", c.name, err)
		}
	}
	if after := webhookState(t, w); after != before {
		t.Fatalf("ended sessions changed webhook rows:\n%s\n→ %s", before, after)
	}

	u, err := w.db.UserByID(ctx, w.employer.UserID)
	if err != nil {
		t.Fatal(err)
	}
	fresh := w.employer
	fresh.PasswordChangedAt = u.PasswordChangedAt
	for _, c := range calls {
		if err := c.call(fresh); err != nil {
			t.Errorf("%s with the new session: %v", c.name, err)
		}
	}
}

// beginAs begins an attempt of ev's delivery as the delivery role, failing
// t on a database error.
func beginAs(t testing.TB, d *pgtest.DB, ev jobboard.Event, lease time.Duration) jobboard.WebhookTarget {
	t.Helper()
	target, err := d.BeginWebhookAttempt(context.Background(), ev.DeliveryID, ev.Generation, lease)
	if err != nil {
		t.Fatalf("begin delivery %d: %v", ev.DeliveryID, err)
	}
	return target
}

// finishAs records a delivered attempt of target that took latency.
func finishAs(t testing.TB, d *pgtest.DB, target jobboard.WebhookTarget, slow bool) {
	t.Helper()
	ok := 204
	if _, err := d.FinishWebhookAttempt(context.Background(), jobboard.WebhookAttemptRecord{
		DeliveryID: target.DeliveryID, Generation: target.Generation, Token: target.Token, Trigger: target.Trigger,
		EndpointID: target.EndpointID, State: jobboard.DeliveryDelivered, Slow: slow,
		Attempt: jobboard.WebhookAttempt{AttemptedAt: time.Now(), StatusCode: &ok},
	}); err != nil {
		t.Fatalf("finish delivery %d: %v", target.DeliveryID, err)
	}
}

// A company has at most jobboard.WebhookSlowSlots attempts to slow
// endpoints in flight: a further one is put off (TargetDeferred), leasing
// nothing, while another company's go ahead. Recording an attempt frees
// its slot, and so does the end of its lease (a function that died
// mid-attempt). A new endpoint is slow until an attempt is fast; a fast
// one is not bounded; a new URL is slow again (issue 29.4).
func TestSlowEndpointsHoldTheirCompanysSlotsOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	d := deliverer(t, w)
	if jobboard.WebhookSlowSlots != 1 {
		t.Fatalf("the test is written for one slot, not %d", jobboard.WebhookSlowSlots)
	}
	e := mustEndpoint(t, w, "job.closed")
	other := w
	other.company = mustCompany(t, w.db, w.employer)
	mustEndpoint(t, other, "job.closed")

	first, second, third := closeJobDelivery(t, w), closeJobDelivery(t, w), closeJobDelivery(t, w)
	held := beginAs(t, d, first, time.Minute)
	if held.Outcome != "" {
		t.Fatalf("the first attempt of a new endpoint: %q, want it leased", held.Outcome)
	}
	if got := beginAs(t, d, second, time.Minute); got.Outcome != jobboard.TargetDeferred || got.Token != "" {
		t.Fatalf("a second attempt to the company's slow endpoint: %+v, want %q", got, jobboard.TargetDeferred)
	}
	if got := beginAs(t, d, closeJobDelivery(t, other), time.Minute); got.Outcome != "" {
		t.Errorf("another company's attempt while the slot is held: %q, want it leased", got.Outcome)
	}

	// Recorded slow: the slot is free, the endpoint still slow.
	finishAs(t, d, held, true)
	held = beginAs(t, d, second, 0) // a lease that has ended by the next statement
	if held.Outcome != "" {
		t.Fatalf("after the attempt was recorded: %q, want it leased", held.Outcome)
	}
	if got := beginAs(t, d, third, time.Minute); got.Outcome != "" {
		t.Fatalf("after the holder's lease ended: %q, want it leased", got.Outcome)
	} else {
		// Fast: the endpoint is no longer bounded.
		finishAs(t, d, got, false)
	}
	fourth, fifth := closeJobDelivery(t, w), closeJobDelivery(t, w)
	for _, ev := range []jobboard.Event{fourth, fifth} {
		if got := beginAs(t, d, ev, time.Minute); got.Outcome != "" {
			t.Errorf("an attempt to a fast endpoint: %q, want it leased", got.Outcome)
		}
	}

	// A new URL is slow again.
	u := "https://hooks.example.com/moved"
	if _, err := w.db.UpdateWebhookEndpoint(ctx, w.employer, w.company.ID, e.ID, jobboard.WebhookEndpointPatch{URL: &u}); err != nil {
		t.Fatal(err)
	}
	sixth, seventh := closeJobDelivery(t, w), closeJobDelivery(t, w)
	if got := beginAs(t, d, sixth, time.Minute); got.Outcome != "" {
		t.Fatalf("the first attempt to the new URL: %q", got.Outcome)
	}
	if got := beginAs(t, d, seventh, time.Minute); got.Outcome != jobboard.TargetDeferred {
		t.Errorf("a second attempt to the new URL: %q, want %q", got.Outcome, jobboard.TargetDeferred)
	}
}
