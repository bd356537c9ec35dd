package deploy

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/dev/deploy/settings"
)

// A deploy publishes a new version of a function exactly when that
// function's settings change (template.yaml's Globals; the settings'
// digest that `sam build` writes beside each bootstrap,
// internal/dev/deploy/settings). These tests change each parameter in turn
// where the deploys keep them (samconfig.toml), build each artifact's
// name as `sam deploy` does, and let aws-sam-translator name the versions.

// samcliKey is the S3 key `sam deploy` uploads an artifact folder under:
// SAM CLI's dir_checksum (samcli/lib/utils/hash.py), the MD5 of each file's
// path and the hex MD5 of its contents, in path order. The key changes
// exactly when a file does.
func samcliKey(files map[string][]byte) string {
	h := md5.New()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		sum := md5.Sum(files[name])
		h.Write([]byte(name))
		h.Write([]byte(hex.EncodeToString(sum[:])))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// buildSettings reads template.yaml and samconfig.toml as the build does.
func buildSettings(t testing.TB) (*settings.Template, map[string]map[string]string) {
	t.Helper()
	tpl, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	config, err := os.ReadFile(samconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	st, err := settings.ParseTemplate(tpl)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := settings.ParameterSets(st, config)
	if err != nil {
		t.Fatal(err)
	}
	return st, sets
}

// artifactKeys returns each function's S3 key for the parameter sets:
// a bootstrap that stays the same (only the settings change here) and the
// settings' digest, as build-<LogicalId> writes them.
func artifactKeys(t testing.TB, st *settings.Template, sets map[string]map[string]string) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for _, fn := range st.Functions() {
		digest, err := settings.Digest(st, sets, fn)
		if err != nil {
			t.Fatal(err)
		}
		keys[fn] = fn + "/" + samcliKey(map[string][]byte{
			"bootstrap":       []byte("the same code"),
			"settings.sha256": []byte(digest + "\n"),
		}) + ".zip"
	}
	return keys
}

// The build reads samconfig.toml as SAM CLI does: its parameter sets, raw,
// are samtool.py's (which splits parameter_overrides with Python's shlex,
// as SAM CLI does), placeholders and all.
func TestBuildReadsTheParameterSetsAsSAMCLIDoes(t *testing.T) {
	t.Parallel()
	_, sets := buildSettings(t)
	raw := paramSets(t, true)
	for name, s := range raw {
		// samtool's "defaults" fills the parameters without a default with
		// examples; the build leaves them unset.
		want := maps.Clone(s.Values)
		if name == "defaults" {
			maps.DeleteFunc(want, func(k, _ string) bool { _, ok := sets[name][k]; return !ok })
		}
		if !reflect.DeepEqual(sets[name], want) {
			t.Errorf("%s: the build reads %v; SAM CLI %v", name, sets[name], want)
		}
	}
	if len(sets) != len(raw) {
		t.Errorf("the build knows the sets %v; samtool %v", slices.Sorted(maps.Keys(sets)), slices.Sorted(maps.Keys(raw)))
	}
}

// alternativeValues are other valid values of the string parameters
// without AllowedValues (the others are derived: another allowed value, a
// number one step away).
var alternativeValues = map[string]string{
	"DatabaseSecretArn":          "arn:aws:secretsmanager:us-east-1:123456789012:secret:other-db-XyZ123",
	"MailFrom":                   "jobboard <news@example.com>",
	"MailFromIdentity":           "mail.example.com",
	"VerifyEmailUrl":             "https://other.example.com/verify",
	"AccountRecoveryUrl":         "https://other.example.com/reset",
	"MailConfigurationSet":       "dedicated-ips",
	"ApiStatementTimeout":        "4s",
	"SweeperSchedule":            "rate(2 minutes)",
	"AlarmTopicArn":              "arn:aws:sns:us-east-1:123456789012:other-alarms",
	"SubnetIds":                  "subnet-0aaaaaaaaaaaaaaaa,subnet-0bbbbbbbbbbbbbbbb",
	"SecurityGroupIds":           "sg-0aaaaaaaaaaaaaaaa",
	"VpcId":                      "vpc-0aaaaaaaaaaaaaaaa",
	"DatabaseInstanceIdentifier": "jobboard-other",
	"DatabaseProxyEndpoint":      "proxy.example.internal",
	"DatabaseSslRootCert":        "unverified",
	"CorsAllowedOrigins":         "https://other.example.com",
	"WebhookDatabaseSecretArn":   "arn:aws:secretsmanager:us-east-1:123456789012:secret:webhooks-AbC123",
	"SesMaxSendRate":             "14",
}

// changeBase is the set a parameter is changed in: production (a VPC, a
// proxy, every condition that reads most parameters true), or the
// default environment where production's rules forbid the parameter.
func changeBase(param string) string {
	switch param {
	case "DatabaseProxyEndpoint", "WebhookDatabaseSecretArn":
		return "samconfig.default"
	}
	return "samconfig.prod"
}

// alternative returns another valid value of the parameter than current.
func alternative(t *testing.T, name string, p parameter, current string) string {
	t.Helper()
	if v, ok := alternativeValues[name]; ok {
		return v
	}
	for _, a := range p.AllowedValues {
		if s := fmt.Sprint(a); s != current {
			return s
		}
	}
	if p.Type == "Number" {
		n, err := strconv.ParseFloat(current, 64)
		if err != nil {
			t.Fatalf("%s: %q is not a number", name, current)
		}
		if p.MaxValue == nil || n+1 <= *p.MaxValue {
			return strconv.FormatFloat(n+1, 'f', -1, 64)
		}
		return strconv.FormatFloat(n-1, 'f', -1, 64)
	}
	t.Fatalf("parameter %s: no other value to try; add one to alternativeValues", name)
	return ""
}

// variant is one translation: a set, parameters on top, the functions'
// code keys (samtool.py versions).
type variant struct {
	Set    string            `json:"set"`
	Params map[string]string `json:"params"`
	Code   map[string]string `json:"code"`
}

// translateVariants translates every variant in one samtool process.
func translateVariants(t *testing.T, variants []variant) []*cfnTemplate {
	t.Helper()
	path := filepath.Join(t.TempDir(), "variants.json")
	b, err := json.Marshal(variants)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runSamtool("versions", path)
	if err != nil {
		t.Fatal(err)
	}
	var got []struct {
		Values   map[string]string `json:"values"`
		Template cfnTemplate       `json:"template"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("samtool versions: decode: %v", err)
	}
	if len(got) != len(variants) {
		t.Fatalf("samtool versions: %d translations for %d variants", len(got), len(variants))
	}
	ts := make([]*cfnTemplate, len(got))
	for i := range got {
		got[i].Template.Values = got[i].Values
		ts[i] = &got[i].Template
	}
	return ts
}

// versionOf returns the logical id of function's AWS::Lambda::Version.
func (c *cfnTemplate) versionOf(t *testing.T, function string) string {
	t.Helper()
	var ids []string
	for name, r := range c.Resources {
		if r.Type == "AWS::Lambda::Version" && fmt.Sprint(r.Properties["FunctionName"]) == fmt.Sprint(map[string]any{"Ref": function}) {
			ids = append(ids, name)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%s has versions %v; want one", function, ids)
	}
	return ids[0]
}

// publishedConfiguration is what a version of the function keeps, as
// CloudFormation evaluates the translation: its properties but the code
// (held apart here) and its reserved concurrency (the function's, not a
// version's).
func (c *cfnTemplate) publishedConfiguration(t *testing.T, function string) string {
	t.Helper()
	props := maps.Clone(c.resource(t, function).Properties)
	delete(props, "Code")
	delete(props, "ReservedConcurrentExecutions")
	b, err := json.Marshal(c.eval(t, props))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// For each parameter and each function: changing the parameter where the
// deploys keep it changes the function's version exactly when it changes
// what a version of the function keeps (its configuration as
// CloudFormation evaluates the translation), so that the alias moves to
// settings it would otherwise never see; and the same inputs give the same
// versions.
func TestAParameterChangePublishesExactlyTheFunctionsThatReadIt(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	st, sets := buildSettings(t)
	functions := st.Functions()
	params := slices.Sorted(maps.Keys(tpl.raw.Parameters))

	type change struct{ param, set, from, to string }
	var changes []change
	variants := []variant{}
	bases := map[string]int{}
	for _, set := range []string{"samconfig.default", "samconfig.prod"} {
		bases[set] = len(variants)
		keys := artifactKeys(t, st, sets)
		// Twice: the same inputs must give the same names.
		variants = append(variants, variant{Set: set, Code: keys}, variant{Set: set, Code: keys})
	}
	for _, p := range params {
		set := changeBase(p)
		from := sets[set][p]
		to := alternative(t, p, tpl.raw.Parameters[p], from)
		changed := maps.Clone(sets)
		changed[set] = maps.Clone(sets[set])
		changed[set][p] = to
		changes = append(changes, change{p, set, from, to})
		variants = append(variants, variant{Set: set, Params: map[string]string{p: to}, Code: artifactKeys(t, st, changed)})
	}
	got := translateVariants(t, variants)

	// The PreTraffic hook has no versions: CodeDeploy invokes the function
	// itself, whose $LATEST every deploy updates.
	var versioned []string
	for _, fn := range functions {
		if fn != "PreTrafficHookFunction" {
			versioned = append(versioned, fn)
		}
	}
	for name, r := range got[0].Resources {
		if r.Type == "AWS::Lambda::Version" && fmt.Sprint(r.Properties["FunctionName"]) == fmt.Sprint(map[string]any{"Ref": "PreTrafficHookFunction"}) {
			t.Errorf("the PreTraffic hook has a version, %s", name)
		}
	}
	functions = versioned

	for set, i := range bases {
		for _, fn := range functions {
			if a, b := got[i].versionOf(t, fn), got[i+1].versionOf(t, fn); a != b {
				t.Errorf("%s, %s: the same inputs gave the versions %s and %s", set, fn, a, b)
			}
		}
	}
	readers := map[string][]string{}
	for i, c := range changes {
		base, next := got[bases[c.set]], got[len(bases)*2+i]
		var reads, republished []string
		for _, fn := range functions {
			if base.publishedConfiguration(t, fn) != next.publishedConfiguration(t, fn) {
				reads = append(reads, fn)
			}
			if base.versionOf(t, fn) != next.versionOf(t, fn) {
				republished = append(republished, fn)
			}
		}
		if !slices.Equal(reads, republished) {
			t.Errorf("%s %q → %q (%s): new versions of %v; the configuration changes for %v", c.param, c.from, c.to, c.set, republished, reads)
		}
		readers[c.param] = reads
		if c.param == "LogLevel" {
			for _, fn := range functions {
				t.Logf("LogLevel %s → %s (%s): %s %s → %s", c.from, c.to, c.set, fn, base.versionOf(t, fn), next.versionOf(t, fn))
			}
		}
	}
	// What the settings are: every function reads the log level; the
	// worker its mail settings and no other function does.
	for p, want := range map[string][]string{
		"LogLevel":           functions,
		"MailFrom":           {"WorkerFunction"},
		"CorsAllowedOrigins": {"ApiFunction"},
		"DeploymentType":     nil,
	} {
		if !slices.Equal(readers[p], want) {
			t.Errorf("%s is read by %v; want %v", p, readers[p], want)
		}
	}
	for _, p := range params {
		t.Logf("%s: read by %s", p, strings.Join(readers[p], ", "))
	}
}
