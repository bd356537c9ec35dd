package deploy

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// How late an alarm can see a new version fail, from the version's first
// failing minute (CloudWatch alarms evaluate once a period,
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/AlarmThatSendsEmail.html):
// the metric's delivery (Lambda publishes its own metrics each minute; an
// EMF line goes through CloudWatch Logs first), DatapointsToAlarm periods
// of data, and one evaluation.
const (
	lambdaMetricLag = time.Minute
	emfMetricLag    = 2 * time.Minute
	evaluation      = time.Minute
	// firstRequest is the minute a canary at 10 % of a quiet stack may
	// pass without a single request (missing data is not breaching).
	firstRequest = time.Minute
)

// detection is how long alarm needs, at worst, to fire on a version that
// fails every request from its first.
func detection(t *testing.T, tpl *samTemplate, alarm string) time.Duration {
	t.Helper()
	var a struct {
		alarmSpec
		Metrics []struct {
			MetricStat *struct {
				Metric struct {
					Namespace string `json:"Namespace"`
				} `json:"Metric"`
				Period float64 `json:"Period"`
			} `json:"MetricStat"`
		} `json:"Metrics"`
	}
	tpl.props(t, alarm, &a)
	namespace, period := a.Namespace, a.Period
	for _, m := range a.Metrics {
		if m.MetricStat != nil {
			namespace, period = m.MetricStat.Metric.Namespace, max(period, m.MetricStat.Period)
		}
	}
	datapoints := a.DatapointsToAlarm
	if datapoints == 0 {
		datapoints = a.EvaluationPeriods
	}
	lag := emfMetricLag
	if namespace == "AWS/Lambda" {
		lag = lambdaMetricLag
	}
	if period == 0 || datapoints == 0 {
		t.Fatalf("alarm %s: period %v, %v datapoints", alarm, period, datapoints)
	}
	return lag + time.Duration(period*datapoints)*time.Second + evaluation
}

var (
	canaryType = regexp.MustCompile(`^Canary(\d+)Percent(\d+)Minutes$`)
	linearType = regexp.MustCompile(`^Linear(\d+)PercentEvery(\d+)Minutes?$`)
)

// watched is how long CodeDeploy watches the alarms with the new version
// taking traffic before it has all of it: a canary's first step; a linear
// deployment's steps before the last.
func watched(t *testing.T, deploymentType string) time.Duration {
	t.Helper()
	if m := canaryType.FindStringSubmatch(deploymentType); m != nil {
		minutes, _ := strconv.Atoi(m[2])
		return time.Duration(minutes) * time.Minute
	}
	if m := linearType.FindStringSubmatch(deploymentType); m != nil {
		percent, _ := strconv.Atoi(m[1])
		minutes, _ := strconv.Atoi(m[2])
		return time.Duration((100/percent-1)*minutes) * time.Minute
	}
	if deploymentType == "AllAtOnce" {
		return 0
	}
	t.Fatalf("DeploymentType %s: not a configuration this test knows", deploymentType)
	return 0
}

// A gradual deployment outlasts its rollback alarms: a version that fails
// from its first request still rolls back before it takes all the
// traffic. The arithmetic: DeploymentType's description in template.yaml.
// The default environment of samconfig.toml deploys AllAtOnce: a
// development stack, where no canary waits.
func TestTheCanaryOutlastsItsRollbackAlarms(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	sets := paramSets(t, false)
	var need time.Duration
	var slowest string
	for _, fn := range tpl.functions(t) {
		var p struct {
			DeploymentPreference *struct {
				Type   string   `json:"Type"`
				Alarms []string `json:"Alarms"`
			} `json:"DeploymentPreference"`
		}
		tpl.props(t, fn, &p)
		if p.DeploymentPreference == nil || p.DeploymentPreference.Type != refPlaceholder("DeploymentType") {
			continue
		}
		for _, ref := range p.DeploymentPreference.Alarms {
			alarm := resourceName(ref)
			if d := detection(t, tpl, alarm) + firstRequest; d > need {
				need, slowest = d, alarm
			}
		}
	}
	if need == 0 {
		t.Fatal("no rollback alarm of a DeploymentType deployment")
	}
	for _, set := range []string{"defaults", "samconfig.prod"} {
		typ := sets[set].Values["DeploymentType"]
		if w := watched(t, typ); w < need {
			t.Errorf("%s: %s watches the new version for %s; %s needs %s to fire", set, typ, w, slowest, need)
		}
	}
	if typ := sets["samconfig.default"].Values["DeploymentType"]; typ != "AllAtOnce" {
		t.Errorf("samconfig.default deploys %s; this test knows it as the development stack's AllAtOnce", typ)
	}
	// The check can fail: a canary of 5 minutes is too short.
	if w := watched(t, "Canary10Percent5Minutes"); w >= need {
		t.Errorf("Canary10Percent5Minutes (%s) passes, though %s needs %s", w, slowest, need)
	}
	t.Logf("the slowest rollback alarm, %s, needs %s", slowest, need)
}
