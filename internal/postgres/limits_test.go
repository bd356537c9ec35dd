package postgres_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// A ping while one of the endpoint is pending is that one: no event, no
// delivery, no outbox row, nothing counted. Once it is no longer pending,
// the next ping is a new one.
func TestAPingWhileOneIsPendingIsThatOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	e := mustEndpoint(t, w, jobboard.WebhookJobClosed)
	ev := pingEndpoint(t, w, e.ID)
	_, evs, err := pgtest.Write(ctx, w.db.DB, func(st jobboard.Writes) (jobboard.WebhookDelivery, error) {
		return st.PingWebhookEndpoint(ctx, w.employer, w.company.ID, e.ID, jobboard.DefaultWebhookDispatchPolicy)
	})
	if err != nil || len(evs) != 0 {
		t.Fatalf("second ping: %d events, %v; want the first's delivery and none", len(evs), err)
	}
	again, err := w.db.PingWebhookEndpoint(ctx, w.employer, w.company.ID, e.ID, jobboard.DefaultWebhookDispatchPolicy)
	if err != nil || again.ID != ev.DeliveryID || again.State != jobboard.DeliveryPending {
		t.Fatalf("second ping: %+v, %v; want delivery %d", again, err, ev.DeliveryID)
	}
	if events, deliveries, outbox := webhookRows(t, w); events != 1 || deliveries != 1 || outbox != 1 {
		t.Fatalf("after two pings: %d events, %d deliveries, %d outbox rows; want 1 each", events, deliveries, outbox)
	}
	if n := count(t, w.db, `SELECT count(*) FROM webhook_dispatches`); n != 1 {
		t.Errorf("%d dispatches counted, want 1", n)
	}
	// Another company's member gets nothing of it.
	other := mustUser(t, w.db, jobboard.RoleEmployer)
	theirs := mustCompany(t, w.db, other)
	_, err = w.db.PingWebhookEndpoint(ctx, other, theirs.ID, e.ID, jobboard.DefaultWebhookDispatchPolicy)
	wantErr(t, err, jobboard.ErrNotFound)

	if _, err := w.db.Pool.Exec(ctx, `UPDATE webhook_deliveries SET state = 'delivered', delivered_at = now() WHERE id = $1`, ev.DeliveryID); err != nil {
		t.Fatal(err)
	}
	if next := pingEndpoint(t, w, e.ID); next.DeliveryID == ev.DeliveryID {
		t.Fatalf("a ping after the first was delivered is the first (%d)", next.DeliveryID)
	}
}

