package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/serverless"
	"github.com/awslabs/goformation/v7/intrinsics"
)

// Paths from this package's folder to the files it checks.
const (
	repoRoot     = "../../.."
	templatePath = repoRoot + "/template.yaml"
)

// Intrinsic functions become placeholder strings, because the tests need to
// know what a value refers to, not what it resolves to in some account:
//
//	!Ref X          → "${Ref:X}" (["${Ref:X}"] for a list parameter)
//	!GetAtt X.Y     → "${GetAtt:X.Y}"
//	!Sub "a-${X}"   → "a-${X}" (the template string itself)
//
// goformation resolves Ref only for parameters and GetAtt never, hence the
// overrides.
func refPlaceholder(name string) string { return "${Ref:" + name + "}" }

func getAttPlaceholder(resource, attr string) string {
	return "${GetAtt:" + resource + "." + attr + "}"
}

// samTemplate is template.yaml read twice: typed by goformation, and as the
// raw processed JSON for what goformation lacks (SQS event properties,
// LoggingConfig, plain CloudFormation resources' nested properties,
// conditions).
type samTemplate struct {
	typed *cloudformation.Template
	raw   rawTemplate
}

type rawTemplate struct {
	Parameters map[string]parameter       `json:"Parameters"`
	Conditions map[string]json.RawMessage `json:"Conditions"`
	Globals    struct {
		Function json.RawMessage `json:"Function"`
	} `json:"Globals"`
	Resources map[string]rawResource `json:"Resources"`
	Outputs   map[string]rawOutput   `json:"Outputs"`
	// Document is the whole processed template, for walks.
	Document map[string]any `json:"-"`
}

type parameter struct {
	Type           string   `json:"Type"`
	Default        any      `json:"Default"`
	MinValue       *float64 `json:"MinValue"`
	MaxValue       *float64 `json:"MaxValue"`
	AllowedValues  []any    `json:"AllowedValues"`
	AllowedPattern string   `json:"AllowedPattern"`
}

type rawResource struct {
	Type       string          `json:"Type"`
	Condition  string          `json:"Condition"`
	Metadata   map[string]any  `json:"Metadata"`
	Properties json.RawMessage `json:"Properties"`
}

type rawOutput struct {
	Value any `json:"Value"`
}

// functionProps are the parts of an AWS::Serverless::Function that
// goformation does not give back.
type functionProps struct {
	Timeout       int             `json:"Timeout"`
	LoggingConfig json.RawMessage `json:"LoggingConfig"`
	Environment   struct {
		// Variables are strings, or an intrinsic the raw view keeps
		// (Fn::If).
		Variables map[string]any `json:"Variables"`
	} `json:"Environment"`
	Policies []any `json:"Policies"`
	Events   map[string]struct {
		Type       string          `json:"Type"`
		Properties json.RawMessage `json:"Properties"`
	} `json:"Events"`
}

// sqsEventProps: goformation's SQS event has only BatchSize, Enabled and
// Queue, and drops all three when FunctionResponseTypes is present.
type sqsEventProps struct {
	Queue                          string   `json:"Queue"`
	BatchSize                      any      `json:"BatchSize"`
	MaximumBatchingWindowInSeconds any      `json:"MaximumBatchingWindowInSeconds"`
	FunctionResponseTypes          []string `json:"FunctionResponseTypes"`
	ScalingConfig                  *struct {
		MaximumConcurrency any `json:"MaximumConcurrency"`
	} `json:"ScalingConfig"`
}

type queueProps struct {
	QueueName              string `json:"QueueName"`
	VisibilityTimeout      *int   `json:"VisibilityTimeout"`
	MessageRetentionPeriod *int   `json:"MessageRetentionPeriod"`
	SqsManagedSseEnabled   bool   `json:"SqsManagedSseEnabled"`
	RedrivePolicy          *struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	} `json:"RedrivePolicy"`
	RedriveAllowPolicy *struct {
		RedrivePermission  string   `json:"redrivePermission"`
		SourceQueueArnList []string `json:"sourceQueueArnList"`
	} `json:"RedriveAllowPolicy"`
}

type alarmProps struct {
	Namespace          string `json:"Namespace"`
	MetricName         string `json:"MetricName"`
	ComparisonOperator string `json:"ComparisonOperator"`
	Threshold          any    `json:"Threshold"`
	Dimensions         []struct {
		Name  string `json:"Name"`
		Value string `json:"Value"`
	} `json:"Dimensions"`
	AlarmActions json.RawMessage `json:"AlarmActions"`
	OKActions    json.RawMessage `json:"OKActions"`
}

