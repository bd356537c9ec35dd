package worker

import (
	"io"
	"time"

	"github.com/jobboard/jobboard/internal/emf"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// metricsOf names, per outcome, the counters a record adds to.
var metricsOf = map[string][]string{
	string(jobboard.OutcomeSent):                {"EmailsSent"},
	outcomeLeaseLost:                            {"EmailsSent"},
	outcomeMarkFailed:                           {"EmailsSent"},
	string(jobboard.OutcomeDuplicate):           {"DuplicatesSkipped"},
	string(jobboard.OutcomePayloadMismatch):     {"DuplicatesSkipped"},
	string(jobboard.OutcomeRejected):            {"SendFailures"},
	outcomeSendFailed:                           {"SendFailures"},
	outcomeAmbiguous:                            {"SendFailures", "AmbiguousSends"},
	outcomeThrottled:                            {"SendFailures", "Throttled"},
	outcomePaused:                               {"SendFailures", "SendingPaused"},
	outcomeMalformed:                            {"MalformedMessages"},
	outcomeExpired:                              {"ExpiredEvents"},
	string(jobboard.OutcomeApplicationMissing):  nil,
	string(jobboard.OutcomeRecipientUnverified): {"UnverifiedRecipients"},
	string(jobboard.OutcomeAlreadyVerified):     nil,
	string(jobboard.OutcomeUserMissing):         nil,
	string(jobboard.OutcomeNoAccount):           nil,
}

// metricNames are the worker's metrics, every one on every line (a zero is
// a data point too: an alarm then sees "no failures", not "no data").
var metricNames = []string{
	"EmailsSent", "DuplicatesSkipped", "SendFailures", "MalformedMessages",
	"SendingPaused", "Throttled", "ExpiredEvents", "AmbiguousSends", "UnverifiedRecipients",
}

// writeMetrics writes the batch's EMF line (namespace jobboard, dimension
// Service=worker, all counts).
func writeMetrics(w io.Writer, now time.Time, recs []record) {
	counts := map[string]int{}
	for _, r := range recs {
		for _, name := range metricsOf[r.res.outcome] {
			counts[name]++
		}
	}
	ms := make([]emf.Metric, len(metricNames))
	for i, name := range metricNames {
		ms[i] = emf.Metric{Name: name, Unit: emf.Count, Value: float64(counts[name])}
	}
	emf.Write(w, "worker", now, ms...)
}
