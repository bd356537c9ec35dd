package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/httpapi"
)

// Tests of template.yaml as SAM translates it, for every parameter set:
// what CloudFormation is asked to create, not the YAML.

// refNames returns every name v refers to: a Ref, the resource of an
// Fn::GetAtt, the ${X} and ${X.Y} of an Fn::Sub (less its own variables),
// wherever they are.
func refNames(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				switch k {
				case "Ref":
					out = append(out, fmt.Sprint(e))
				case "Fn::GetAtt":
					if a, ok := e.([]any); ok && len(a) > 0 {
						out = append(out, fmt.Sprint(a[0]))
					} else {
						out = append(out, strings.SplitN(fmt.Sprint(e), ".", 2)[0])
					}
				case "Fn::Sub":
					s, _ := e.(string)
					var vars map[string]any
					if a, ok := e.([]any); ok && len(a) == 2 {
						s, _ = a[0].(string)
						vars, _ = a[1].(map[string]any)
					}
					for _, m := range subVar.FindAllStringSubmatch(s, -1) {
						if name := strings.SplitN(m[1], ".", 2)[0]; vars[name] == nil {
							out = append(out, name)
						}
					}
				}
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

// references returns the logical ids of the resources that v refers to
// (CloudFormation orders resources by every reference, UpdatePolicy
// included).
func (c *cfnTemplate) references(v any) []string {
	var out []string
	for _, name := range refNames(v) {
		if _, ok := c.Resources[name]; ok && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// dependencies maps each resource to those it refers to or DependsOn.
func (c *cfnTemplate) dependencies() map[string][]string {
	deps := map[string][]string{}
	for name, r := range c.Resources {
		d := c.references(map[string]any{"Properties": r.Properties, "UpdatePolicy": r.UpdatePolicy})
		switch on := r.DependsOn.(type) {
		case string:
			d = append(d, on)
		case []any:
			for _, x := range on {
				d = append(d, fmt.Sprint(x))
			}
		}
		sort.Strings(d)
		deps[name] = d
	}
	return deps
}

// cycle returns a dependency cycle (its resources in order, the first
// repeated at the end), or nil.
func cycle(deps map[string][]string) []string {
	const (
		unseen = iota
		onPath
		done
	)
	state := map[string]int{}
	var path []string
	var visit func(string) []string
	visit = func(n string) []string {
		state[n] = onPath
		path = append(path, n)
		for _, d := range deps[n] {
			switch state[d] {
			case onPath:
				i := slices.Index(path, d)
				return append(slices.Clone(path[i:]), d)
			case unseen:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return nil
	}
	names := make([]string, 0, len(deps))
	for n := range deps {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if state[n] == unseen {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

// CloudFormation refuses a template whose resources refer to each other in
// a circle ("Circular dependency between resources"), and it counts the
// references in an alias's UpdatePolicy: the deployment group, and through
// its alarms whatever they name.
func TestTranslationHasNoDependencyCycle(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, set string) {
		c := translation(t, set)
		if cyc := cycle(c.dependencies()); cyc != nil {
			t.Errorf("dependency cycle: %s", strings.Join(cyc, " → "))
		}
	})
	// The check can fail: an alarm on the HTTP API's 5xx among the API's
	// rollback alarms closes the cycle of the stack's first template.
	t.Run("the API's 5xx alarm as a rollback alarm", func(t *testing.T) {
		t.Parallel()
		c := translation(t, "defaults")
		dg := c.resource(t, "ApiFunctionDeploymentGroup")
		alarms := dg.Properties["AlarmConfiguration"].(map[string]any)
		alarms["Alarms"] = append(alarms["Alarms"].([]any), map[string]any{"Name": map[string]any{"Ref": "ApiServerErrorsAlarm"}})
		cyc := cycle(c.dependencies())
		if cyc == nil || !slices.Contains(cyc, "ApiFunctionAliaslive") || !slices.Contains(cyc, "HttpApi") {
			t.Errorf("no cycle through the alias and the HTTP API found: %v", cyc)
		}
	})
}

// cfn-lint (`make lint`) sees the same cycle in the template itself.
func TestCfnLintRefusesACycle(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	old := "          - !Ref ApiNewVersionServerErrorsAlarm\n"
	mutated := strings.Replace(string(data), old, old+"          - !Ref ApiServerErrorsAlarm\n", 1)
	if mutated == string(data) {
		t.Fatalf("%q not found in template.yaml; update this test", old)
	}
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, []byte(mutated), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pythonForTools(), "-c", "import sys; from cfnlint.runner import main; sys.exit(main())", "--", path)
	out, err := cmd.CombinedOutput()
	if err == nil || !regexp.MustCompile(`(?m)^E3004 Circular Dependencies`).Match(out) {
		t.Errorf("cfn-lint on the template with the cycle: %v\n%s", err, out)
	}
}

// The HTTP API's CORS configuration becomes an x-amazon-apigateway-cors
// object in the API's OpenAPI body: origins as a list, with the methods,
// headers and max age of internal/httpapi; without origins, none at all.
func TestCorsTranslatesToAnObject(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, set string) {
		c := translation(t, set)
		body, _ := c.resource(t, "HttpApi").Properties["Body"].(map[string]any)
		cors, present := c.eval(t, body).(map[string]any)["x-amazon-apigateway-cors"]
		origins := c.Values["CorsAllowedOrigins"]
		if origins == "" {
			if present {
				t.Errorf("CORS %v without origins; want none", cors)
			}
			return
		}
		obj, ok := cors.(map[string]any)
		if !ok {
			t.Fatalf("x-amazon-apigateway-cors = %#v; want an object", cors)
		}
		got := map[string]string{}
		for k, v := range obj {
			got[k] = fmt.Sprint(v)
		}
		lower := func(hs []string) string {
			out := slices.Clone(hs)
			for i := range out {
				out[i] = strings.ToLower(out[i])
			}
			return fmt.Sprint(out)
		}
		want := map[string]string{
			"allowOrigins":  fmt.Sprint(strings.Split(origins, ",")),
			"allowMethods":  "[GET POST PATCH DELETE OPTIONS]",
			"allowHeaders":  lower(httpapi.CORSAllowHeaders),
			"exposeHeaders": lower(httpapi.CORSExposeHeaders),
			"maxAge":        "600",
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("CORS %s = %s; want %s", k, got[k], w)
			}
		}
		if len(got) != len(want) {
			t.Errorf("CORS %v; want exactly %v", got, want)
		}
	})
}

// metricRead is one metric an alarm reads.
type metricRead struct {
	Namespace, MetricName string
	Dimensions            map[string]any
}

// metricsRead lists the metrics of an alarm: its own, or those of its
// metric math.
func metricsRead(props map[string]any) []metricRead {
	dims := func(v any) map[string]any {
		out := map[string]any{}
		list, _ := v.([]any)
		for _, d := range list {
			m, _ := d.(map[string]any)
			out[fmt.Sprint(m["Name"])] = m["Value"]
		}
		return out
	}
	if ns, ok := props["Namespace"].(string); ok {
		return []metricRead{{ns, fmt.Sprint(props["MetricName"]), dims(props["Dimensions"])}}
	}
	var out []metricRead
	list, _ := props["Metrics"].([]any)
	for _, q := range list {
		stat, _ := q.(map[string]any)["MetricStat"].(map[string]any)
		m, _ := stat["Metric"].(map[string]any)
		if m != nil {
			out = append(out, metricRead{fmt.Sprint(m["Namespace"]), fmt.Sprint(m["MetricName"]), dims(m["Dimensions"])})
		}
	}
	return out
}

// rollbackAlarms are, per function, the alarms CodeDeploy watches while
// it shifts traffic to the function's new version, and what each reads.
var rollbackAlarms = map[string][]string{
	"ApiFunction":     {"ApiNewVersionErrorsAlarm", "ApiNewVersionServerErrorsAlarm"},
	"WorkerFunction":  {"WorkerNewVersionErrorsAlarm", "WorkerNewVersionFailedRecordsAlarm", "WorkerNewVersionStoreErrorsAlarm"},
	"SweeperFunction": nil, // AllAtOnce: nothing to watch
	// Failed attempts are the receivers' doing: only the version's own
	// failures roll it back.
	"WebhookFunction": {"WebhookNewVersionErrorsAlarm", "WebhookNewVersionStoreErrorsAlarm"},
}

// Every deployment group rolls back on alarms that read the new version
// alone (a dimension with the number of the version the alias moves to),
// after the PreTraffic hook, with the least CodeDeploy role.
func TestRollbackAlarmsWatchTheNewVersion(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, set string) {
		c := translation(t, set)
		groups := c.ofType("AWS::CodeDeploy::DeploymentGroup")
		var wantGroups []string
		for fn := range rollbackAlarms {
			wantGroups = append(wantGroups, fn+"DeploymentGroup")
		}
		sort.Strings(wantGroups)
		if !slices.Equal(groups, wantGroups) {
			t.Errorf("deployment groups %v; want %v", groups, wantGroups)
		}
		for fn, wantAlarms := range rollbackAlarms {
			alias := c.resource(t, fn+"Aliaslive")
			version, _ := alias.Properties["FunctionVersion"].(map[string]any)["Fn::GetAtt"].([]any)
			if len(version) != 2 || c.resource(t, fmt.Sprint(version[0])).Type != "AWS::Lambda::Version" {
				t.Fatalf("%s's alias points at %v; want a version's Version", fn, alias.Properties["FunctionVersion"])
			}
			newVersion := getAttPlaceholder(fmt.Sprint(version[0]), "Version")

			update, _ := alias.UpdatePolicy["CodeDeployLambdaAliasUpdate"].(map[string]any)
			if fmt.Sprint(update["DeploymentGroupName"]) != fmt.Sprint(map[string]any{"Ref": fn + "DeploymentGroup"}) ||
				fmt.Sprint(update["BeforeAllowTrafficHook"]) != fmt.Sprint(map[string]any{"Ref": "PreTrafficHookFunction"}) {
				t.Errorf("%s alias UpdatePolicy %v; want its deployment group and the PreTraffic hook", fn, alias.UpdatePolicy)
			}

			dg := c.eval(t, c.resource(t, fn+"DeploymentGroup").Properties).(map[string]any)
			if dg["ServiceRoleArn"] != getAttPlaceholder("CodeDeployRole", "Arn") {
				t.Errorf("%s's deployment group runs as %v; want CodeDeployRole", fn, dg["ServiceRoleArn"])
			}
			var watched []string
			if cfg, ok := dg["AlarmConfiguration"].(map[string]any); ok && cfg["Enabled"] == true {
				for _, a := range cfg["Alarms"].([]any) {
					watched = append(watched, resourceName(fmt.Sprint(a.(map[string]any)["Name"])))
				}
			}
			sort.Strings(watched)
			if !slices.Equal(watched, wantAlarms) {
				t.Errorf("%s rolls back on %v; want %v", fn, watched, wantAlarms)
			}
			for _, name := range watched {
				props := c.eval(t, c.resource(t, name).Properties).(map[string]any)
				reads := metricsRead(props)
				if len(reads) == 0 {
					t.Errorf("%s reads no metric", name)
				}
				for _, m := range reads {
					v, byVersion := m.Dimensions["ExecutedVersion"]
					if !byVersion {
						v, byVersion = m.Dimensions["FunctionVersion"]
					}
					if !byVersion || v != newVersion {
						t.Errorf("%s reads %s %s %v; want it by the new version (%s)", name, m.Namespace, m.MetricName, m.Dimensions, newVersion)
					}
				}
			}
		}
	})
}