// Pings and replays count together against the endpoint's bound and the
// company's; a refused one dispatches nothing and says how long to wait
// (until the oldest counted leaves the window), which bound refused it,
// and is refused after the target's own refusals (404, disabled). Once
// the window has passed, dispatches are accepted again.
func TestWebhookDispatchBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	p := jobboard.WebhookDispatchPolicy{Window: time.Hour, PerEndpoint: 3, PerCompany: 4}
	e, f := mustEndpoint(t, w, jobboard.WebhookJobClosed), mustEndpoint(t, w, jobboard.WebhookJobClosed)
	ping, err := w.db.PingWebhookEndpoint(ctx, w.employer, w.company.ID, e.ID, p)
	if err != nil {
		t.Fatal(err)
	}
	for range p.PerEndpoint - 1 {
		if _, err := w.db.ReplayWebhookDelivery(ctx, w.employer, w.company.ID, e.ID, ping.ID, p); err != nil {
			t.Fatal(err)
		}
	}
	before := webhookState(t, w)
	_, err = w.db.ReplayWebhookDelivery(ctx, w.employer, w.company.ID, e.ID, ping.ID, p)
	var throttled *jobboard.WebhookDispatchThrottledError
	if !errors.As(err, &throttled) || throttled.Bound != "endpoint" || throttled.RetryAfter <= 59*time.Minute || throttled.RetryAfter > time.Hour {
		t.Fatalf("replay over the endpoint's bound: %v; want refused for the endpoint, for about an hour", err)
	}
	_, err = w.db.ReplayWebhookDelivery(ctx, w.employer, w.company.ID, e.ID, ping.ID+1000, p)
	wantErr(t, err, jobboard.ErrNotFound)
	if after := webhookState(t, w); after != before {
		t.Fatalf("refused dispatches wrote:\n%s\n→ %s", before, after)
	}

	// The other endpoint has the company's last one.
	if _, err := w.db.PingWebhookEndpoint(ctx, w.employer, w.company.ID, f.ID, p); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Pool.Exec(ctx, `UPDATE webhook_deliveries SET state = 'delivered' WHERE endpoint_id = $1`, f.ID); err != nil {
		t.Fatal(err)
	}
	_, err = w.db.PingWebhookEndpoint(ctx, w.employer, w.company.ID, f.ID, p)
	if !errors.As(err, &throttled) || throttled.Bound != "company" {
		t.Fatalf("ping over the company's bound: %v; want refused for the company", err)
	}

	// An hour later, the window holds none of them.
	if _, err := w.db.Pool.Exec(ctx, `UPDATE webhook_dispatches SET dispatched_at = dispatched_at - interval '1 hour'`); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.PingWebhookEndpoint(ctx, w.employer, w.company.ID, f.ID, p); err != nil {
		t.Fatalf("ping after the window: %v", err)
	}
	n, err := w.db.DeleteExpired(ctx, jobboard.DefaultRetention, 100)
	if err != nil || n["webhook_dispatches"] != int64(p.PerCompany) {
		t.Fatalf("retention deleted %v, %v; want the %d dispatches past the window", n, err, p.PerCompany)
	}
}

// Concurrent dispatches of one company are counted one after the other
// (the company's row lock): exactly the bound is accepted.
func TestWebhookDispatchBoundsHoldUnderConcurrency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t)
	p := jobboard.WebhookDispatchPolicy{Window: time.Hour, PerEndpoint: 100, PerCompany: 3}
	e := mustEndpoint(t, w, jobboard.WebhookJobClosed)
	ping := pingEndpoint(t, w, e.ID)
	const tries = 8
	var (
		wg                  sync.WaitGroup
		mu                  sync.Mutex
		accepted, throttled int
	)
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := w.db.ReplayWebhookDelivery(ctx, w.employer, w.company.ID, e.ID, ping.DeliveryID, p)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				accepted++
			case errors.Is(err, jobboard.ErrTooManyWebhookDispatches):
				throttled++
			default:
				t.Errorf("replay: %v", err)
			}
		}()
	}
	wg.Wait()
	// The ping counted once already.
	if accepted != p.PerCompany-1 || throttled != tries-accepted {
		t.Fatalf("%d replays accepted, %d refused; want %d and %d", accepted, throttled, p.PerCompany-1, tries-p.PerCompany+1)
	}
}

// An employer creates at most jobboard.MaxCompaniesPerEmployer companies,
// counted one creation after the other.
func TestCompaniesPerEmployer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := pgtest.NewDB(t)
	employer := mustUser(t, db, jobboard.RoleEmployer)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
	)
	for range jobboard.MaxCompaniesPerEmployer + 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := db.CreateCompany(ctx, employer, jobboard.NewCompany{Name: "Acme"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case !errors.Is(err, jobboard.ErrTooManyCompanies):
				t.Errorf("create company: %v", err)
			}
		}()
	}
	wg.Wait()
	if created != jobboard.MaxCompaniesPerEmployer {
		t.Fatalf("%d companies created, want %d", created, jobboard.MaxCompaniesPerEmployer)
	}
	_, err := db.CreateCompany(ctx, employer, jobboard.NewCompany{Name: "Acme"})
	wantErr(t, err, jobboard.ErrTooManyCompanies)
}