// loadTemplate reads template.yaml. It fails t if the file does not parse.
func loadTemplate(t testing.TB) *samTemplate {
	t.Helper()
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatalf("read template: %v", err)
	}
	return parseTemplate(t, data)
}

func parseTemplate(t testing.TB, data []byte) *samTemplate {
	t.Helper()
	tpl := &samTemplate{}
	overrides := map[string]intrinsics.IntrinsicHandler{
		"Ref": func(_ string, input, doc any) any {
			name, _ := input.(string)
			if isListParameter(doc, name) {
				return []any{refPlaceholder(name)}
			}
			return refPlaceholder(name)
		},
		"Fn::GetAtt": func(_ string, input, _ any) any {
			var parts []string
			switch v := input.(type) {
			case string:
				parts = strings.SplitN(v, ".", 2)
			case []any:
				for _, p := range v {
					s, _ := p.(string)
					parts = append(parts, s)
				}
			}
			if len(parts) != 2 {
				t.Errorf("malformed Fn::GetAtt %v", input)
				return nil
			}
			return getAttPlaceholder(parts[0], parts[1])
		},
		// The template string, its own variables (a map's) put in.
		"Fn::Sub": func(_ string, input, _ any) any {
			if s, ok := input.(string); ok {
				return s
			}
			list, _ := input.([]any)
			if len(list) == 2 {
				s, ok := list[0].(string)
				vars, isMap := list[1].(map[string]any)
				if ok && isMap {
					for name, v := range vars {
						s = strings.ReplaceAll(s, "${"+name+"}", fmt.Sprint(v))
					}
					return s
				}
			}
			t.Errorf("malformed Fn::Sub %v", input)
			return nil
		},
	}

	// For goformation's typed structs, Fn::If takes its "true" branch
	// (a VpcConfig struct cannot hold an intrinsic).
	typedOverrides := map[string]intrinsics.IntrinsicHandler{
		// A property that is !Ref AWS::NoValue is absent.
		"Ref": func(name string, input, doc any) any {
			if input == "AWS::NoValue" {
				return nil
			}
			return overrides["Ref"](name, input, doc)
		},
		"Fn::If": func(_ string, input, _ any) any {
			if arr, ok := input.([]any); ok && len(arr) == 3 {
				return arr[1]
			}
			t.Errorf("malformed Fn::If %v", input)
			return nil
		},
	}
	for k, v := range overrides {
		if _, ok := typedOverrides[k]; !ok {
			typedOverrides[k] = v
		}
	}
	typedJSON, err := processYAML(data, &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: typedOverrides})
	if err != nil {
		t.Fatalf("process template intrinsics: %v", err)
	}
	typed, err := goformation.ParseJSONWithOptions(forGoformation(t, typedJSON), &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatalf("goformation: parse template: %v", err)
	}
	tpl.typed = typed

	// The raw view keeps Fn::If as it is, so that conditions can be checked.
	overrides["Fn::If"] = func(_ string, input, _ any) any { return map[string]any{"Fn::If": input} }
	processed, err := processYAML(data, &intrinsics.ProcessorOptions{IntrinsicHandlerOverrides: overrides})
	if err != nil {
		t.Fatalf("process template intrinsics: %v", err)
	}
	if err := json.Unmarshal(processed, &tpl.raw); err != nil {
		t.Fatalf("decode processed template: %v", err)
	}
	if err := json.Unmarshal(processed, &tpl.raw.Document); err != nil {
		t.Fatalf("decode processed template: %v", err)
	}
	return tpl
}

// intrinsicsMu serialises intrinsics.ProcessYAML, which writes a package
// map on every call (a data race between parallel tests otherwise).
var intrinsicsMu sync.Mutex

func processYAML(data []byte, opts *intrinsics.ProcessorOptions) ([]byte, error) {
	intrinsicsMu.Lock()
	defer intrinsicsMu.Unlock()
	return intrinsics.ProcessYAML(data, opts)
}

// goformationLacks are the function properties that goformation v7 does
// not know, or types as a number where the template has a !Ref: it rejects
// them, so they are read from the raw view.
var goformationLacks = []string{"LoggingConfig", "ReservedConcurrentExecutions", "AutoPublishAliasAllProperties"}

