package deploy

import (
	"bytes"
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/awslabs/goformation/v7/intrinsics"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// samSchemaPath is a copy of the JSON schema (draft-04) that
// aws/serverless-application-model publishes for SAM's resources and
// Globals (schema_source/sam.schema.json, May 2026). It lives in the
// repository so that the test runs on a fresh clone, with no network.
const samSchemaPath = "testdata/sam.schema.json"

// compileSAMSchema compiles the SAM schema. It fails t on any error.
func compileSAMSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(samSchemaPath)
	if err != nil {
		t.Fatalf("open SAM schema: %v", err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("decode SAM schema: %v", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	c.UseRegexpEngine(compileLookaheadRegexp)
	if err := c.AddResource("sam.schema.json", doc); err != nil {
		t.Fatalf("add SAM schema: %v", err)
	}
	sch, err := c.Compile("sam.schema.json")
	if err != nil {
		t.Fatalf("compile SAM schema: %v", err)
	}
	return sch
}

// notPrefixRegexp stands for the one pattern of the SAM schema that Go's
// regexp cannot compile, ^(?!PREFIX).+$ ("any non-empty string that does not
// start with PREFIX"); it is how the schema tells plain CloudFormation
// resources from AWS::Serverless::* ones.
type notPrefixRegexp struct{ source, prefix string }

func (r notPrefixRegexp) MatchString(s string) bool {
	return s != "" && !strings.HasPrefix(s, r.prefix)
}

func (r notPrefixRegexp) String() string { return r.source }

var negativeLookahead = regexp.MustCompile(`^\^\(\?!([^()|*+?\\[\]{}]+)\)\.\+\$$`)

// compileLookaheadRegexp compiles patterns with Go's regexp, except the
// negative-lookahead form above. Any other pattern Go cannot compile is an
// error, so a schema update cannot silently weaken the check.
func compileLookaheadRegexp(s string) (jsonschema.Regexp, error) {
	if m := negativeLookahead.FindStringSubmatch(s); m != nil {
		return notPrefixRegexp{source: s, prefix: m[1]}, nil
	}
	return regexp.Compile(s)
}

// longForm converts template YAML to JSON with every short-form intrinsic
// (!Ref, !GetAtt, !Sub, !If) in its long form ({"Ref": ...}), unresolved:
// the form the SAM schema describes.
func longForm(t *testing.T, yamlData []byte) any {
	t.Helper()
	data, err := processYAML(yamlData, &intrinsics.ProcessorOptions{NoProcess: true})
	if err != nil {
		t.Fatalf("convert template to JSON: %v", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("decode template JSON: %v", err)
	}
	return doc
}

func TestTemplateMatchesTheSAMSchema(t *testing.T) {
	t.Parallel()
	sch := compileSAMSchema(t)
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(longForm(t, data)); err != nil {
		t.Errorf("template.yaml does not match SAM's schema:\n%v", err)
	}
}

// The schema check must be able to fail: a property SAM does not know, in a
// function and in Globals, and a wrongly typed one, are each rejected.
func TestSAMSchemaRejectsWhatSAMWouldReject(t *testing.T) {
	t.Parallel()
	sch := compileSAMSchema(t)
	data, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		old, new string
	}{
		{"unknown function property", "      Timeout: 30\n", "      Timeout: 30\n      Timout: 30\n"},
		{"unknown Globals property", "    Tracing: Active\n", "    Tracing: Active\n    Tracer: Active\n"},
		{"unknown SQS event property", "            BatchSize: 10\n", "            BatchSize: 10\n            BatchSizes: 10\n"},
		{"unknown HttpApi event property", "            PayloadFormatVersion: \"2.0\"\n", "            PayloadFormatVersion: \"2.0\"\n            Bogus: 1\n"},
	}
	for _, tt := range tests {
		mutated := strings.Replace(string(data), tt.old, tt.new, 1)
		if mutated == string(data) {
			t.Errorf("%s: %q not found in template.yaml; update this test", tt.name, tt.old)
			continue
		}
		err := sch.Validate(longForm(t, []byte(mutated)))
		var verr *jsonschema.ValidationError
		if !errors.As(err, &verr) {
			t.Errorf("%s: schema accepted the template (err %v)", tt.name, err)
		}
	}
}