// Each alarm that reads a function's version reads a metric the code
// writes with that dimension (the emulator tests capture the lines).
func versionAlarmMetrics(t *testing.T) map[string]metricRead {
	t.Helper()
	c := translation(t, "defaults")
	out := map[string]metricRead{}
	for _, name := range c.ofType("AWS::CloudWatch::Alarm") {
		for _, m := range metricsRead(c.eval(t, c.resource(t, name).Properties).(map[string]any)) {
			if _, ok := m.Dimensions["FunctionVersion"]; ok {
				out[name+" "+m.MetricName] = m
			}
		}
	}
	return out
}

// moto's CloudFormation creates every parameter set's translated stack
// (CREATE_COMPLETE), with a stand-in for each resource type moto lacks that
// checked the resource against the type's schema.
func TestDeployRehearsal(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, set string) {
		r := rehearsal(t, set)
		c := translation(t, set)
		if r.Status != "CREATE_COMPLETE" {
			t.Fatalf("stack status %s", r.Status)
		}
		var want []string
		for name := range c.Resources {
			if c.created(t, name) {
				want = append(want, name)
			}
		}
		sort.Strings(want)
		var got []string
		standIns := map[string]bool{}
		for _, s := range r.StandIns {
			standIns[s.LogicalID] = true
		}
		for _, res := range r.Resources {
			got = append(got, res[0])
			if res[2] != "CREATE_COMPLETE" {
				t.Errorf("%s (%s): %s", res[0], res[1], res[2])
			}
			if slices.Contains(r.StandInTypes, res[1]) != standIns[res[0]] {
				t.Errorf("%s (%s): created by a stand-in %v, but the type has one: %v", res[0], res[1], standIns[res[0]], slices.Contains(r.StandInTypes, res[1]))
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("created %v;\nthe translation has %v", got, want)
		}
		t.Logf("%s: %s, %d resources (%d through stand-ins checked against cfn-lint's schemas)", set, r.Status, len(got), len(r.StandIns))
	})
}