// forGoformation keeps the part of the processed template that goformation
// reads (parameters, Globals.Function and the functions) and drops what it
// would reject: plain CloudFormation resources, whose numeric properties are
// placeholders here, and the properties in goformationLacks.
func forGoformation(t testing.TB, processed []byte) []byte {
	t.Helper()
	var doc struct {
		Parameters map[string]any `json:"Parameters"`
		Globals    struct {
			Function map[string]any `json:"Function"`
		} `json:"Globals"`
		Resources map[string]struct {
			Type       string         `json:"Type"`
			Metadata   map[string]any `json:"Metadata,omitempty"`
			Properties map[string]any `json:"Properties"`
		} `json:"Resources"`
	}
	if err := json.Unmarshal(processed, &doc); err != nil {
		t.Fatalf("decode processed template: %v", err)
	}
	for name, r := range doc.Resources {
		if r.Type != "AWS::Serverless::Function" {
			delete(doc.Resources, name)
			continue
		}
		for _, p := range goformationLacks {
			delete(r.Properties, p)
		}
	}
	for _, p := range goformationLacks {
		delete(doc.Globals.Function, p)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("encode template for goformation: %v", err)
	}
	return out
}

// isListParameter reports whether name is a parameter of a list type
// (CommaDelimitedList, List<...>), whose !Ref is a list.
func isListParameter(doc any, name string) bool {
	m, _ := doc.(map[string]any)
	params, _ := m["Parameters"].(map[string]any)
	p, _ := params[name].(map[string]any)
	typ, _ := p["Type"].(string)
	return typ == "CommaDelimitedList" || strings.HasPrefix(typ, "List<")
}

var subVar = regexp.MustCompile(`\$\{([^}!]+)\}`)

// props decodes the Properties of resource name into v.
func (tpl *samTemplate) props(t *testing.T, name string, v any) {
	t.Helper()
	r, ok := tpl.raw.Resources[name]
	if !ok {
		t.Fatalf("template has no resource %s", name)
	}
	if err := json.Unmarshal(r.Properties, v); err != nil {
		t.Fatalf("decode properties of %s: %v", name, err)
	}
}

