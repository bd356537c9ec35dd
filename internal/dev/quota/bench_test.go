package quota_test

import (
	"slices"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/dev/quota"
)

// The quota scenario, as issue 30 measured the worker: SES answers in
// 80 ms and allows 50 sends a second (a bucket of 10); a burst of 3,000
// status events; 4 worker processes, standing in for concurrent Lambda
// instances.
const (
	benchEvents  = 3000
	benchWorkers = 4
)

var benchQuota = quota.Quota{Rate: 50, Burst: 10, Latency: 80 * time.Millisecond}

// BenchmarkQuotaScenario sends the burst through worker processes and
// reports, in one run: the time from the burst's publication to its last
// email against the ideal n / quota; the share of the quota used from the
// first email to the last; SES calls per email and the 429s; SQS receives
// per event and the highest receive count of one; the dead-lettered, the
// duplicated and the lost; and the latency of a password reset asked for
// mid-burst (three, at a quarter, half and three quarters of it; the
// median) against the same on empty queues (three; the median).
// QUOTA_BASELINE_WORKER measures another build of the worker instead
// (docs/performance.md).
func BenchmarkQuotaScenario(b *testing.B) {
	for range b.N {
		s := newScenario(b, benchQuota)
		s.startWorkers(benchWorkers)
		resetLatency := func() time.Duration {
			email, asked := s.reset()
			var sent time.Time
			s.waitUntil(5*time.Minute, "the reset email accepted", func() bool {
				at, _, ok := s.proxy.AcceptedTo(email, time.Time{})
				sent = at
				return ok
			})
			return sent.Sub(asked)
		}
		resetLatency() // the workers are up
		var empty []time.Duration
		for range 3 {
			empty = append(empty, resetLatency())
		}

		evs := s.statusEvents(benchEvents)
		start := time.Now()
		s.publish(evs)
		var mid []time.Duration
		for _, share := range []int{4, 2} {
			s.waitUntil(10*time.Minute, "the burst under way", func() bool { return s.proxy.Stats(start).Accepted >= benchEvents/share })
			mid = append(mid, resetLatency())
		}
		s.waitUntil(10*time.Minute, "three quarters of the burst sent", func() bool {
			return s.proxy.Stats(start).Accepted >= benchEvents*3/4+len(mid)
		})
		mid = append(mid, resetLatency())
		s.waitUntil(15*time.Minute, "every email accepted", func() bool { return s.proxy.Stats(start).Accepted >= benchEvents+len(mid) })
		s.waitUntil(15*time.Minute, "the queues empty", s.settled)
		st, o := s.proxy.Stats(start), s.outcome(evs)

		ideal := time.Duration(float64(benchEvents) / benchQuota.Rate * float64(time.Second))
		took := st.Last.Sub(start)
		b.ReportMetric(took.Seconds(), "s_for_burst")
		b.ReportMetric(float64(took)/float64(ideal), "time/ideal")
		b.ReportMetric(float64(st.Accepted-1)/st.Last.Sub(st.First).Seconds()/benchQuota.Rate, "of_quota")
		b.ReportMetric(float64(st.Calls)/float64(st.Accepted), "ses_calls/email")
		b.ReportMetric(float64(st.Throttled), "429s")
		b.ReportMetric(float64(st.MaxCallsPerSecond), "max_calls/s")
		b.ReportMetric(float64(o.receives)/float64(len(evs)), "receives/event")
		b.ReportMetric(float64(o.maxReceives), "max_receives")
		b.ReportMetric(float64(o.dead), "dlq")
		b.ReportMetric(float64(o.duplicates), "duplicates")
		b.ReportMetric(float64(o.lost), "lost")
		b.ReportMetric(median(mid).Seconds()*1000, "reset_mid_burst_ms")
		b.ReportMetric(median(empty).Seconds()*1000, "reset_empty_ms")
		b.ReportMetric(float64(median(mid))/float64(median(empty)), "reset_mid/empty")
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
