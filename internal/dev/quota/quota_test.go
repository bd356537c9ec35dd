package quota_test

import (
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/dev/quota"
)

// Several worker processes share the quota through the one send schedule
// in the database: SES is never asked for more sends in a second than its
// rate plus its bucket's burst, and no record reaches the dead-letter
// queue, though the burst is far above the quota; every event is emailed
// once.
func TestPacingSharedByWorkers(t *testing.T) {
	q := quota.Quota{Rate: 40, Burst: 20, Latency: 20 * time.Millisecond}
	s := newScenario(t, q)
	s.startWorkers(3)
	evs := s.statusEvents(240)
	since := time.Now()
	s.publish(evs)
	s.waitUntil(2*time.Minute, "every email accepted", func() bool { return s.proxy.Stats(since).Accepted >= len(evs) })
	s.waitUntil(time.Minute, "the queues empty", s.settled)

	st, o := s.proxy.Stats(since), s.outcome(evs)
	t.Logf("%d SES calls, %d throttled, at most %d in a second; %d receives; %+v", st.Calls, st.Throttled, st.MaxCallsPerSecond, o.receives, o)
	if limit := int(q.Rate + q.Burst); st.MaxCallsPerSecond > limit {
		t.Errorf("SES was asked for %d sends within a second; the quota allows %d", st.MaxCallsPerSecond, limit)
	}
	if o.dead != 0 || o.maxReceives >= 10 {
		t.Errorf("%d events dead-lettered, the highest receive count %d; want none, and below maxReceiveCount 10", o.dead, o.maxReceives)
	}
	if o.lost != 0 || o.duplicates != 0 {
		t.Errorf("%d lost, %d duplicates; want none", o.lost, o.duplicates)
	}
}

// A password reset asked for behind a backlog of status emails is sent
// before most of the backlog: it has its own queue, and its send takes
// the first slot.
func TestAccountMailAheadOfStatusBacklog(t *testing.T) {
	q := quota.Quota{Rate: 20, Burst: 5, Latency: 20 * time.Millisecond}
	s := newScenario(t, q)
	s.startWorkers(2)
	evs := s.statusEvents(200)
	since := time.Now()
	s.publish(evs)
	s.waitUntil(time.Minute, "the first 20 emails accepted", func() bool { return s.proxy.Stats(since).Accepted >= 20 })
	email, _ := s.reset()
	before := s.proxy.Stats(since).Accepted
	var at int
	s.waitUntil(time.Minute, "the reset email accepted", func() bool {
		_, i, ok := s.proxy.AcceptedTo(email, since)
		at = i
		return ok
	})
	t.Logf("reset asked for after %d status emails, sent as email %d of %d", before, at+1, len(evs)+1)
	if at >= len(evs)/2 {
		t.Errorf("the reset was email %d of %d, asked for after %d: it waited behind the status backlog", at+1, len(evs)+1, before)
	}
	s.waitUntil(2*time.Minute, "every email accepted", func() bool { return s.proxy.Stats(since).Accepted >= len(evs)+1 })
}
