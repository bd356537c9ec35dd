package postgres_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// mustStatusEvents makes n status changes (each on a fresh application of a
// fresh candidate) and returns their events, oldest first.
func mustStatusEvents(t testing.TB, w world, n int) []jobboard.Event {
	t.Helper()
	ctx := context.Background()
	evs := make([]jobboard.Event, 0, n)
	for range n {
		candidate := mustUser(t, w.db, jobboard.RoleCandidate)
		app, err := w.db.Apply(ctx, candidate, w.job.ID, jobboard.NewApplication{})
		if err != nil {
			t.Fatal(err)
		}
		_, ev, err := changeStatus(ctx, w.db, w.employer, app.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing})
		if err != nil || ev == nil {
			t.Fatalf("change status: %v, event %v", err, ev)
		}
		evs = append(evs, *ev)
	}
	return evs
}

// ageOutbox moves the creation of every outbox row back by d.
func ageOutbox(t testing.TB, w world, d time.Duration) {
	t.Helper()
	if _, err := w.db.Pool.Exec(context.Background(),
		`UPDATE outbox SET created_at = created_at - make_interval(secs => $1)`, d.Seconds()); err != nil {
		t.Fatal(err)
	}
}

func unpublished(t testing.TB, w world) []string {
	t.Helper()
	rows, err := w.db.Pool.Query(context.Background(),
		`SELECT event_id::text FROM outbox WHERE published_at IS NULL ORDER BY created_at`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func eventIDs(evs []jobboard.Event) []string {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.EventID
	}
	return ids
}

// maxAge is the age beyond which the default retention never publishes.
var maxAge = jobboard.MaxEventAge(jobboard.DefaultRetention)

func TestMarkPublished(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	evs := mustStatusEvents(t, w, 3)

	if err := w.db.MarkPublished(ctx, []string{evs[0].EventID, evs[2].EventID}); err != nil {
		t.Fatal(err)
	}
	if got, want := unpublished(t, w), []string{evs[1].EventID}; !slices.Equal(got, want) {
		t.Fatalf("unpublished = %v, want %v", got, want)
	}
	var first time.Time
	if err := w.db.Pool.QueryRow(ctx, `SELECT published_at FROM outbox WHERE event_id = $1`, evs[0].EventID).Scan(&first); err != nil {
		t.Fatal(err)
	}
	// Marking again (a relay and a sweeper both published) keeps the first
	// publication time.
	if err := w.db.MarkPublished(ctx, []string{evs[0].EventID}); err != nil {
		t.Fatal(err)
	}
	var again time.Time
	if err := w.db.Pool.QueryRow(ctx, `SELECT published_at FROM outbox WHERE event_id = $1`, evs[0].EventID).Scan(&again); err != nil {
		t.Fatal(err)
	}
	if !again.Equal(first) {
		t.Errorf("published_at moved from %v to %v", first, again)
	}
}

func TestPublishPending(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	evs := mustStatusEvents(t, w, 3)

	var got []jobboard.Event
	publishAll := func(_ context.Context, batch []jobboard.Event) ([]string, error) {
		got = append(got, batch...)
		return eventIDs(batch), nil
	}

	// Within the grace period the relay may still be at work: not touched.
	locked, published, err := w.db.PublishPending(ctx, 30*time.Second, maxAge, 10, publishAll)
	if err != nil || locked != 0 || published != 0 || len(got) != 0 {
		t.Fatalf("fresh rows: locked %d, published %d, %v, publish saw %d; want nothing", locked, published, err, len(got))
	}

	ageOutbox(t, w, time.Minute)
	// A failing publish marks nothing.
	down := errors.New("queue down")
	_, published, err = w.db.PublishPending(ctx, 30*time.Second, maxAge, 10,
		func(context.Context, []jobboard.Event) ([]string, error) { return nil, down })
	if !errors.Is(err, down) || published != 0 {
		t.Fatalf("failing publish: published %d, %v; want the error", published, err)
	}
	if n := len(unpublished(t, w)); n != 3 {
		t.Fatalf("unpublished after a failed publish = %d, want 3", n)
	}

	// The queue takes only some: only those are marked.
	locked, published, err = w.db.PublishPending(ctx, 30*time.Second, maxAge, 2,
		func(_ context.Context, batch []jobboard.Event) ([]string, error) {
			got = append(got, batch...)
			return []string{batch[1].EventID}, nil
		})
	if err != nil || locked != 2 || published != 1 {
		t.Fatalf("partial: locked %d, published %d, %v; want 2, 1", locked, published, err)
	}
	// Oldest first, payload decoded from the outbox as it was written.
	if len(got) != 2 || got[0] != evs[0] || got[1] != evs[1] {
		t.Fatalf("publish saw %+v, want the two oldest events %+v", got, evs[:2])
	}
	if want := []string{evs[0].EventID, evs[2].EventID}; !slices.Equal(unpublished(t, w), want) {
		t.Fatalf("unpublished = %v, want %v", unpublished(t, w), want)
	}

	got = nil
	locked, published, err = w.db.PublishPending(ctx, 30*time.Second, maxAge, 10, publishAll)
	if err != nil || locked != 2 || published != 2 || len(unpublished(t, w)) != 0 {
		t.Fatalf("rest: locked %d, published %d, %v, unpublished %v", locked, published, err, unpublished(t, w))
	}
}

// Two sweepers at once lock disjoint rows: the second skips what the first
// holds instead of waiting for it or publishing it again.
func TestPublishPendingSkipsLockedRows(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	mustStatusEvents(t, w, 4)
	ageOutbox(t, w, time.Minute)

	holding := make(chan []string)
	release := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _, err := w.db.PublishPending(ctx, 30*time.Second, maxAge, 2,
			func(_ context.Context, batch []jobboard.Event) ([]string, error) {
				holding <- eventIDs(batch)
				<-release
				return eventIDs(batch), nil
			})
		if err != nil {
			t.Errorf("first sweeper: %v", err)
		}
	}()
	first := <-holding

	var second []string
	locked, _, err := w.db.PublishPending(ctx, 30*time.Second, maxAge, 10,
		func(_ context.Context, batch []jobboard.Event) ([]string, error) {
			second = eventIDs(batch)
			return second, nil
		})
	close(release)
	wg.Wait()
	if err != nil || locked != 2 {
		t.Fatalf("second sweeper locked %d, %v; want the 2 rows the first does not hold", locked, err)
	}
	for _, id := range second {
		if slices.Contains(first, id) {
			t.Fatalf("both sweepers published %s", id)
		}
	}
	if n := len(unpublished(t, w)); n != 0 {
		t.Errorf("unpublished = %d, want 0", n)
	}
}

