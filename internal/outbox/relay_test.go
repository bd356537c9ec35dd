package outbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jobboard/jobboard/internal/outbox"
	"github.com/jobboard/jobboard/internal/worker/workertest"
)

func TestRelayPublishesAndMarks(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	ev := e.StatusChange(t, e.NewApp(t))
	// A cancelled request context does not stop the relay: the change is
	// committed and its event should go out.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := outbox.NewRelay(e.Publisher(), e.DB).Relay(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if !e.Published(t, ev.EventID) {
		t.Error("outbox row not marked published")
	}
	if n := e.Depth(t, e.QueueURL); n != 1 {
		t.Errorf("queue depth = %d, want 1", n)
	}
}

func TestRelayFailureLeavesTheRowForTheSweeper(t *testing.T) {
	t.Parallel()
	e := workertest.New(t, workertest.Options{})
	down := errors.New("injected: SQS unreachable")
	for name, p := range map[string]*workertest.FaultyPublisher{
		"publish fails": {Next: e.Publisher(), Before: down},
		"queue refuses": {Next: e.Publisher(), Refuse: map[string]bool{}},
	} {
		t.Run(name, func(t *testing.T) {
			ev := e.StatusChange(t, e.NewApp(t))
			if p.Refuse != nil {
				p.Refuse[ev.EventID] = true
			}
			if err := outbox.NewRelay(p, e.DB).Relay(context.Background(), ev); err == nil {
				t.Fatal("Relay succeeded")
			}
			if e.Published(t, ev.EventID) {
				t.Error("row marked published")
			}
		})
	}
}
