package worker

import (
	"io"
	"slices"
	"time"

	"github.com/jobboard/jobboard/internal/emf"
	"github.com/jobboard/jobboard/internal/jobboard"
	"github.com/jobboard/jobboard/internal/sqsbatch"
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
	outcomeRefused:                              {"SendFailures", "SendRefused"},
	outcomeMalformed:                            {"MalformedMessages"},
	outcomeExpired:                              {"ExpiredEvents"},
	string(jobboard.OutcomeApplicationMissing):  nil,
	string(jobboard.OutcomeRecipientUnverified): {"UnverifiedRecipients"},
	string(jobboard.OutcomeSuperseded):          {"Superseded"},
	string(jobboard.OutcomeAlreadyVerified):     nil,
	string(jobboard.OutcomeUserMissing):         nil,
	string(jobboard.OutcomeNoAccount):           nil,
	string(jobboard.OutcomeSuppressed):          {"SuppressedRecipients"},
}

// metricNames are the worker's metrics, every one on every line (a zero is
// a data point too: an alarm then sees "no failures", not "no data").
var metricNames = []string{
	"EmailsSent", "DuplicatesSkipped", "SendFailures", "MalformedMessages",
	"SendingPaused", "SendRefused", "Throttled", "ExpiredEvents", "AmbiguousSends", "UnverifiedRecipients",
	"SuppressedRecipients",
	"Superseded",
}

// What the rollback alarms of a deploy read, by function version: the
// records of the batch, those reported back as failed (to be retried), and
// those whose statements the database failed or refused (the claim, or
// recording what became of the email).
const (
	metricRecords       = "Records"
	metricFailedRecords = "FailedRecords"
	metricStoreErrors   = "StoreErrors"
)

// writeMetrics writes the batch's EMF line: namespace jobboard, dimension
// Service=worker and, in Lambda, also Service and FunctionVersion=version;
// all counts.
func writeMetrics(w io.Writer, version string, now time.Time, recs []sqsbatch.Record[*record]) {
	counts := map[string]int{metricRecords: len(recs)}
	for _, rec := range recs {
		r := rec.Value
		for _, name := range metricsOf[r.res.outcome] {
			counts[name]++
		}
		if r.res.failed {
			counts[metricFailedRecords]++
		}
		if r.res.outcome == outcomeStoreError || r.res.outcome == outcomeMarkFailed {
			counts[metricStoreErrors]++
		}
	}
	names := append(slices.Clone(metricNames), metricRecords, metricFailedRecords, metricStoreErrors)
	ms := make([]emf.Metric, len(names))
	for i, name := range names {
		ms[i] = emf.Metric{Name: name, Unit: emf.Count, Value: float64(counts[name])}
	}
	emf.WriteByVersion(w, "worker", version, now, ms...)
}