// The samconfig.toml environments hold REPLACE_ME where an account's own
// value belongs, and CloudFormation's parameter checks refuse every one of
// them; filled in, the environments pass.
func TestSamconfigPlaceholdersFailTheParameterChecks(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(samconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	placeholder := regexp.MustCompile(`([A-Za-z0-9]+)=\\"[^"\\]*REPLACE_ME`)
	raw, filled := paramSets(t, true), paramSets(t, false)
	for _, env := range []string{"default", "prod"} {
		var want []string
		section := samconfigSections(t)[env+".deploy.parameters"]
		for _, m := range placeholder.FindAllStringSubmatch(section, -1) {
			want = append(want, m[1])
		}
		if len(want) == 0 {
			t.Errorf("[%s] has no REPLACE_ME", env)
		}
		refused := map[string]bool{}
		for _, p := range raw["samconfig."+env].Problems {
			refused[strings.SplitN(p, ":", 2)[0]] = true
		}
		var got []string
		for name := range refused {
			got = append(got, name)
		}
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("[%s]: the parameter checks refuse %v; want exactly the placeholders %v", env, got, want)
		}
		if p := filled["samconfig."+env].Problems; len(p) != 0 {
			t.Errorf("[%s] with examples for its placeholders: %v", env, p)
		}
	}
	if p := filled["defaults"].Problems; len(p) != 0 {
		t.Errorf("the template's defaults: %v", p)
	}
	if !strings.Contains(string(data), "--parameter-overrides") {
		t.Error("samconfig.toml does not warn against --parameter-overrides")
	}
	// No deploy command the documents give replaces an environment's
	// parameters: SAM CLI's --parameter-overrides drops every one of
	// samconfig.toml's that it does not repeat.
	for _, doc := range []string{repoRoot + "/README.md", repoRoot + "/docs/deploying.md", templatePath} {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			if regexp.MustCompile(`sam deploy\b[^|]*--parameter-overrides`).MatchString(line) {
				t.Errorf("%s:%d: %s", filepath.Base(doc), i+1, strings.TrimSpace(line))
			}
		}
	}
}

// Lambda's log-level filter, as documented
// (https://docs.aws.amazon.com/lambda/latest/dg/monitoring-cloudwatchlogs-log-level.html):
// a JSON line's "level" names its level, and a line without a valid one
// counts as INFO; Lambda sends the lines at or above the function's
// ApplicationLogLevel.
var lambdaLevels = []string{"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"}

func lambdaKeeps(t *testing.T, line []byte, applicationLogLevel string) bool {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("not a JSON line: %s", line)
	}
	level := "INFO"
	if l, ok := m["level"].(string); ok && slices.Contains(lambdaLevels, strings.ToUpper(l)) {
		level = strings.ToUpper(l)
	}
	threshold := slices.Index(lambdaLevels, applicationLogLevel)
	if threshold < 0 {
		t.Fatalf("ApplicationLogLevel %q is not a Lambda level", applicationLogLevel)
	}
	return slices.Index(lambdaLevels, level) >= threshold
}
