package emf_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/emf"
)

// line is what CloudWatch reads from an EMF line.
type line struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name, Unit string
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	Members map[string]any `json:"-"`
}

func decode(t *testing.T, b []byte) line {
	t.Helper()
	if !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("not one line: %q", b)
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &l.Members); err != nil {
		t.Fatal(err)
	}
	if len(l.AWS.CloudWatchMetrics) != 1 {
		t.Fatalf("directives = %d, want 1", len(l.AWS.CloudWatchMetrics))
	}
	// CloudWatch drops a document whose dimensions or metrics are not
	// members of the line.
	d := l.AWS.CloudWatchMetrics[0]
	for _, set := range d.Dimensions {
		for _, name := range set {
			if _, ok := l.Members[name].(string); !ok {
				t.Errorf("dimension %s is not a string member of the line: %v", name, l.Members[name])
			}
		}
	}
	for _, m := range d.Metrics {
		if _, ok := l.Members[m.Name].(float64); !ok {
			t.Errorf("metric %s is not a number member of the line", m.Name)
		}
	}
	return l
}

func TestWriteByVersionAddsTheVersionDimension(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_123)
	m := []emf.Metric{{Name: "Requests", Unit: emf.Count, Value: 1}, {Name: "ServerErrors", Unit: emf.Count, Value: 0}}
	tests := []struct {
		name, version string
		want          [][]string
	}{
		{"a published version", "7", [][]string{{"Service"}, {"Service", "FunctionVersion"}}},
		{"outside Lambda", "", [][]string{{"Service"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			emf.WriteByVersion(&b, "api", tt.version, now, m...)
			l := decode(t, b.Bytes())
			d := l.AWS.CloudWatchMetrics[0]
			if d.Namespace != emf.Namespace || l.AWS.Timestamp != now.UnixMilli() || l.Members["Service"] != "api" {
				t.Errorf("namespace %s, timestamp %d, service %v", d.Namespace, l.AWS.Timestamp, l.Members["Service"])
			}
			if !slices.EqualFunc(d.Dimensions, tt.want, slices.Equal) {
				t.Errorf("dimensions %v, want %v", d.Dimensions, tt.want)
			}
			if got, _ := l.Members[emf.VersionDimension].(string); got != tt.version {
				t.Errorf("FunctionVersion = %q, want %q", got, tt.version)
			}
			if l.Members["Requests"] != 1.0 || l.Members["ServerErrors"] != 0.0 {
				t.Errorf("values %v", l.Members)
			}
		})
	}
}

// Lambda's log-level filter reads a line's "level"; an EMF line must not
// carry one (template.yaml relies on it counting as INFO).
func TestLinesCarryNoLevel(t *testing.T) {
	var b bytes.Buffer
	emf.Write(&b, "sweeper", time.Now(), emf.Metric{Name: "OutboxBacklog", Unit: emf.Count, Value: 3})
	emf.WriteByVersion(&b, "worker", "3", time.Now(), emf.Metric{Name: "Records", Unit: emf.Count, Value: 10})
	for _, raw := range bytes.SplitAfter(b.Bytes(), []byte("\n")) {
		if len(raw) == 0 {
			continue
		}
		l := decode(t, raw)
		for _, k := range []string{"level", "Level", "log_level"} {
			if _, ok := l.Members[k]; ok {
				t.Errorf("line has %q: %s", k, raw)
			}
		}
	}
}
