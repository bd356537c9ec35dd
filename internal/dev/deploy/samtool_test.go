package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// The tests of what AWS deploys read the template through AWS's own tools,
// driven by .ci/cfn/samtool.py: aws-sam-translator (the translation that
// CloudFormation's AWS::Serverless transform and SAM CLI make), moto's
// CloudFormation (a deploy rehearsal), cfn-lint. samtool.py runs under the
// python with the versions pinned in .ci/cfn/requirements.txt: `make test`
// finds or installs it (.ci/cfn/pytools.sh) and passes it as
// $JOBBOARD_PYTHON; without it, the machine's python3.

const samtoolPath = repoRoot + "/.ci/cfn/samtool.py"

// The parameter sets samtool.py knows: the template's defaults, and each
// environment of samconfig.toml.
var setNames = []string{"defaults", "samconfig.default", "samconfig.prod"}

// eachSet runs test for every parameter set, as parallel subtests.
func eachSet(t *testing.T, test func(t *testing.T, set string)) {
	t.Helper()
	for _, set := range setNames {
		t.Run(set, func(t *testing.T) {
			t.Parallel()
			test(t, set)
		})
	}
}

func pythonForTools() string {
	if p := os.Getenv("JOBBOARD_PYTHON"); p != "" {
		return p
	}
	return "python3"
}

