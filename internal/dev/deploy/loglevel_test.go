package deploy

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/emf"
	"github.com/jobboard/jobboard/internal/function"
)

// For every LogLevel the template allows, each function's
// ApplicationLogLevel (as SAM translates it and CloudFormation evaluates
// it) keeps a metric line, the one internal/emf writes: LOG_LEVEL quiets
// the functions' own lines, never the metrics. With WARN or ERROR as
// Lambda's filter, as the template once had, the metric line is dropped:
// the check can fail.
func TestMetricLinesSurviveEveryAllowedLogLevel(t *testing.T) {
	t.Parallel()
	var line bytes.Buffer
	emf.WriteByVersion(&line, "worker", "7", time.Now(), emf.Metric{Name: "FailedRecords", Unit: emf.Count, Value: 1})

	levels := translation(t, "defaults").Parameters["LogLevel"].AllowedValues
	if len(levels) == 0 {
		t.Fatal("LogLevel has no AllowedValues")
	}
	for _, l := range levels {
		level := fmt.Sprint(l)
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			c := translation(t, "defaults", "LogLevel="+level)
			for _, name := range c.ofType("AWS::Lambda::Function") {
				props := c.eval(t, c.resource(t, name).Properties).(map[string]any)
				logging, _ := props["LoggingConfig"].(map[string]any)
				app := fmt.Sprint(logging["ApplicationLogLevel"])
				if logging["LogFormat"] != "JSON" || !lambdaKeeps(t, line.Bytes(), app) {
					t.Errorf("%s with LogLevel %s: LoggingConfig %v drops the metric line %s", name, level, logging, line.String())
				}
				env, _ := props["Environment"].(map[string]any)["Variables"].(map[string]any)
				if env["LOG_LEVEL"] != level {
					t.Errorf("%s: LOG_LEVEL %v; want %s", name, env["LOG_LEVEL"], level)
				}
				// The functions' own lines below LOG_LEVEL are dropped by
				// the functions; the lines at it pass Lambda's filter too.
				s, err := function.Load(func(k string) string { return map[string]string{"LOG_LEVEL": level}[k] })
				if err != nil {
					t.Fatal(err)
				}
				var own bytes.Buffer
				s.Logger(&own).Log(t.Context(), s.LogLevel, "at the level")
				if own.Len() == 0 || !lambdaKeeps(t, own.Bytes(), app) {
					t.Errorf("%s: a line at LOG_LEVEL %s (%s) does not pass ApplicationLogLevel %s", name, level, own.String(), app)
				}
			}
		})
	}
	for _, old := range []string{"WARN", "ERROR"} {
		if lambdaKeeps(t, line.Bytes(), old) {
			t.Errorf("the model of Lambda's filter keeps a metric line at %s; it should not", old)
		}
	}
}
