package httpapi_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// committedRelay records each event it is handed, and whether its outbox
// row was committed then (read on a connection of its own).
type committedRelay struct {
	pool        *pgxpool.Pool
	mu          sync.Mutex
	relayed     []jobboard.Event
	uncommitted []string
}

func (c *committedRelay) Relay(ctx context.Context, ev jobboard.Event) error {
	var n int
	err := c.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE event_id = $1::uuid`, ev.EventID).Scan(&n)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.relayed = append(c.relayed, ev)
	if err != nil || n != 1 {
		c.uncommitted = append(c.uncommitted, fmt.Sprintf("%s %s (%v)", ev.Type, ev.EventID, err))
	}
	return nil
}

// since returns the events relayed after the first n, and those relayed
// before their row was committed.
func (c *committedRelay) since(n int) (relayed []jobboard.Event, uncommitted []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]jobboard.Event(nil), c.relayed[n:]...), append([]string(nil), c.uncommitted...)
}

func (c *committedRelay) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.relayed)
}

// wrappedStore hands each unit's Writes through wrap first.
type wrappedStore struct {
	jobboard.WriteStore
	wrap func(jobboard.Writes) jobboard.Writes
}

func (s wrappedStore) Write(ctx context.Context, key *jobboard.IdempotentRequest, fn func(jobboard.Writes) (*jobboard.StoredResponse, error)) ([]jobboard.Event, error) {
	return s.WriteStore.Write(ctx, key, func(st jobboard.Writes) (*jobboard.StoredResponse, error) { return fn(s.wrap(st)) })
}

// wrapWrites makes the server's store hand each unit's Writes through wrap
// first: how a test injects a failure or a pause into a write.
func wrapWrites(wrap func(jobboard.Writes) jobboard.Writes) func(*httpapi.Config) {
	return func(c *httpapi.Config) { c.Writes = wrappedStore{c.Writes, wrap} }
}

// failingChange fails a status change after it succeeded, while fail is
// set: the handler gets an error with the change written (committed
// already without a key, in the keyed write's transaction with one).
type failingChange struct {
	jobboard.Writes
	fail *atomic.Bool
}

func (w failingChange) ChangeStatus(ctx context.Context, a jobboard.Actor, id int64, c jobboard.StatusChange) (jobboard.Application, error) {
	app, err := w.Writes.ChangeStatus(ctx, a, id, c)
	if err == nil && w.fail.Load() {
		return app, errors.New("injected failure after the change")
	}
	return app, err
}

// The relay-after-commit rule (write, write.go): a keyed write that rolls
// back relays nothing; one that commits relays each event it wrote once,
// after its commit, and its replay relays nothing more; a write without a
// key relays what it committed whatever the handler's outcome.
func TestWriteRelaysWhatCommittedOnce(t *testing.T) {
	t.Parallel()
	relay := &committedRelay{}
	var fail atomic.Bool
	a := newAPI(t, withWebhooks(testSealer(t)), func(c *httpapi.Config) { c.Relay = relay },
		wrapWrites(func(st jobboard.Writes) jobboard.Writes { return failingChange{st, &fail} }))
	relay.pool = a.db.Pool
	w := a.world()
	// An endpoint that wants status changes: each change writes a status
	// event and a webhook delivery.
	want(t, a.do("POST", hooksPath(w.company.ID), map[string]any{"url": "https://hooks.acme.example/in",
		"event_types": []string{jobboard.WebhookApplicationStatusChanged}}, as(w.employer)), http.StatusCreated)
	path := fmt.Sprintf("/v1/applications/%d", w.application.ID)
	wantRelayed := func(from int, what string) {
		t.Helper()
		evs, uncommitted := relay.since(from)
		if len(uncommitted) > 0 {
			t.Fatalf("%s: relayed before the commit: %v", what, uncommitted)
		}
		if len(evs) != 2 || evs[0].Type != jobboard.EventTypeStatusChanged || evs[1].Type != jobboard.EventTypeWebhookDelivery ||
			evs[0].EventID == evs[1].EventID {
			t.Fatalf("%s: relayed %+v; want the status event and its delivery, once each", what, evs)
		}
	}

	// Keyed, rolled back: nothing written, nothing relayed.
	before := relay.count()
	fail.Store(true)
	wantProblem(t, a.do("PATCH", path, map[string]any{"status": "reviewing"}, as(w.employer), withKey(newKey())),
		http.StatusInternalServerError, "internal")
	if n, relayed := a.statusEvents(), relay.count()-before; n != 0 || relayed != 0 {
		t.Fatalf("a rolled-back keyed write left %d status events and relayed %d events", n, relayed)
	}

	// Keyed, committed: each event once, after the commit; the replay
	// relays nothing.
	fail.Store(false)
	key := newKey()
	first := a.do("PATCH", path, map[string]any{"status": "reviewing"}, as(w.employer), withKey(key))
	want(t, first, http.StatusOK)
	wantRelayed(before, "keyed write")
	before = relay.count()
	wantReplay(t, first, a.do("PATCH", path, map[string]any{"status": "reviewing"}, as(w.employer), withKey(key)))
	if n := relay.count() - before; n != 0 {
		t.Fatalf("the replay relayed %d events", n)
	}

	// Without a key, a failure after the change committed: the change's
	// events are relayed all the same, once each.
	fail.Store(true)
	wantProblem(t, a.do("PATCH", path, map[string]any{"status": "interview"}, as(w.employer)),
		http.StatusInternalServerError, "internal")
	wantRelayed(before, "unkeyed write failing after its change")
	if n := a.statusEvents(); n != 2 {
		t.Fatalf("%d status events, want the two committed changes'", n)
	}
}
