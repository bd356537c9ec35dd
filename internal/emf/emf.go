// Package emf writes CloudWatch Embedded Metric Format lines: JSON log lines
// that CloudWatch Logs turns into metric data points, with no API call from
// the function. In Lambda the function's standard output is the log stream.
package emf

import (
	"encoding/json"
	"io"
	"time"
)

// Namespace is the CloudWatch namespace of the job board's metrics.
const Namespace = "jobboard"

// Units of CloudWatch metrics used here.
const (
	Count   = "Count"
	Seconds = "Seconds"
)

// Metric is one value of a line.
type Metric struct {
	Name  string
	Unit  string
	Value float64
}

type metadata struct {
	Timestamp         int64       `json:"Timestamp"`
	CloudWatchMetrics []directive `json:"CloudWatchMetrics"`
}

type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []definition `json:"Metrics"`
}

type definition struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// Write writes one line with the metrics under Namespace, with the single
// dimension Service=service, stamped now. A failed write is not worth
// failing the work it reports on, so it is ignored.
func Write(w io.Writer, service string, now time.Time, metrics ...Metric) {
	line := map[string]any{"Service": service}
	defs := make([]definition, len(metrics))
	for i, m := range metrics {
		defs[i] = definition{Name: m.Name, Unit: m.Unit}
		line[m.Name] = m.Value
	}
	line["_aws"] = metadata{
		Timestamp: now.UnixMilli(),
		CloudWatchMetrics: []directive{{
			Namespace:  Namespace,
			Dimensions: [][]string{{"Service"}},
			Metrics:    defs,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	_, _ = w.Write(append(b, '\n'))
}