func TestRetentionDeletesOnlyOldRows(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	const retention = 14 * 24 * time.Hour

	// Claims: 5 older than the retention, 2 younger; finished or not.
	for i, age := range []string{"15 days", "20 days", "30 days", "15 days", "14 days 1 hour", "13 days", "1 minute"} {
		if _, err := w.db.Pool.Exec(ctx, `INSERT INTO processed_events (event_id, event_type, payload_hash, processed_at, outcome, lease_token, lease_until)
			VALUES ($1, 'application.status_changed', '\x00', now() - $2::interval, CASE WHEN $3 THEN 'sent' END, gen_random_uuid(), now())`,
			"ev-"+string(rune('a'+i)), age, i%2 == 0); err != nil {
			t.Fatal(err)
		}
	}
	// Outbox: published long ago (deleted), expired long ago (deleted),
	// published recently (kept), never published however old (kept: the
	// sweeper still owes it an expiry).
	evs := mustStatusEvents(t, w, 4)
	if err := w.db.MarkPublished(ctx, eventIDs(evs[:2])); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Pool.Exec(ctx, `UPDATE outbox SET published_at = now() - interval '15 days', created_at = now() - interval '15 days'
		WHERE event_id = $1`, evs[0].EventID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Pool.Exec(ctx, `UPDATE outbox SET created_at = now() - interval '30 days' WHERE event_id = $1`, evs[2].EventID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.db.Pool.Exec(ctx, `UPDATE outbox SET expired_at = now() - interval '15 days', created_at = now() - interval '45 days'
		WHERE event_id = $1`, evs[3].EventID); err != nil {
		t.Fatal(err)
	}

	// A batch of 2 makes the 5 old claims take three statements.
	n, err := w.db.DeleteExpired(ctx, retention, 2)
	if err != nil || n["processed_events"] != 5 {
		t.Fatalf("deleted %v, %v; want 5 claims", n, err)
	}
	if left := count(t, w.db, `SELECT count(*) FROM processed_events`); left != 2 {
		t.Fatalf("claims left = %d, want 2", left)
	}
	if n["outbox"] != 2 {
		t.Fatalf("deleted %d outbox rows; want 2", n["outbox"])
	}
	if left := count(t, w.db, `SELECT count(*) FROM outbox WHERE event_id = ANY($1::uuid[])`, []string{evs[0].EventID, evs[3].EventID}); left != 0 {
		t.Errorf("the old published or expired rows are still there")
	}
	if left := count(t, w.db, `SELECT count(*) FROM outbox`); left != 2 {
		t.Errorf("outbox rows left = %d, want 2", left)
	}
	// Nothing more to delete: a second run is a no-op.
	if n, err := w.db.DeleteExpired(ctx, retention, 2); err != nil || n["processed_events"] != 0 {
		t.Errorf("second run deleted %v, %v", n, err)
	}
}

// An event that stayed unpublished for longer than it may be published is
// never published: the sweeper expires it instead, once, and only it.
func TestTooOldEventsAreExpiredNotPublished(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := context.Background()
	evs := mustStatusEvents(t, w, 3)
	// evs[0] just too old, evs[1] just young enough, evs[2] fresh.
	for i, age := range []time.Duration{maxAge + time.Minute, maxAge - time.Minute, time.Minute} {
		if _, err := w.db.Pool.Exec(ctx, `UPDATE outbox SET created_at = now() - make_interval(secs => $2) WHERE event_id = $1`,
			evs[i].EventID, age.Seconds()); err != nil {
			t.Fatal(err)
		}
	}

	b, err := w.db.Backlog(ctx)
	if err != nil || b.Count != 3 || b.OldestAge < maxAge || b.OldestAge > maxAge+time.Hour {
		t.Fatalf("backlog = %+v, %v; want 3, the oldest just over %v", b, err, maxAge)
	}
	var published []string
	_, _, err = w.db.PublishPending(ctx, 30*time.Second, maxAge, 10, func(_ context.Context, batch []jobboard.Event) ([]string, error) {
		published = append(published, eventIDs(batch)...)
		return eventIDs(batch), nil
	})
	if err != nil || !slices.Equal(published, []string{evs[1].EventID, evs[2].EventID}) {
		t.Fatalf("published %v, %v; want the two young enough, never the old one", published, err)
	}

	expired, err := w.db.ExpireUnpublished(ctx, maxAge)
	if err != nil || !slices.Equal(expired, []string{evs[0].EventID}) {
		t.Fatalf("expired %v, %v; want only %s", expired, err, evs[0].EventID)
	}
	if again, err := w.db.ExpireUnpublished(ctx, maxAge); err != nil || len(again) != 0 {
		t.Fatalf("second expiry = %v, %v; want nothing", again, err)
	}
	if b, err := w.db.Backlog(ctx); err != nil || b.Count != 0 || b.OldestAge != 0 {
		t.Fatalf("backlog after = %+v, %v; want empty", b, err)
	}
	// An expired row stays out of later sweeps, even with a longer age.
	locked, _, err := w.db.PublishPending(ctx, 0, 100*24*time.Hour, 10, func(context.Context, []jobboard.Event) ([]string, error) {
		t.Error("an expired event was offered for publishing")
		return nil, nil
	})
	if err != nil || locked != 0 {
		t.Fatalf("later sweep locked %d, %v", locked, err)
	}
}
