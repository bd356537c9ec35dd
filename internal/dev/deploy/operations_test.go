package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Tests of the production operations in template.yaml: bounded database
// connections, alarms, gradual deploys, the VPC mode, CORS and packaging.

// An RDS Proxy is created when a DB instance is named (or an existing one
// is named), and the functions connect to it.
func TestDatabaseProxy(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	var proxy struct {
		EngineFamily string `json:"EngineFamily"`
		RequireTLS   bool   `json:"RequireTLS"`
		RoleArn      string `json:"RoleArn"`
		Auth         []struct {
			AuthScheme, SecretArn, IAMAuth, ClientPasswordAuthType string
		} `json:"Auth"`
		VpcSubnetIds any `json:"VpcSubnetIds"`
	}
	tpl.props(t, "DatabaseProxy", &proxy)
	if r := tpl.raw.Resources["DatabaseProxy"]; r.Type != "AWS::RDS::DBProxy" || r.Condition != "CreateDatabaseProxy" {
		t.Errorf("DatabaseProxy: %s with condition %q; want AWS::RDS::DBProxy under CreateDatabaseProxy", r.Type, r.Condition)
	}
	if proxy.EngineFamily != "POSTGRESQL" || !proxy.RequireTLS || len(proxy.Auth) != 1 ||
		proxy.Auth[0].SecretArn != refPlaceholder("DatabaseSecretArn") || proxy.Auth[0].ClientPasswordAuthType != "POSTGRES_SCRAM_SHA_256" {
		t.Errorf("DatabaseProxy %+v; want PostgreSQL, TLS required, the database secret, SCRAM", proxy)
	}
	if compactJSON(t, mustJSON(t, proxy.VpcSubnetIds)) != `["${Ref:SubnetIds}"]` {
		t.Errorf("DatabaseProxy subnets %v; want SubnetIds", proxy.VpcSubnetIds)
	}
	var group struct {
		DBProxyName                     string   `json:"DBProxyName"`
		DBInstanceIdentifiers           []string `json:"DBInstanceIdentifiers"`
		ConnectionPoolConfigurationInfo struct {
			MaxConnectionsPercent   float64 `json:"MaxConnectionsPercent"`
			ConnectionBorrowTimeout float64 `json:"ConnectionBorrowTimeout"`
		} `json:"ConnectionPoolConfigurationInfo"`
	}
	tpl.props(t, "DatabaseProxyTargetGroup", &group)
	pool := group.ConnectionPoolConfigurationInfo
	if group.DBProxyName != refPlaceholder("DatabaseProxy") || !slices.Equal(group.DBInstanceIdentifiers, []string{refPlaceholder("DatabaseInstanceIdentifier")}) ||
		pool.MaxConnectionsPercent <= 0 || pool.MaxConnectionsPercent >= 100 || pool.ConnectionBorrowTimeout <= 0 || pool.ConnectionBorrowTimeout >= 10 {
		t.Errorf("DatabaseProxyTargetGroup %+v; want the instance, less than 100 %% of max_connections, a borrow timeout under the API's 10 s", group)
	}
	if got := tpl.roleGrants(t, "DatabaseProxyRole"); fmt.Sprint(got) != fmt.Sprint(map[string][]string{"secretsmanager:GetSecretValue": {refPlaceholder("DatabaseSecretArn")}}) {
		t.Errorf("DatabaseProxyRole grants %v; want GetSecretValue on the database secret only", got)
	}
	if resourceName(proxy.RoleArn) != "DatabaseProxyRole" {
		t.Errorf("DatabaseProxy RoleArn %q", proxy.RoleArn)
	}

	var g struct {
		Environment struct {
			Variables map[string]any `json:"Variables"`
		} `json:"Environment"`
	}
	if err := json.Unmarshal(tpl.raw.Globals.Function, &g); err != nil {
		t.Fatal(err)
	}
	wantHost := `{"Fn::If":["CreateDatabaseProxy","${GetAtt:DatabaseProxy.Endpoint}","${Ref:DatabaseProxyEndpoint}"]}`
	if got := compactJSON(t, mustJSON(t, g.Environment.Variables["DATABASE_HOST"])); got != wantHost {
		t.Errorf("Globals DATABASE_HOST = %s; want %s", got, wantHost)
	}
	// DATABASE_SSLROOTCERT and DATABASE_QUERY_EXEC_MODE, as deployed:
	// TestDeployedFunctionSettings.
	for _, name := range []string{"DatabaseInstanceIdentifier", "DatabaseProxyEndpoint", "DatabaseSslRootCert"} {
		if p := tpl.raw.Parameters[name]; p.Type != "String" || p.Default != "" {
			t.Errorf("parameter %s: %+v; want an optional String", name, p)
		}
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// roleGrants returns, for an AWS::IAM::Role of the template, the resources
// of each action it allows.
func (tpl *samTemplate) roleGrants(t *testing.T, name string) map[string][]string {
	t.Helper()
	var role struct {
		Policies []any `json:"Policies"`
	}
	tpl.props(t, name, &role)
	out := map[string][]string{}
	for _, s := range statements(role.Policies) {
		if s["Effect"] != "Allow" {
			continue
		}
		for _, a := range stringsOf(s["Action"]) {
			out[a] = append(out[a], stringsOf(s["Resource"])...)
		}
	}
	return out
}

type alarmSpec struct {
	Namespace          string  `json:"Namespace"`
	MetricName         string  `json:"MetricName"`
	Statistic          string  `json:"Statistic"`
	ExtendedStatistic  string  `json:"ExtendedStatistic"`
	Period             float64 `json:"Period"`
	EvaluationPeriods  float64 `json:"EvaluationPeriods"`
	DatapointsToAlarm  float64 `json:"DatapointsToAlarm"`
	Threshold          any     `json:"Threshold"`
	ComparisonOperator string  `json:"ComparisonOperator"`
	TreatMissingData   string  `json:"TreatMissingData"`
	Dimensions         []struct {
		Name  string `json:"Name"`
		Value string `json:"Value"`
	} `json:"Dimensions"`
	AlarmActions json.RawMessage `json:"AlarmActions"`
}

func (a alarmSpec) dims() string {
	var out []string
	for _, d := range a.Dimensions {
		out = append(out, d.Name+"="+d.Value)
	}
	return strings.Join(out, ",")
}

// alarmsByMetric returns the template's alarms keyed by
// "namespace metric dimensions".
func (tpl *samTemplate) alarmsByMetric(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, name := range tpl.resourcesOfType("AWS::CloudWatch::Alarm") {
		var a alarmSpec
		tpl.props(t, name, &a)
		key := a.Namespace + " " + a.MetricName + " " + a.dims()
		out[key] = append(out[key], name)
	}
	return out
}

// Every failure has an alarm: the API's 5xx and latency, errors and
// throttles of the three functions, the worker's and the sweeper's own
// metrics (names and namespace from the functions' EMF lines), a sweeper
// that stops running, and the existing queue alarms.
func TestEveryFailureHasAnAlarm(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	fn := func(name string) string { return "FunctionName=" + refPlaceholder(name) }
	wants := []struct {
		key    string // namespace metric dimensions
		stat   string
		thresh any // a number, or a parameter name
		op     string
	}{
		{"AWS/ApiGateway 5xx ApiId=" + refPlaceholder("HttpApi"), "Average", 0.05, "GreaterThanThreshold"},
		{"AWS/ApiGateway Latency ApiId=" + refPlaceholder("HttpApi"), "p90", 2500.0, "GreaterThanThreshold"},
		{"AWS/Lambda Errors " + fn("ApiFunction"), "Sum", 0.0, "GreaterThanThreshold"},
		{"AWS/Lambda Errors " + fn("WorkerFunction"), "Sum", 0.0, "GreaterThanThreshold"},
		{"AWS/Lambda Errors " + fn("SweeperFunction"), "Sum", 0.0, "GreaterThanThreshold"},
		{"AWS/Lambda Throttles " + fn("ApiFunction"), "Sum", 0.0, "GreaterThanThreshold"},
		{"AWS/Lambda Throttles " + fn("WorkerFunction"), "Sum", 0.0, "GreaterThanThreshold"},
		{"AWS/Lambda Throttles " + fn("SweeperFunction"), "Sum", 0.0, "GreaterThanThreshold"},
		{"AWS/Lambda Invocations " + fn("SweeperFunction"), "Sum", 1.0, "LessThanThreshold"},
		{"jobboard SendFailures Service=worker", "Sum", 0.0, "GreaterThanThreshold"},
		{"jobboard SendingPaused Service=worker", "Sum", 0.0, "GreaterThanThreshold"},
		{"jobboard SendRefused Service=worker", "Sum", 0.0, "GreaterThanThreshold"},
		{"jobboard Throttled Service=worker", "Sum", 0.0, "GreaterThanThreshold"},
		{"jobboard ExpiredEvents Service=worker", "Sum", 0.0, "GreaterThanThreshold"},
		{"jobboard AmbiguousSends Service=worker", "Sum", 0.0, "GreaterThanThreshold"},
		{"jobboard OutboxOldestAgeSeconds Service=sweeper", "Maximum", "OutboxAgeAlarmSeconds", "GreaterThanThreshold"},
		{"jobboard OutboxBacklog Service=sweeper", "Maximum", 500.0, "GreaterThanThreshold"},
		{"jobboard OutboxExpired Service=sweeper", "Sum", 0.0, "GreaterThanThreshold"},
		{"AWS/SQS ApproximateNumberOfMessagesVisible QueueName=" + getAttPlaceholder("StatusEventsDLQ", "QueueName"), "Maximum", 0.0, "GreaterThanThreshold"},
		{"AWS/SQS ApproximateAgeOfOldestMessage QueueName=" + getAttPlaceholder("StatusEventsQueue", "QueueName"), "Maximum", "QueueAgeAlarmSeconds", "GreaterThanThreshold"},
	}
	byMetric := tpl.alarmsByMetric(t)
	wantActions := `{"Fn::If":["HasAlarmTopic",["${Ref:AlarmTopicArn}"],"${Ref:AWS::NoValue}"]}`
	for _, w := range wants {
		names := byMetric[w.key]
		if len(names) != 1 {
			t.Errorf("%d alarms on %s; want 1", len(names), w.key)
			continue
		}
		var a alarmSpec
		tpl.props(t, names[0], &a)
		stat := a.Statistic + a.ExtendedStatistic
		thresh := a.Threshold
		if p, ok := tpl.paramOf(a.Threshold); ok {
			thresh = p
		}
		if stat != w.stat || thresh != w.thresh || a.ComparisonOperator != w.op {
			t.Errorf("%s: %s %s %v; want %s %s %v", names[0], stat, a.ComparisonOperator, thresh, w.stat, w.op, w.thresh)
		}
		if a.Period < 60 || a.EvaluationPeriods < 1 || (a.DatapointsToAlarm != 0 && a.DatapointsToAlarm > a.EvaluationPeriods) {
			t.Errorf("%s: period %v, %v of %v datapoints", names[0], a.Period, a.DatapointsToAlarm, a.EvaluationPeriods)
		}
		if a.TreatMissingData == "" {
			t.Errorf("%s: no TreatMissingData", names[0])
		}
		if compactJSON(t, a.AlarmActions) != wantActions {
			t.Errorf("%s: AlarmActions %s; want %s", names[0], a.AlarmActions, wantActions)
		}
	}
	// Only a missing sweeper is a failure by its absence.
	for _, name := range tpl.resourcesOfType("AWS::CloudWatch::Alarm") {
		var a alarmSpec
		tpl.props(t, name, &a)
		if (a.TreatMissingData == "breaching") != (a.MetricName == "Invocations") {
			t.Errorf("%s: TreatMissingData %q", name, a.TreatMissingData)
		}
	}
}

// Every function publishes a version behind the alias "live"; the API, the
// worker and the webhook function shift traffic as DeploymentType says, the
// sweeper at once, all four after the PreTraffic hook and as CodeDeployRole; event sources are
// SAM events, which SAM connects to the alias. What the deployment groups
// watch, as translated: TestRollbackAlarmsWatchTheNewVersion.
func TestDeploysAreGradual(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	var g struct {
		AutoPublishAlias string `json:"AutoPublishAlias"`
	}
	if err := json.Unmarshal(tpl.raw.Globals.Function, &g); err != nil {
		t.Fatal(err)
	}
	if g.AutoPublishAlias != "live" {
		t.Errorf("Globals AutoPublishAlias %q; want live", g.AutoPublishAlias)
	}
	for fn, wantType := range map[string]string{
		"ApiFunction":     refPlaceholder("DeploymentType"),
		"WorkerFunction":  refPlaceholder("DeploymentType"),
		"SweeperFunction": "AllAtOnce",
		"WebhookFunction": refPlaceholder("DeploymentType"),
		// Feedback trickles in: a canary would barely sample it.
		"FeedbackFunction": "AllAtOnce",
	} {
		var p struct {
			AutoPublishAlias     string `json:"AutoPublishAlias"`
			DeploymentPreference *struct {
				Type  string            `json:"Type"`
				Role  string            `json:"Role"`
				Hooks map[string]string `json:"Hooks"`
			} `json:"DeploymentPreference"`
		}
		tpl.props(t, fn, &p)
		if p.AutoPublishAlias != "" {
			t.Errorf("%s sets its own AutoPublishAlias %q; Globals has it", fn, p.AutoPublishAlias)
		}
		d := p.DeploymentPreference
		if d == nil || d.Type != wantType || d.Role != getAttPlaceholder("CodeDeployRole", "Arn") ||
			d.Hooks["PreTraffic"] != refPlaceholder("PreTrafficHookFunction") {
			t.Errorf("%s: DeploymentPreference %+v; want Type %s, the PreTraffic hook and CodeDeployRole", fn, d, wantType)
		}
	}
	if p := tpl.raw.Parameters["DeploymentType"]; p.Default != "Canary10Percent10Minutes" || slices.Contains(p.AllowedValues, any("Canary10Percent5Minutes")) || !slices.Contains(p.AllowedValues, any("AllAtOnce")) {
		t.Errorf("parameter DeploymentType %+v; want a canary by default", p)
	}
	// Event sources declared as plain resources would invoke $LATEST.
	for _, typ := range []string{"AWS::Lambda::EventSourceMapping", "AWS::Events::Rule", "AWS::Scheduler::Schedule", "AWS::Lambda::Permission"} {
		if got := tpl.resourcesOfType(typ); len(got) > 0 {
			t.Errorf("%s resources %v bypass the alias; declare them as SAM events", typ, got)
		}
	}
}

// With SubnetIds the functions reach Secrets Manager and SQS through
// interface endpoints, the stack's own or (VpcEndpoints=existing, a shared
// VPC's) the VPC's; SES v2 has none, so a rule requires a NAT gateway.
func TestVpcModeReachesEveryService(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	endpoints := map[string]bool{}
	for _, name := range tpl.resourcesOfType("AWS::EC2::VPCEndpoint") {
		var e struct {
			VpcEndpointType   string   `json:"VpcEndpointType"`
			ServiceName       string   `json:"ServiceName"`
			VpcId             string   `json:"VpcId"`
			SubnetIds         []string `json:"SubnetIds"`
			SecurityGroupIds  []string `json:"SecurityGroupIds"`
			PrivateDnsEnabled bool     `json:"PrivateDnsEnabled"`
		}
		tpl.props(t, name, &e)
		if tpl.raw.Resources[name].Condition != "CreateVpcEndpoints" || e.VpcEndpointType != "Interface" || e.VpcId != refPlaceholder("VpcId") ||
			!slices.Equal(e.SubnetIds, []string{refPlaceholder("SubnetIds")}) || !e.PrivateDnsEnabled ||
			!slices.Equal(e.SecurityGroupIds, []string{refPlaceholder("VpcEndpointSecurityGroup")}) {
			t.Errorf("%s: %+v (condition %q); want an interface endpoint with private DNS in VpcId/SubnetIds under CreateVpcEndpoints", name, e, tpl.raw.Resources[name].Condition)
		}
		endpoints[strings.TrimPrefix(e.ServiceName, "com.amazonaws.${AWS::Region}.")] = true
	}
	// What the functions call from inside the VPC (Logs and X-Ray are sent
	// by Lambda itself).
	for service, endpoint := range map[string]bool{"secretsmanager": true, "sqs": true, "email": false} {
		if endpoints[service] != endpoint {
			t.Errorf("interface endpoint for %s: %v; want %v", service, endpoints[service], endpoint)
		}
	}
	var sg struct {
		VpcId                string `json:"VpcId"`
		SecurityGroupIngress []struct {
			IpProtocol            string  `json:"IpProtocol"`
			FromPort              float64 `json:"FromPort"`
			SourceSecurityGroupId any     `json:"SourceSecurityGroupId"`
		} `json:"SecurityGroupIngress"`
	}
	tpl.props(t, "VpcEndpointSecurityGroup", &sg)
	if c := tpl.raw.Resources["VpcEndpointSecurityGroup"].Condition; c != "CreateVpcEndpoints" {
		t.Errorf("VpcEndpointSecurityGroup under %q; want CreateVpcEndpoints", c)
	}
	if p := tpl.raw.Parameters["VpcEndpoints"]; p.Default != "create" || fmt.Sprint(p.AllowedValues) != "[create existing]" {
		t.Errorf("parameter VpcEndpoints %+v; want create (the default) or existing", p)
	}
	if len(sg.SecurityGroupIngress) != 1 || sg.SecurityGroupIngress[0].FromPort != 443 || sg.VpcId != refPlaceholder("VpcId") {
		t.Errorf("VpcEndpointSecurityGroup %+v; want HTTPS from the functions' group", sg)
	}

	// The rules, read unresolved.
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := longForm(t, data).(map[string]any)
	// The endpoints are made in a VPC unless it has its own.
	for _, tt := range []struct {
		set    string
		params []string
		want   bool
	}{
		{"defaults", nil, false},
		{"samconfig.prod", nil, true},
		{"samconfig.prod", []string{"VpcEndpoints=existing"}, false},
	} {
		if got := translation(t, tt.set, tt.params...).condition(t, "CreateVpcEndpoints"); got != tt.want {
			t.Errorf("%s %v: CreateVpcEndpoints %v; want %v", tt.set, tt.params, got, tt.want)
		}
	}
	rules, _ := doc["Rules"].(map[string]any)
	rule, _ := rules["VpcModeNeedsItsNetwork"].(map[string]any)
	got := compactJSON(t, mustJSON(t, rule))
	for _, want := range []string{
		`"RuleCondition":{"Fn::Not":[{"Fn::Equals":[{"Ref":"SubnetIds"},""]}]}`,
		`{"Fn::Equals":[{"Ref":"SubnetsHaveNatGateway"},"true"]}`,
		`{"Fn::Not":[{"Fn::Equals":[{"Ref":"VpcId"},""]}]}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("rule VpcModeNeedsItsNetwork %s lacks %s", got, want)
		}
	}
	if p := tpl.raw.Parameters["SubnetsHaveNatGateway"]; p.Default != "false" || len(p.AllowedValues) != 2 {
		t.Errorf("parameter SubnetsHaveNatGateway %+v", p)
	}
}

// CORS: one parameter, answered by API Gateway (as translated:
// TestCorsTranslatesToAnObject) and passed to the function.
func TestCorsIsAParameter(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	if p := tpl.raw.Parameters["CorsAllowedOrigins"]; p.Type != "CommaDelimitedList" || p.Default != "" {
		t.Errorf("parameter CorsAllowedOrigins %+v; want an optional CommaDelimitedList", p)
	}
	if _, ok := tpl.raw.Conditions["HasCors"]; !ok {
		t.Error("no HasCors condition")
	}
	if got := tpl.environment(t, "ApiFunction")["CORS_ALLOWED_ORIGINS"]; got != refPlaceholder("CorsAllowedOrigins") {
		t.Errorf("ApiFunction CORS_ALLOWED_ORIGINS = %q; want the parameter, comma-joined", got)
	}
}

var makeWrites = regexp.MustCompile(`(?:-o\s+|\bcp\s+\S+\s+)(\S+)`)

// sam build runs the Makefile in the project folder (build_in_source), so
// it copies nothing; the build targets write only into ARTIFACTS_DIR.
func TestSamBuildsInTheSourceFolder(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	sections := samconfigSections(t)
	for _, env := range []string{"default", "prod"} {
		if !strings.Contains(sections[env+".build.parameters"], "build_in_source = true") {
			t.Errorf("[%s.build.parameters] lacks build_in_source = true", env)
		}
	}
	for _, name := range tpl.functions(t) {
		fn := tpl.raw.Resources[name]
		var p struct {
			CodeUri string `json:"CodeUri"`
		}
		tpl.props(t, name, &p)
		if fn.Metadata["BuildMethod"] != "makefile" || p.CodeUri != "." {
			t.Errorf("%s: BuildMethod %v, CodeUri %q; want makefile at the project root (the Makefile's folder)", name, fn.Metadata["BuildMethod"], p.CodeUri)
		}
		// RDS_CA_BUNDLE names a file that exists, as the bundle would.
		out := makeDryRun(t, "build-"+name, "ARTIFACTS_DIR=/artifacts", "RDS_CA_BUNDLE=Makefile")
		writes := makeWrites.FindAllStringSubmatch(out, -1)
		if len(writes) != 3 || writes[1][1] != "/artifacts/settings.sha256" || !strings.Contains(out, "settingsdigest -o /artifacts/settings.sha256 -function "+name+"\n") {
			t.Errorf("make build-%s writes %v; want the bootstrap, its settings' digest and the CA bundle:\n%s", name, writes, out)
		}
		for _, w := range writes {
			if !strings.HasPrefix(w[1], "/artifacts/") {
				t.Errorf("make build-%s writes %s, outside ARTIFACTS_DIR:\n%s", name, w[1], out)
			}
		}
	}
}
