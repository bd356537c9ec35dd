package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// Slots an hour apart, so that the test's own time does not matter: each
// answer is read to the nearest hour.
func TestTakeSendSlot(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	ctx := context.Background()
	take := func(r jobboard.SlotRequest) (bool, int) {
		t.Helper()
		s, err := db.TakeSendSlot(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return s.Taken, int(s.Wait.Round(time.Hour) / time.Hour)
	}
	status := func(horizon time.Duration) jobboard.SlotRequest {
		return jobboard.SlotRequest{Interval: time.Hour, Horizon: horizon}
	}
	for i, want := range []struct {
		r     jobboard.SlotRequest
		taken bool
		hours int
	}{
		{status(0), true, 0},                                                // the schedule is free: now
		{status(0), false, 1},                                               // the next is an hour away, beyond the horizon: not taken
		{status(90 * time.Minute), true, 1},                                 // within it: taken
		{status(90 * time.Minute), false, 2},                                // and the next is two hours away
		{jobboard.SlotRequest{Interval: time.Hour, Account: true}, true, 0}, // account mail goes first
		{status(5 * time.Hour), true, 3},                                    // and moved the status slots on
		{jobboard.SlotRequest{Interval: time.Hour, Account: true}, false, 1},
	} {
		if taken, hours := take(want.r); taken != want.taken || hours != want.hours {
			t.Errorf("take %d (%+v) = %v, %dh; want %v, %dh", i, want.r, taken, hours, want.taken, want.hours)
		}
	}
	if _, err := db.TakeSendSlot(ctx, jobboard.SlotRequest{}); err == nil {
		t.Error("zero interval: no error")
	}
}

// Takers at the same moment each get a slot of their own.
func TestTakeSendSlotConcurrently(t *testing.T) {
	t.Parallel()
	db := pgtest.NewDB(t)
	const n = 20
	hours := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := db.TakeSendSlot(context.Background(), jobboard.SlotRequest{Interval: time.Hour, Horizon: n * time.Hour})
			if err != nil || !s.Taken {
				t.Errorf("take: %+v, %v", s, err)
			}
			hours[i] = int(s.Wait.Round(time.Hour) / time.Hour)
		})
	}
	wg.Wait()
	slices.Sort(hours)
	for i, h := range hours {
		if h != i {
			t.Fatalf("slots = %v hours from now; want 0 to %d, one each", hours, n-1)
		}
	}
}
