package workertest

import (
	"context"
	"testing"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// FaultyPublisher wraps a real publisher (Next) to inject failures: Before
// (nothing reaches the queue), After (the queue has the events, the caller
// hears an error, as when the process dies before marking the rows), or
// Refuse (those events are refused as SendMessageBatch reports refused
// entries: not sent, not in accepted). Calls counts the Publish calls.
type FaultyPublisher struct {
	Next   jobboard.EventPublisher
	Before error
	After  error
	Refuse map[string]bool
	Calls  int
}

// Publish publishes evs through Next, failing as configured.
func (p *FaultyPublisher) Publish(ctx context.Context, evs []jobboard.Event) ([]string, error) {
	p.Calls++
	if p.Before != nil {
		return nil, p.Before
	}
	var sent []jobboard.Event
	for _, ev := range evs {
		if !p.Refuse[ev.EventID] {
			sent = append(sent, ev)
		}
	}
	accepted, err := p.Next.Publish(ctx, sent)
	if err != nil {
		return nil, err
	}
	if p.After != nil {
		return nil, p.After
	}
	return accepted, nil
}

// StatusChange changes app's status as its employer and returns the event
// that the change committed to the outbox.
func (e *Env) StatusChange(tb testing.TB, app App) jobboard.Event {
	tb.Helper()
	evs := pgtest.MustWrite(tb, e.DB, func(st jobboard.Writes) error {
		_, err := st.ChangeStatus(context.Background(), app.Employer, app.ID, jobboard.StatusChange{Status: jobboard.StatusReviewing})
		return err
	})
	if len(evs) != 1 {
		tb.Fatalf("change status committed %+v; want one event", evs)
	}
	return evs[0]
}

// Published reports whether the outbox row of eventID is marked published.
func (e *Env) Published(tb testing.TB, eventID string) bool {
	tb.Helper()
	var published bool
	if err := e.Pool.QueryRow(context.Background(),
		`SELECT published_at IS NOT NULL FROM outbox WHERE event_id = $1`, eventID).Scan(&published); err != nil {
		tb.Fatal(err)
	}
	return published
}
