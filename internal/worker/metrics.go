package worker

import (
	"encoding/json"
	"io"
	"time"
)

// MetricsNamespace is the CloudWatch namespace of the worker's metrics.
const MetricsNamespace = "jobboard"

// metrics counts one batch's records for the EMF line.
type metrics struct {
	sent         int // emails the mail service accepted
	duplicates   int // deliveries of events already handled (payload mismatches included)
	sendFailures int // sends that failed: retryable, throttled or rejected for good
	malformed    int // messages that could not be decoded
}

// emfLine is one CloudWatch Embedded Metric Format document. CloudWatch
// Logs turns each such line of the function's output into metric data
// points, with no API call from the function.
type emfLine struct {
	AWS               emfMetadata `json:"_aws"`
	Service           string      `json:"Service"`
	EmailsSent        int         `json:"EmailsSent"`
	DuplicatesSkipped int         `json:"DuplicatesSkipped"`
	SendFailures      int         `json:"SendFailures"`
	MalformedMessages int         `json:"MalformedMessages"`
}

type emfMetadata struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// emfDirectives names the metrics of every line; they are counts with one
// dimension, Service=worker.
var emfDirectives = []emfDirective{{
	Namespace:  MetricsNamespace,
	Dimensions: [][]string{{"Service"}},
	Metrics: []emfMetric{
		{Name: "EmailsSent", Unit: "Count"},
		{Name: "DuplicatesSkipped", Unit: "Count"},
		{Name: "SendFailures", Unit: "Count"},
		{Name: "MalformedMessages", Unit: "Count"},
	},
}}

// write writes the batch's EMF line. A failed write is not worth failing a
// batch whose emails are already sent, so it is ignored.
func (m metrics) write(w io.Writer, now time.Time) {
	line := emfLine{
		AWS:               emfMetadata{Timestamp: now.UnixMilli(), CloudWatchMetrics: emfDirectives},
		Service:           "worker",
		EmailsSent:        m.sent,
		DuplicatesSkipped: m.duplicates,
		SendFailures:      m.sendFailures,
		MalformedMessages: m.malformed,
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	_, _ = w.Write(append(b, '\n'))
}