// runSamtool runs samtool.py with args and returns its standard output.
func runSamtool(args ...string) ([]byte, error) {
	cmd := exec.Command(pythonForTools(), append([]string{samtoolPath}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w\n%s\n(the pinned tools come from `make pytools`; `make test` passes them as JOBBOARD_PYTHON)",
			filepath.Base(samtoolPath), strings.Join(args, " "), err, tail(stderr.String(), 4000))
	}
	return stdout.Bytes(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// cached runs samtool.py once per distinct args in the test process and
// decodes its output into a fresh T for every caller.
var samtoolCache sync.Map // key → func() ([]byte, error)

func cachedSamtool(t testing.TB, v any, args ...string) {
	t.Helper()
	key := strings.Join(args, "\x00")
	once, _ := samtoolCache.LoadOrStore(key, sync.OnceValues(func() ([]byte, error) { return runSamtool(args...) }))
	out, err := once.(func() ([]byte, error))()
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		t.Fatalf("samtool %v: decode: %v", args, err)
	}
}

// paramSet is one deployment's parameter values (all of them, lists
// comma-separated) and what CloudFormation's parameter checks would say.
type paramSet struct {
	Values   map[string]string `json:"values"`
	Problems []string          `json:"problems"`
}

// paramSets returns the sets with samconfig.toml's placeholders filled
// with examples, or left as they are (raw).
func paramSets(t testing.TB, raw bool) map[string]paramSet {
	t.Helper()
	args := []string{"paramsets"}
	if raw {
		args = append(args, "--raw")
	}
	var sets map[string]paramSet
	cachedSamtool(t, &sets, args...)
	var names []string
	for name := range sets {
		names = append(names, name)
	}
	sort.Strings(names)
	if fmt.Sprint(names) != fmt.Sprint(setNames) {
		t.Fatalf("parameter sets %v; these tests know %v", names, setNames)
	}
	return sets
}

// cfnTemplate is the template as SAM translates it, for one parameter set.
type cfnTemplate struct {
	Values     map[string]string
	Parameters map[string]parameter       `json:"Parameters"`
	Conditions map[string]any             `json:"Conditions"`
	Resources  map[string]cfnResource     `json:"Resources"`
	Outputs    map[string]json.RawMessage `json:"Outputs"`
}

type cfnResource struct {
	Type                string         `json:"Type"`
	Condition           string         `json:"Condition"`
	DependsOn           any            `json:"DependsOn"`
	Properties          map[string]any `json:"Properties"`
	UpdatePolicy        map[string]any `json:"UpdatePolicy"`
	DeletionPolicy      string         `json:"DeletionPolicy"`
	UpdateReplacePolicy string         `json:"UpdateReplacePolicy"`
}

// translation returns set's template as SAM translates it, with params
// ("Key=Value") on top of the set's values.
func translation(t testing.TB, set string, params ...string) *cfnTemplate {
	t.Helper()
	args := []string{"translate", set}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	var out struct {
		Values   map[string]string `json:"values"`
		Template cfnTemplate       `json:"template"`
	}
	cachedSamtool(t, &out, args...)
	out.Template.Values = out.Values
	return &out.Template
}

// ofType lists the logical ids of the resources of type typ, sorted.
func (c *cfnTemplate) ofType(typ string) []string {
	var names []string
	for name, r := range c.Resources {
		if r.Type == typ {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// resource returns the resource name, failing t when there is none.
func (c *cfnTemplate) resource(t testing.TB, name string) cfnResource {
	t.Helper()
	r, ok := c.Resources[name]
	if !ok {
		t.Fatalf("the translation has no resource %s", name)
	}
	return r
}

// created reports whether the resource is created for the set's values
// (no condition, or a true one).
func (c *cfnTemplate) created(t testing.TB, name string) bool {
	t.Helper()
	r := c.resource(t, name)
	return r.Condition == "" || c.condition(t, r.Condition)
}

// condition evaluates the condition name for the set's values.
func (c *cfnTemplate) condition(t testing.TB, name string) bool {
	t.Helper()
	def, ok := c.Conditions[name]
	if !ok {
		t.Fatalf("no condition %s", name)
	}
	b, ok := c.eval(t, def).(bool)
	if !ok {
		t.Fatalf("condition %s is not a boolean: %v", name, def)
	}
	return b
}

// noValue stands for AWS::NoValue while eval works; it never escapes.
type noValueT struct{}

var noValue = noValueT{}

// eval evaluates v as CloudFormation would for the set's values, as far as
// these tests need: conditions and Fn::If, Ref to a parameter (a list for a
// list parameter) or to AWS::NoValue (the member disappears), Fn::Equals,
// Fn::Not, Fn::And, Fn::Or, Fn::Join, Fn::Split, Fn::Select, and Fn::Sub of
// parameters. A Ref to a resource becomes "${Ref:X}", Fn::GetAtt
// "${GetAtt:X.Y}", and a Sub keeps the names it cannot resolve as ${X}.
func (c *cfnTemplate) eval(t testing.TB, v any) any {
	t.Helper()
	switch x := v.(type) {
	case []any:
		out := []any{}
		for _, e := range x {
			if r := c.eval(t, e); r != noValue {
				out = append(out, r)
			}
		}
		return out
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if r, ok := c.intrinsic(t, k, arg); ok {
					return r
				}
			}
		}
		out := map[string]any{}
		for k, e := range x {
			if r := c.eval(t, e); r != noValue {
				out[k] = r
			}
		}
		return out
	}
	return v
}

func (c *cfnTemplate) intrinsic(t testing.TB, name string, arg any) (any, bool) {
	t.Helper()
	args, _ := arg.([]any)
	str := func(v any) string { return fmt.Sprint(c.eval(t, v)) }
	switch name {
	case "Ref":
		ref, _ := arg.(string)
		if ref == "AWS::NoValue" {
			return noValue, true
		}
		if v, ok := c.Values[ref]; ok {
			if p := c.Parameters[ref]; p.Type == "CommaDelimitedList" || strings.HasPrefix(p.Type, "List<") {
				var list []any
				for _, s := range strings.Split(v, ",") {
					list = append(list, s)
				}
				return list, true
			}
			return v, true
		}
		return refPlaceholder(ref), true
	case "Fn::GetAtt":
		var parts []string
		switch a := arg.(type) {
		case string:
			parts = strings.SplitN(a, ".", 2)
		case []any:
			for _, p := range a {
				parts = append(parts, fmt.Sprint(p))
			}
		}
		if len(parts) != 2 {
			t.Fatalf("malformed Fn::GetAtt %v", arg)
		}
		return getAttPlaceholder(parts[0], parts[1]), true
	case "Condition":
		return c.condition(t, fmt.Sprint(arg)), true
	case "Fn::If":
		if len(args) != 3 {
			t.Fatalf("malformed Fn::If %v", arg)
		}
		if c.condition(t, fmt.Sprint(args[0])) {
			return c.eval(t, args[1]), true
		}
		return c.eval(t, args[2]), true
	case "Fn::Equals":
		return len(args) == 2 && str(args[0]) == str(args[1]), true
	case "Fn::Not":
		b, _ := c.eval(t, args[0]).(bool)
		return !b, true
	case "Fn::And", "Fn::Or":
		and := name == "Fn::And"
		for _, a := range args {
			if b, _ := c.eval(t, a).(bool); b != and {
				return !and, true
			}
		}
		return and, true
	case "Fn::Join":
		var parts []string
		for _, e := range c.eval(t, args[1]).([]any) {
			parts = append(parts, fmt.Sprint(e))
		}
		return strings.Join(parts, str(args[0])), true
	case "Fn::Split":
		var out []any
		for _, s := range strings.Split(str(args[1]), str(args[0])) {
			out = append(out, s)
		}
		return out, true
	case "Fn::Select":
		list, _ := c.eval(t, args[1]).([]any)
		var i int
		if _, err := fmt.Sscan(str(args[0]), &i); err != nil || i >= len(list) {
			t.Fatalf("Fn::Select %v out of range", arg)
		}
		return list[i], true
	case "Fn::Sub":
		s, ok := arg.(string)
		vars := map[string]any{}
		if len(args) == 2 {
			s, ok = args[0].(string)
			vars, _ = args[1].(map[string]any)
		}
		if !ok {
			t.Fatalf("malformed Fn::Sub %v", arg)
		}
		return subVar.ReplaceAllStringFunc(s, func(m string) string {
			name := m[2 : len(m)-1]
			if v, ok := vars[name]; ok {
				return fmt.Sprint(c.eval(t, v))
			}
			if v, ok := c.Values[name]; ok {
				return v
			}
			return m
		}), true
	}
	return nil, false
}

// rehearsalReport is what moto's CloudFormation created from a set's
// translation (see samtool.py's rehearse).
type rehearsalReport struct {
	Set       string     `json:"set"`
	Status    string     `json:"status"`
	Resources [][]string `json:"resources"` // logical id, type, status
	StandIns  []struct {
		LogicalID string   `json:"LogicalId"`
		Type      string   `json:"Type"`
		Required  []string `json:"Required"`
	} `json:"stand_ins"`
	StandInTypes []string                     `json:"stand_in_types"`
	Outputs      map[string]string            `json:"outputs"`
	Functions    map[string]rehearsedFunction `json:"functions"`
	Roles        map[string]rehearsedRole     `json:"roles"`
	// The stack's status when it was created but for its custom
	// resources, and what became of each of those.
	StatusBeforeCustomResources string                    `json:"status_before_custom_resources"`
	CustomResources             []rehearsedCustomResource `json:"custom_resources"`
	// The schema version of the database the migration function ran
	// against (read by rehearsal after the run).
	SchemaVersionInDatabase int32 `json:"-"`
}

// rehearsedCustomResource is a custom resource's request as moto's
// CloudFormation made it, the function it went to (its logical id), what
// the function answered the invocation, and the answers moto received at
// the request's ResponseURL.
type rehearsedCustomResource struct {
	LogicalResourceID string `json:"LogicalResourceId"`
	ResourceType      string
	Function          string
	Request           struct {
		RequestType        string
		ServiceToken       string
		ResourceType       string
		LogicalResourceID  string `json:"LogicalResourceId"`
		StackID            string `json:"StackId"`
		ResourceProperties map[string]any
	}
	Result  any
	Answers []struct {
		Method, ContentType string
		Bytes               int
		Body                struct {
			Status, Reason     string
			PhysicalResourceID string `json:"PhysicalResourceId"`
			StackID            string `json:"StackId"`
			LogicalResourceID  string `json:"LogicalResourceId"`
			Data               map[string]any
		}
	}
}

type rehearsedFunction struct {
	FunctionName                 string         `json:"FunctionName"`
	Role                         string         `json:"Role"`
	Environment                  map[string]any `json:"Environment"`
	ReservedConcurrentExecutions *int           `json:"ReservedConcurrentExecutions"`
	SubnetIDs                    []string       `json:"SubnetIds"`
}

type rehearsedRole struct {
	Inline  map[string]policyDocument `json:"Inline"`
	Managed map[string]policyDocument `json:"Managed"`
}

type policyDocument struct {
	Statement []map[string]any `json:"Statement"`
}

// rehearsals holds each rehearsal, made once per test process.
var rehearsals sync.Map // set and params → *rehearsed

type rehearsed struct {
	once   sync.Once
	report rehearsalReport
	err    error
}

// rehearsal creates set's translated stack in moto, with params
// ("Key=Value") on top of the set's values, once per test process (the
// first caller's t holds what it runs on). The stack's custom
// resource invokes the migration function: it runs under the Lambda
// emulator, against an empty database of its own.
func rehearsal(t testing.TB, set string, params ...string) *rehearsalReport {
	t.Helper()
	v, _ := rehearsals.LoadOrStore(strings.Join(append([]string{set}, params...), "\x00"), &rehearsed{})
	r := v.(*rehearsed)
	r.once.Do(func() {
		// Stays if rehearse stops t (a failed build or start).
		r.err = fmt.Errorf("the rehearsal of %s did not finish: see the test that ran it", set)
		r.err = rehearse(t, set, params, &r.report)
	})
	if r.err != nil {
		t.Fatal(r.err)
	}
	report := r.report
	return &report
}

func rehearse(t testing.TB, set string, params []string, report *rehearsalReport) error {
	bins := buildBootstraps(t, loadTemplate(t), "MigrateFunction")
	db := pgtest.NewEmptyURL(t)
	migrate := startEmulator(t, rieBinary(t), "MigrateFunction", bins["MigrateFunction"], map[string]string{
		"DATABASE_URL": db, "LOG_LEVEL": "INFO", "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_LAMBDA_FUNCTION_TIMEOUT": "120",
	})
	args := []string{"rehearse", set, "--invoke", "MigrateFunction=http://" + migrate.invokeAt}
	for _, p := range params {
		args = append(args, "--param", p)
	}
	out, err := runSamtool(args...)
	if err != nil {
		return fmt.Errorf("%w\nthe migration function's output:\n%s", err, migrate.output.String())
	}
	if err := json.Unmarshal(out, report); err != nil {
		return fmt.Errorf("samtool rehearse %s: decode: %w", set, err)
	}
	report.SchemaVersionInDatabase = pgtest.SchemaVersion(t, db)
	return nil
}
