package worker

import (
	"context"
	"fmt"
	"slices"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// maxMarks bounds the outcomes recorded in one statement.
const maxMarks = 100

// marker records the outcomes of a batch's records (step three). The
// outcomes that arrive while a statement runs are recorded together by the
// next one: one commit, and so one WAL flush, for the records whose sends
// finished together, instead of one each. A record waits only for its own
// statement.
type marker struct {
	store jobboard.EventStore
	reqs  chan markRequest
	done  chan struct{}
}

type markRequest struct {
	ctx   context.Context
	f     jobboard.Finish
	reply chan error
}

// newMarker starts a marker; close stops it.
func newMarker(store jobboard.EventStore) *marker {
	m := &marker{store: store, reqs: make(chan markRequest), done: make(chan struct{})}
	go m.loop()
	return m
}

// close stops the marker once every finish has returned.
func (m *marker) close() {
	close(m.reqs)
	<-m.done
}

// finish records one outcome. Errors: jobboard.ErrLeaseLost when the token
// no longer holds the claim; database errors; ctx's error.
func (m *marker) finish(ctx context.Context, f jobboard.Finish) error {
	reply := make(chan error, 1)
	select {
	case m.reqs <- markRequest{ctx: ctx, f: f, reply: reply}:
	case <-ctx.Done():
		return ctx.Err()
	}
	return <-reply
}

func (m *marker) loop() {
	defer close(m.done)
	for first := range m.reqs {
		batch := []markRequest{first}
	more:
		for len(batch) < maxMarks {
			select {
			case r, ok := <-m.reqs:
				if !ok {
					break more
				}
				batch = append(batch, r)
			default:
				break more
			}
		}
		fs := make([]jobboard.Finish, len(batch))
		for i, r := range batch {
			fs[i] = r.f
		}
		// Every record of a batch has the same deadline.
		lost, err := m.store.FinishClaims(first.ctx, fs)
		for _, r := range batch {
			switch {
			case err != nil:
				r.reply <- err
			case slices.Contains(lost, r.f.EventID):
				r.reply <- fmt.Errorf("finish claim of event %s: %w", r.f.EventID, jobboard.ErrLeaseLost)
			default:
				r.reply <- nil
			}
		}
	}
}