// resourcesOfType lists the logical ids of the resources of type typ, sorted.
func (tpl *samTemplate) resourcesOfType(typ string) []string {
	var names []string
	for name, r := range tpl.raw.Resources {
		if r.Type == typ {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// functions lists the template's AWS::Serverless::Function logical ids.
func (tpl *samTemplate) functions(t testing.TB) []string {
	t.Helper()
	names := tpl.resourcesOfType("AWS::Serverless::Function")
	if len(names) == 0 {
		t.Fatal("template has no AWS::Serverless::Function")
	}
	return names
}

// functionProps decodes the raw properties of function name.
func (tpl *samTemplate) functionProps(t *testing.T, name string) functionProps {
	t.Helper()
	var p functionProps
	tpl.props(t, name, &p)
	return p
}

// environment is what function name sees: Globals' variables overlaid with
// its own (SAM merges the two maps). A value of its own that is an
// intrinsic (Fn::If) is given as its JSON.
func (tpl *samTemplate) environment(t *testing.T, name string) map[string]string {
	t.Helper()
	env := map[string]string{}
	g, err := tpl.typed.GetServerlessGlobalFunction()
	if err == nil && g.Environment != nil {
		for k, v := range g.Environment.Variables {
			env[k] = v
		}
	}
	for k, v := range tpl.functionProps(t, name).Environment.Variables {
		s, ok := v.(string)
		if !ok {
			s = compactJSON(t, mustJSON(t, v))
		}
		env[k] = s
	}
	return env
}

// paramOf returns the name of the parameter that v refers to, if v is a
// placeholder for !Ref of a parameter.
func (tpl *samTemplate) paramOf(v any) (string, bool) {
	s, ok := v.(string)
	if !ok || !strings.HasPrefix(s, "${Ref:") {
		return "", false
	}
	name := strings.TrimSuffix(strings.TrimPrefix(s, "${Ref:"), "}")
	_, isParam := tpl.raw.Parameters[name]
	return name, isParam
}

// upperBound is the largest value v can take: v itself when it is a
// number, the parameter's MaxValue when it is a !Ref to one.
func (tpl *samTemplate) upperBound(v any) (float64, error) {
	switch x := v.(type) {
	case float64:
		return x, nil
	case nil:
		return 0, nil
	}
	name, ok := tpl.paramOf(v)
	if !ok {
		return 0, fmt.Errorf("%v is neither a number nor a parameter", v)
	}
	p := tpl.raw.Parameters[name]
	if p.MaxValue == nil {
		return 0, fmt.Errorf("parameter %s has no MaxValue, so no bound can be checked", name)
	}
	return *p.MaxValue, nil
}

// resourceName is the logical id in a "${GetAtt:X.Arn}" or "${Ref:X}"
// placeholder.
func resourceName(placeholder string) string {
	s := strings.TrimSuffix(placeholder, "}")
	for _, p := range []string{"${GetAtt:", "${Ref:"} {
		if strings.HasPrefix(s, p) {
			return strings.SplitN(strings.TrimPrefix(s, p), ".", 2)[0]
		}
	}
	return ""
}

func TestFunctionsRunOnProvidedAl2023Arm64(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	g, err := tpl.typed.GetServerlessGlobalFunction()
	if err != nil {
		t.Fatalf("Globals.Function: %v", err)
	}
	for _, name := range tpl.functions(t) {
		fn, err := tpl.typed.GetServerlessFunctionWithName(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		runtime := deref(g.Runtime, fn.Runtime)
		handler := deref(g.Handler, fn.Handler)
		arch := fn.Architectures
		if arch == nil && g.Architectures != nil {
			arch = *g.Architectures
		}
		if runtime != "provided.al2023" || handler != "bootstrap" || !slices.Equal(arch, []string{"arm64"}) {
			t.Errorf("%s: runtime %q, handler %q, architectures %v; want provided.al2023, bootstrap, [arm64]", name, runtime, handler, arch)
		}
		if fn.Timeout == nil || *fn.Timeout < 1 || *fn.Timeout > 900 {
			t.Errorf("%s: Timeout %s; want an explicit value in 1..900 s", name, intString(fn.Timeout))
		}
		if m := memory(g.MemorySize, fn.MemorySize); m < 128 {
			t.Errorf("%s: MemorySize %d; want at least 128 MB", name, m)
		}
		if got := deref(g.Tracing, fn.Tracing); got != "Active" {
			t.Errorf("%s: Tracing %q; want Active", name, got)
		}
		if got := fn.AWSCloudFormationMetadata["BuildMethod"]; got != "makefile" {
			t.Errorf("%s: Metadata.BuildMethod %v; want makefile (the Makefile's build-%s)", name, got, name)
		}
		if fn.CodeUri == nil || fn.CodeUri.String == nil || *fn.CodeUri.String != "." {
			t.Errorf("%s: CodeUri %v; want \".\" (the Makefile sits at the root)", name, fn.CodeUri)
		}
	}

	// The log levels, as Lambda applies them: loglevel_test.go.
	if env := g.Environment; env == nil || env.Variables["LOG_LEVEL"] != refPlaceholder("LogLevel") {
		t.Errorf("Globals environment does not set LOG_LEVEL from the LogLevel parameter")
	}
}

func intString(p *int) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

func deref(global, local *string) string {
	if local != nil {
		return *local
	}
	if global != nil {
		return *global
	}
	return ""
}

func memory(global, local *int) int {
	if local != nil {
		return *local
	}
	if global != nil {
		return *global
	}
	return 128 // Lambda's default
}

// sqsEvents returns each SQS event of each function.
func (tpl *samTemplate) sqsEvents(t *testing.T) map[string]sqsEventProps {
	t.Helper()
	out := map[string]sqsEventProps{}
	for _, name := range tpl.functions(t) {
		for ev, e := range tpl.functionProps(t, name).Events {
			if e.Type != "SQS" {
				continue
			}
			var p sqsEventProps
			if err := json.Unmarshal(e.Properties, &p); err != nil {
				t.Fatalf("%s.%s: %v", name, ev, err)
			}
			out[name+"."+ev] = p
		}
	}
	return out
}

func TestQueueVisibilityTimeoutCoversTheWorker(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	events := tpl.sqsEvents(t)
	if len(events) == 0 {
		t.Fatal("no function has an SQS event")
	}
	for id, ev := range events {
		fnName := strings.SplitN(id, ".", 2)[0]
		timeout := tpl.functionProps(t, fnName).Timeout
		queue := resourceName(ev.Queue)
		var q queueProps
		tpl.props(t, queue, &q)
		window, err := tpl.upperBound(ev.MaximumBatchingWindowInSeconds)
		if err != nil {
			t.Errorf("%s MaximumBatchingWindowInSeconds: %v", id, err)
			continue
		}
		// AWS: at least six times the function's timeout, plus the
		// batching window.
		need := 6*timeout + int(window)
		if q.VisibilityTimeout == nil || *q.VisibilityTimeout < need {
			t.Errorf("%s: VisibilityTimeout %s; want ≥ 6 × %d s + %v s = %d s", queue, intString(q.VisibilityTimeout), timeout, window, need)
		}
	}
}

func TestSQSEventsReportBatchItemFailures(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	for id, ev := range tpl.sqsEvents(t) {
		if !slices.Contains(ev.FunctionResponseTypes, "ReportBatchItemFailures") {
			t.Errorf("%s: FunctionResponseTypes %v; want ReportBatchItemFailures, or one bad record fails the whole batch", id, ev.FunctionResponseTypes)
		}
		if b, ok := ev.BatchSize.(float64); !ok || b < 1 || b > 10 {
			t.Errorf("%s: BatchSize %v; want 1..10", id, ev.BatchSize)
		}
		if ev.ScalingConfig == nil {
			t.Errorf("%s: no ScalingConfig.MaximumConcurrency: nothing bounds the workers' database connections", id)
			continue
		}
		param, ok := tpl.paramOf(ev.ScalingConfig.MaximumConcurrency)
		if !ok {
			t.Errorf("%s: MaximumConcurrency %v; want a !Ref to a parameter", id, ev.ScalingConfig.MaximumConcurrency)
			continue
		}
		p := tpl.raw.Parameters[param]
		def, _ := p.Default.(float64)
		if p.MinValue == nil || *p.MinValue < 2 || p.MaxValue == nil || *p.MaxValue > 1000 || def < *p.MinValue || def > *p.MaxValue {
			t.Errorf("parameter %s: MinValue %v, MaxValue %v, Default %v; want bounds inside 2..1000 (Lambda's limits) and a default between them", param, p.MinValue, p.MaxValue, p.Default)
		}
	}
}

func TestEventQueuesHaveARedrivableDLQ(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	queues := tpl.resourcesOfType("AWS::SQS::Queue")
	for _, name := range queues {
		var q queueProps
		tpl.props(t, name, &q)
		if !q.SqsManagedSseEnabled {
			t.Errorf("%s: SqsManagedSseEnabled is not true", name)
		}
	}
	for id, ev := range tpl.sqsEvents(t) {
		src := resourceName(ev.Queue)
		var q queueProps
		tpl.props(t, src, &q)
		if q.RedrivePolicy == nil {
			t.Errorf("%s (queue of %s) has no RedrivePolicy: failing messages would be retried until they expire", src, id)
			continue
		}
		// ≥ 5 is AWS's advice; the worker's backoffs (internal/worker)
		// make receives cheaper in time, and 10 of them cover half an hour
		// of throttling and hours of an account pause.
		if q.RedrivePolicy.MaxReceiveCount < 10 {
			t.Errorf("%s: maxReceiveCount %d; want ≥ 10", src, q.RedrivePolicy.MaxReceiveCount)
		}
		dlqName := resourceName(q.RedrivePolicy.DeadLetterTargetArn)
		if q.RedrivePolicy.DeadLetterTargetArn != getAttPlaceholder(dlqName, "Arn") || tpl.raw.Resources[dlqName].Type != "AWS::SQS::Queue" {
			t.Errorf("%s: deadLetterTargetArn %q; want !GetAtt <a queue in this template>.Arn", src, q.RedrivePolicy.DeadLetterTargetArn)
			continue
		}
		var dlq queueProps
		tpl.props(t, dlqName, &dlq)
		if dlq.MessageRetentionPeriod == nil || *dlq.MessageRetentionPeriod != 1209600 {
			t.Errorf("%s: MessageRetentionPeriod %s; want 1209600 (14 days)", dlqName, intString(dlq.MessageRetentionPeriod))
		}
		srcRetention := 345600 // SQS default, 4 days
		if q.MessageRetentionPeriod != nil {
			srcRetention = *q.MessageRetentionPeriod
		}
		if dlq.MessageRetentionPeriod != nil && *dlq.MessageRetentionPeriod <= srcRetention {
			t.Errorf("%s keeps messages %d s, not longer than its source %s (%d s): a moved message keeps its original enqueue time and could expire at once", dlqName, *dlq.MessageRetentionPeriod, src, srcRetention)
		}
		rap := dlq.RedriveAllowPolicy
		if rap == nil || rap.RedrivePermission != "byQueue" || len(rap.SourceQueueArnList) != 1 {
			t.Errorf("%s: RedriveAllowPolicy %+v; want byQueue with exactly the source queue", dlqName, rap)
			continue
		}
		// The source ARN cannot be !GetAtt (that would be a cycle through the
		// RedrivePolicy), so it is spelled out from the queue's name.
		wantARN := "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:" + q.QueueName
		if q.QueueName == "" || rap.SourceQueueArnList[0] != wantARN {
			t.Errorf("%s: sourceQueueArnList %v; want [%s] (QueueName of %s)", dlqName, rap.SourceQueueArnList, wantARN, src)
		}
	}
}

func TestAlarmsWatchTheDLQTheQueueAndTheWorker(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	type want struct{ namespace, metric, dimName, dimValue string }
	wants := []want{
		{"AWS/SQS", "ApproximateNumberOfMessagesVisible", "QueueName", getAttPlaceholder("StatusEventsDLQ", "QueueName")},
		{"AWS/SQS", "ApproximateAgeOfOldestMessage", "QueueName", getAttPlaceholder("StatusEventsQueue", "QueueName")},
		{"AWS/Lambda", "Errors", "FunctionName", refPlaceholder("WorkerFunction")},
	}
	alarms := tpl.resourcesOfType("AWS::CloudWatch::Alarm")
	wantActions := `{"Fn::If":["HasAlarmTopic",["${Ref:AlarmTopicArn}"],"${Ref:AWS::NoValue}"]}`
	for _, w := range wants {
		found := false
		for _, name := range alarms {
			var a alarmProps
			tpl.props(t, name, &a)
			if a.Namespace != w.namespace || a.MetricName != w.metric || len(a.Dimensions) != 1 ||
				a.Dimensions[0].Name != w.dimName || a.Dimensions[0].Value != w.dimValue {
				continue
			}
			found = true
			if a.ComparisonOperator != "GreaterThanThreshold" {
				t.Errorf("%s: ComparisonOperator %s; want GreaterThanThreshold", name, a.ComparisonOperator)
			}
			if w.metric != "ApproximateAgeOfOldestMessage" && a.Threshold != 0.0 {
				t.Errorf("%s: Threshold %v; want 0 (any occurrence)", name, a.Threshold)
			}
			if w.metric == "ApproximateAgeOfOldestMessage" {
				if _, ok := tpl.paramOf(a.Threshold); !ok {
					t.Errorf("%s: Threshold %v; want a parameter", name, a.Threshold)
				}
			}
			for _, actions := range []json.RawMessage{a.AlarmActions, a.OKActions} {
				if compactJSON(t, actions) != wantActions {
					t.Errorf("%s: actions %s; want %s", name, actions, wantActions)
				}
			}
		}
		if !found {
			t.Errorf("no alarm on %s %s with %s = %s", w.namespace, w.metric, w.dimName, w.dimValue)
		}
	}
	if _, ok := tpl.raw.Conditions["HasAlarmTopic"]; !ok {
		t.Error("no HasAlarmTopic condition")
	}
}

func compactJSON(t *testing.T, m json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(m, &v); err != nil {
		return string(m)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// statements walks v and returns every IAM policy statement in it: any
// object with an Effect and an Action or NotAction.
func statements(v any) []map[string]any {
	var out []map[string]any
	switch x := v.(type) {
	case map[string]any:
		_, hasEffect := x["Effect"]
		_, hasAction := x["Action"]
		_, hasNotAction := x["NotAction"]
		if hasEffect && (hasAction || hasNotAction) {
			out = append(out, x)
		}
		for _, child := range x {
			out = append(out, statements(child)...)
		}
	case []any:
		for _, child := range x {
			out = append(out, statements(child)...)
		}
	}
	return out
}

// stringsOf flattens a string or a list of strings; both branches of an
// Fn::If count, AWS::NoValue does not.
func stringsOf(v any) []string {
	switch x := v.(type) {
	case string:
		if x == refPlaceholder("AWS::NoValue") {
			return nil
		}
		return []string{x}
	case map[string]any:
		if branches, ok := x["Fn::If"].([]any); ok && len(branches) == 3 {
			return append(stringsOf(branches[1]), stringsOf(branches[2])...)
		}
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, stringsOf(e)...)
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

func TestVpcIsOptional(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	var g struct {
		VpcConfig json.RawMessage `json:"VpcConfig"`
	}
	if err := json.Unmarshal(tpl.raw.Globals.Function, &g); err != nil {
		t.Fatal(err)
	}
	want := `{"Fn::If":["UseVpc",{"SecurityGroupIds":["${Ref:SecurityGroupIds}"],"SubnetIds":["${Ref:SubnetIds}"]},"${Ref:AWS::NoValue}"]}`
	if got := compactJSON(t, g.VpcConfig); got != want {
		t.Errorf("Globals VpcConfig = %s; want %s", got, want)
	}
	if p := tpl.raw.Parameters["SecurityGroupIds"]; p.Type != "CommaDelimitedList" || p.Default != "" {
		t.Errorf("parameter SecurityGroupIds: %+v; want an optional CommaDelimitedList", p)
	}
	// Subnets: none, or two or three (RDS Proxy needs two Availability
	// Zones), counted by the parameter's pattern, which CloudFormation
	// checks before it creates anything (a rule cannot count).
	subnets := tpl.raw.Parameters["SubnetIds"]
	if subnets.Type != "String" || subnets.Default != "" {
		t.Errorf("parameter SubnetIds: %+v; want an optional comma-separated String", subnets)
	}
	pattern := regexp.MustCompile(subnets.AllowedPattern)
	const a, b, c, d = "subnet-0123456789abcdef0", "subnet-0fedcba9876543210", "subnet-01234567", "subnet-89abcdef"
	for value, want := range map[string]bool{
		"": true, a: false, a + "," + b: true, a + "," + b + "," + c: true, a + "," + b + "," + c + "," + d: false,
		a + ",": false, a + "," + b + ",": false, "REPLACE_ME,REPLACE_ME": false, a + " ," + b: false,
	} {
		if got := pattern.MatchString(value); got != want {
			t.Errorf("SubnetIds %q allowed: %v; want %v", value, got, want)
		}
	}
	if _, ok := tpl.raw.Conditions["UseVpc"]; !ok {
		t.Error("no UseVpc condition")
	}
}

func TestHttpApiSendsEveryRouteToTheApiFunction(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	fn, err := tpl.typed.GetServerlessFunctionWithName("ApiFunction")
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	for name, ev := range fn.Events {
		if ev.Type != "HttpApi" || ev.Properties == nil || ev.Properties.HttpApiEvent == nil {
			continue
		}
		p := ev.Properties.HttpApiEvent
		if p.ApiId == nil || *p.ApiId != refPlaceholder("HttpApi") {
			t.Errorf("ApiFunction.%s: ApiId %v; want !Ref HttpApi", name, p.ApiId)
		}
		if p.PayloadFormatVersion == nil || *p.PayloadFormatVersion != "2.0" {
			t.Errorf("ApiFunction.%s: PayloadFormatVersion %v; want \"2.0\" (the adapter is httpadapter.NewV2)", name, p.PayloadFormatVersion)
		}
		routes[deref(nil, p.Method)+" "+deref(nil, p.Path)] = true
	}
	for _, r := range []string{"ANY /", "ANY /{proxy+}"} {
		if !routes[r] {
			t.Errorf("ApiFunction has no HttpApi route %q (has %v)", r, routes)
		}
	}

	var api struct {
		DefaultRouteSettings struct {
			ThrottlingRateLimit  any `json:"ThrottlingRateLimit"`
			ThrottlingBurstLimit any `json:"ThrottlingBurstLimit"`
		} `json:"DefaultRouteSettings"`
		AccessLogSettings struct {
			DestinationArn string `json:"DestinationArn"`
			Format         string `json:"Format"`
		} `json:"AccessLogSettings"`
	}
	tpl.props(t, "HttpApi", &api)
	for _, v := range []any{api.DefaultRouteSettings.ThrottlingRateLimit, api.DefaultRouteSettings.ThrottlingBurstLimit} {
		if _, ok := tpl.paramOf(v); !ok {
			t.Errorf("HttpApi throttling %v; want parameters", v)
		}
	}
	logs := resourceName(api.AccessLogSettings.DestinationArn)
	if tpl.raw.Resources[logs].Type != "AWS::Logs::LogGroup" || !json.Valid([]byte(strings.ReplaceAll(api.AccessLogSettings.Format, "$context.", "context."))) {
		t.Errorf("HttpApi AccessLogSettings %+v; want a JSON format into a log group of this template", api.AccessLogSettings)
	}
}

// Login and register have their own route, throttled by parameters below
// the rest of the API: every request there costs an argon2id hash. The
// template associates no WAF web ACL with the stage, because WAF cannot
// protect an HTTP API; a resource that tried would not deploy.
func TestAuthRoutesAreThrottledHarder(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	fn := tpl.functionProps(t, "ApiFunction")
	auth, ok := fn.Events["Auth"]
	if !ok || auth.Type != "HttpApi" {
		t.Fatalf("ApiFunction has no HttpApi event Auth: %v", fn.Events)
	}
	var p struct {
		Path          string `json:"Path"`
		Method        string `json:"Method"`
		RouteSettings struct {
			ThrottlingRateLimit  any `json:"ThrottlingRateLimit"`
			ThrottlingBurstLimit any `json:"ThrottlingBurstLimit"`
		} `json:"RouteSettings"`
	}
	if err := json.Unmarshal(auth.Properties, &p); err != nil {
		t.Fatal(err)
	}
	if p.Path != "/v1/auth/{proxy+}" || p.Method != http.MethodPost {
		t.Errorf("Auth route %s %s; want POST /v1/auth/{proxy+}", p.Method, p.Path)
	}
	var api struct {
		DefaultRouteSettings struct {
			ThrottlingRateLimit  any `json:"ThrottlingRateLimit"`
			ThrottlingBurstLimit any `json:"ThrottlingBurstLimit"`
		} `json:"DefaultRouteSettings"`
	}
	tpl.props(t, "HttpApi", &api)
	for _, pair := range [][2]any{
		{p.RouteSettings.ThrottlingRateLimit, api.DefaultRouteSettings.ThrottlingRateLimit},
		{p.RouteSettings.ThrottlingBurstLimit, api.DefaultRouteSettings.ThrottlingBurstLimit},
	} {
		auth, ok := tpl.paramOf(pair[0])
		all, _ := tpl.paramOf(pair[1])
		if !ok {
			t.Errorf("Auth route throttling %v; want a parameter", pair[0])
			continue
		}
		authDefault, _ := tpl.raw.Parameters[auth].Default.(float64)
		allDefault, _ := tpl.raw.Parameters[all].Default.(float64)
		if authDefault <= 0 || authDefault >= allDefault {
			t.Errorf("%s defaults to %v; want less than %s (%v)", auth, authDefault, all, allDefault)
		}
	}
	for name, r := range tpl.raw.Resources {
		if strings.HasPrefix(r.Type, "AWS::WAFv2::") || strings.HasPrefix(r.Type, "AWS::WAF::") || strings.HasPrefix(r.Type, "AWS::WAFRegional::") {
			t.Errorf("%s is a %s: WAF cannot be associated with an HTTP API stage", name, r.Type)
		}
	}
}

// The API's statement timeout is a parameter that the function reads as
// DATABASE_STATEMENT_TIMEOUT, with a default in the form Go parses.
func TestApiStatementTimeoutIsAParameter(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	v := tpl.environment(t, "ApiFunction")["DATABASE_STATEMENT_TIMEOUT"]
	name, ok := tpl.paramOf(v)
	if !ok {
		t.Fatalf("DATABASE_STATEMENT_TIMEOUT = %q; want a parameter", v)
	}
	def, _ := tpl.raw.Parameters[name].Default.(string)
	if d, err := time.ParseDuration(def); err != nil || d <= 0 || d >= 10*time.Second {
		t.Errorf("%s defaults to %q; want a Go duration under the function's 10 s timeout", name, def)
	}
	if !regexp.MustCompile(tpl.raw.Parameters[name].AllowedPattern).MatchString(def) {
		t.Errorf("%s's default %q does not match its AllowedPattern", name, def)
	}
}

func TestSweeperRunsOnASchedule(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	fn, err := tpl.typed.GetServerlessFunctionWithName("SweeperFunction")
	if err != nil {
		t.Fatal(err)
	}
	var schedules []*serverless.Function_ScheduleEvent
	for _, ev := range fn.Events {
		if ev.Type == "Schedule" && ev.Properties != nil && ev.Properties.ScheduleEvent != nil {
			schedules = append(schedules, ev.Properties.ScheduleEvent)
		}
	}
	if len(schedules) != 1 {
		t.Fatalf("SweeperFunction has %d Schedule events; want 1", len(schedules))
	}
	param, ok := tpl.paramOf(schedules[0].Schedule)
	def, _ := tpl.raw.Parameters[param].Default.(string)
	if !ok || (!strings.HasPrefix(def, "rate(") && !strings.HasPrefix(def, "cron(")) {
		t.Errorf("sweeper schedule %q (default %q); want a parameter defaulting to rate(...) or cron(...)", schedules[0].Schedule, def)
	}
}

// Every reference of the translated template, for every parameter set,
// names a parameter, a pseudo parameter or a resource of it (SAM's
// generated ones included: the versions, aliases and deployment
// application a SAM template may name).
func TestEveryReferenceResolves(t *testing.T) {
	t.Parallel()
	pseudo := map[string]bool{
		"AWS::AccountId": true, "AWS::NoValue": true, "AWS::Partition": true, "AWS::Region": true,
		"AWS::StackName": true, "AWS::StackId": true, "AWS::URLSuffix": true, "AWS::NotificationARNs": true,
	}
	eachSet(t, func(t *testing.T, set string) {
		c := translation(t, set)
		var names []string
		for _, r := range c.Resources {
			names = append(names, refNames(map[string]any{"Properties": r.Properties, "UpdatePolicy": r.UpdatePolicy})...)
		}
		var outputs any
		if err := json.Unmarshal(mustJSON(t, c.Outputs), &outputs); err != nil {
			t.Fatal(err)
		}
		names = append(names, refNames(outputs)...)
		if len(names) == 0 {
			t.Fatal("no references found; the walk is broken")
		}
		for _, n := range names {
			_, isParam := c.Parameters[n]
			_, isResource := c.Resources[n]
			if !isParam && !isResource && !pseudo[n] {
				t.Errorf("reference to %q, which is neither a parameter, a resource nor a pseudo parameter", n)
			}
		}
		for _, out := range []string{"ApiUrl", "StatusEventsQueueUrl", "StatusEventsDLQUrl"} {
			if _, ok := c.Outputs[out]; !ok {
				t.Errorf("no output %s", out)
			}
		}
	})
}
