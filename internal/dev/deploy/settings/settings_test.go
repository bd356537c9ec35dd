package settings

import (
	"slices"
	"testing"
)

const template = `
Parameters:
  Level: {Type: String, Default: INFO}
  Subnets: {Type: String, Default: ""}
  Origins: {Type: CommaDelimitedList, Default: ""}
  Proxy: {Type: String, Default: ""}
Conditions:
  UseVpc: !Not [!Equals [!Ref Subnets, ""]]
  CreateProxy: !And [!Condition UseVpc, !Not [!Equals [!Ref Proxy, ""]]]
Globals:
  Function:
    Timeout: 3
    Environment:
      Variables:
        LEVEL: !Ref Level
        HOST: !If [CreateProxy, !GetAtt DbProxy.Endpoint, ""]
    VpcConfig: !If [UseVpc, {SubnetIds: !Split [",", !Ref Subnets]}, !Ref AWS::NoValue]
Resources:
  Api:
    Type: AWS::Serverless::Function
    Properties:
      ReservedConcurrentExecutions: !Ref Level
      Environment:
        Variables:
          ORIGINS: !Join [",", !Ref Origins]
          NAME: !Sub "${AWS::StackName}-${Level}"
  Hook:
    Type: AWS::Serverless::Function
    Properties:
      VpcConfig: !Ref AWS::NoValue
`

func parsed(t *testing.T) *Template {
	t.Helper()
	tpl, err := ParseTemplate([]byte(template))
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// A function's settings: Globals merged as SAM merges them (variables key
// by key; the function's own intrinsic replaces a Globals one), evaluated
// for the values, conditions with !Condition inside included, references
// to resources and pseudo parameters left as they are, and what a version
// does not keep left out.
func TestConfiguration(t *testing.T) {
	t.Parallel()
	tpl := parsed(t)
	values := map[string]string{"Level": "DEBUG", "Subnets": "subnet-1,subnet-2", "Origins": "https://a,https://b", "Proxy": "db"}
	c, err := tpl.Configuration("Api", values)
	if err != nil {
		t.Fatal(err)
	}
	env := c["Environment"].(map[string]any)["Variables"].(map[string]any)
	if env["LEVEL"] != "DEBUG" || env["HOST"] != "${GetAtt:DbProxy.Endpoint}" || env["ORIGINS"] != "https://a,https://b" || env["NAME"] != "${AWS::StackName}-DEBUG" {
		t.Errorf("environment %v", env)
	}
	if _, ok := c["ReservedConcurrentExecutions"]; ok {
		t.Error("reserved concurrency is the function's, not a version's")
	}
	if subnets := c["VpcConfig"].(map[string]any)["SubnetIds"].([]any); len(subnets) != 2 || c["Timeout"] != 3.0 {
		t.Errorf("settings %v", c)
	}
	hook, err := tpl.Configuration("Hook", values)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hook["VpcConfig"]; ok {
		t.Errorf("the hook's own !Ref AWS::NoValue replaces the Globals VpcConfig: %v", hook)
	}
	values["Proxy"] = ""
	if c, _ := tpl.Configuration("Api", values); c["Environment"].(map[string]any)["Variables"].(map[string]any)["HOST"] != "" {
		t.Errorf("without a proxy, HOST %v", c)
	}
	if _, err := tpl.Configuration("Nope", values); err == nil {
		t.Error("a function the template lacks: no error")
	}
}

// The digest changes with what a function's settings read, and with
// nothing else; the same inputs give the same digest.
func TestDigest(t *testing.T) {
	t.Parallel()
	tpl := parsed(t)
	base := map[string]map[string]string{"a": tpl.Defaults(), "b": {"Level": "WARN", "Origins": "https://a"}}
	digest := func(fn string, sets map[string]map[string]string) string {
		d, err := Digest(tpl, sets, fn)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	api, hook := digest("Api", base), digest("Hook", base)
	if digest("Api", base) != api {
		t.Error("the same inputs gave two digests")
	}
	origins := map[string]map[string]string{"a": base["a"], "b": {"Level": "WARN", "Origins": "https://c"}}
	if digest("Api", origins) == api || digest("Hook", origins) != hook {
		t.Error("Origins, which only Api reads, must change Api's digest alone")
	}
	level := map[string]map[string]string{"a": base["a"], "b": {"Level": "ERROR", "Origins": "https://a"}}
	if digest("Api", level) == api || digest("Hook", level) == hook {
		t.Error("Level, which both read, must change both digests")
	}
}

// parameter_overrides split as Python's shlex.split splits them, which is
// what SAM CLI does.
func TestShellSplit(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		`A="x" B="y z"`:             {"A=x", "B=y z"},
		`A='it''s' B=\"q\"`:         {"A=its", `B="q"`},
		"  A=1\n\tB=2  ":            {"A=1", "B=2"},
		`A="a \"quoted\" \\ value"`: {`A=a "quoted" \ value`},
		`A="x,y"`:                   {"A=x,y"},
		``:                          nil,
	} {
		got, err := shellSplit(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("shellSplit(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`A="open`, `A='open`, `A=\`} {
		if _, err := shellSplit(bad); err == nil {
			t.Errorf("shellSplit(%q): no error", bad)
		}
	}
}
