// Package emf writes CloudWatch Embedded Metric Format lines: JSON log lines
// that CloudWatch Logs turns into metric data points, with no API call from
// the function. In Lambda the function's standard output is the log stream.
//
// A line has no "level" member, so Lambda's log-level filter counts it as
// INFO (template.yaml keeps that filter at INFO or DEBUG, so that no
// setting drops the metrics).
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
	write(w, service, "", now, metrics)
}

// VersionDimension is the dimension that WriteByVersion adds: the version
// of the function that wrote the line, as Lambda names it
// (AWS_LAMBDA_FUNCTION_VERSION: "7", or "$LATEST"). A rollback alarm reads
// the metrics of the version being deployed by it.
const VersionDimension = "FunctionVersion"

// WriteByVersion writes one line like Write whose metrics CloudWatch also
// records by version: under the dimensions Service and FunctionVersion as
// well as under Service alone. An empty version (outside Lambda) writes
// what Write does.
func WriteByVersion(w io.Writer, service, version string, now time.Time, metrics ...Metric) {
	write(w, service, version, now, metrics)
}

func write(w io.Writer, service, version string, now time.Time, metrics []Metric) {
	line := map[string]any{"Service": service}
	dimensions := [][]string{{"Service"}}
	if version != "" {
		line[VersionDimension] = version
		dimensions = append(dimensions, []string{"Service", VersionDimension})
	}
	defs := make([]definition, len(metrics))
	for i, m := range metrics {
		defs[i] = definition{Name: m.Name, Unit: m.Unit}
		line[m.Name] = m.Value
	}
	line["_aws"] = metadata{
		Timestamp: now.UnixMilli(),
		CloudWatchMetrics: []directive{{
			Namespace:  Namespace,
			Dimensions: dimensions,
			Metrics:    defs,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	_, _ = w.Write(append(b, '\n'))
}
