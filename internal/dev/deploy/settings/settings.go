// Package settings computes what makes a deploy publish a new version of a
// function when, and only when, that function's effective configuration
// changes: a digest of the function's settings, which `sam build` writes
// beside each bootstrap (settings.sha256, by internal/dev/cmd/settingsdigest
// from the Makefile's build-<LogicalId> targets).
//
// Why the build, and not the template: SAM names each AWS::Lambda::Version
// after a hash of the function's code location, its Environment and
// MemorySize as the template writes them, with every !Ref to a parameter
// left unresolved (aws-sam-translator, SamFunction._construct_version), so
// a deploy that changes only a parameter (LogLevel, MailFrom, the
// subnets...) keeps the Version, and the alias that every event source
// invokes keeps the old version with the old settings, though $LATEST has
// the new ones. AutoPublishCodeSha256 cannot carry the parameters instead:
// SAM resolves it to a string only for a plain !Ref (a !Sub stays an
// object, which SAM refuses), and then uses its first 10 characters as the
// hash itself. What SAM does resolve is the code's S3 location, which `sam
// deploy` names after the artifact's contents (the MD5 of its files): so
// the artifact carries the digest of the settings, and a change of
// settings is a change of code location. AutoPublishAliasAllProperties
// (template.yaml's Globals) does the same for what the template writes
// itself (a Timeout, a literal variable).
//
// A function's settings are the properties of its AWS::Serverless::Function
// that a published version keeps (everything but its event sources,
// deployment preference, reserved concurrency and the like: notVersioned),
// with Globals merged as SAM merges them, evaluated for each parameter set
// the deploys can use: the template's defaults and every environment of
// samconfig.toml (its parameter_overrides, read as SAM CLI reads them).
// References to resources stay symbolic (a queue's URL, a proxy's
// endpoint): their values are CloudFormation's, and change only when the
// resource is replaced. The proxy, the one such resource a parameter can
// replace, is replaced only by a change of its subnets, which are among
// every database function's settings (VpcConfig).
//
// The digest sees parameters only as samconfig.toml holds them at build
// time: a value given on the command line (--parameter-overrides, which
// docs/deploying.md forbids) or by `sam deploy --guided` after the build
// reaches the functions' $LATEST but publishes no version of them until
// the next `sam build && sam deploy`.
package settings

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Template is the part of template.yaml the settings come from, its
// intrinsic functions in their long form ({"Ref": ...}, {"Fn::If": ...}).
type Template struct {
	Parameters map[string]Parameter `json:"Parameters"`
	Conditions map[string]any       `json:"Conditions"`
	Globals    struct {
		Function map[string]any `json:"Function"`
	} `json:"Globals"`
	Resources map[string]struct {
		Type       string         `json:"Type"`
		Properties map[string]any `json:"Properties"`
	} `json:"Resources"`
}

// Parameter is a parameter of the template.
type Parameter struct {
	Type    string `json:"Type"`
	Default any    `json:"Default"`
}

// IsList reports whether the parameter is a list (its !Ref is a list).
func (p Parameter) IsList() bool {
	return p.Type == "CommaDelimitedList" || strings.HasPrefix(p.Type, "List<")
}

// ParseTemplate reads template.yaml.
func ParseTemplate(data []byte) (*Template, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	v, err := longForm(&doc)
	if err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	js, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	var t Template
	if err := json.Unmarshal(js, &t); err != nil {
		return nil, fmt.Errorf("parse template: %w", err)
	}
	return &t, nil
}

// longForm decodes a YAML node with CloudFormation's short-form tags
// (!Ref X, !If [...], !Condition X, !GetAtt A.B) as their long forms
// ({"Ref": "X"}, {"Fn::If": [...]}, {"Condition": "X"}, {"Fn::GetAtt":
// "A.B"}).
func longForm(n *yaml.Node) (any, error) {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		return longForm(n.Content[0])
	}
	if n.Kind == yaml.AliasNode {
		return longForm(n.Alias)
	}
	var v any
	switch n.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			val, err := longForm(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		list := []any{}
		for _, c := range n.Content {
			val, err := longForm(c)
			if err != nil {
				return nil, err
			}
			list = append(list, val)
		}
		v = list
	default:
		if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
			var scalar any
			if err := n.Decode(&scalar); err != nil {
				return nil, err
			}
			return scalar, nil
		}
		v = n.Value
	}
	if !strings.HasPrefix(n.Tag, "!") || strings.HasPrefix(n.Tag, "!!") {
		return v, nil
	}
	name := strings.TrimPrefix(n.Tag, "!")
	if name != "Ref" && name != "Condition" {
		name = "Fn::" + name
	}
	return map[string]any{name: v}, nil
}

// Functions lists the template's AWS::Serverless::Function logical ids,
// sorted.
func (t *Template) Functions() []string {
	var names []string
	for name, r := range t.Resources {
		if r.Type == "AWS::Serverless::Function" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// notVersioned are the properties of an AWS::Serverless::Function that a
// published version does not keep: the function's (reserved concurrency),
// the alias's (provisioned concurrency, asynchronous invocation), the event
// sources', the deployment's, and the build's (the code is in the artifact
// itself).
var notVersioned = []string{
	"AutoPublishAlias", "AutoPublishAliasAllProperties", "AutoPublishCodeSha256",
	"CodeUri", "DeploymentPreference", "EventInvokeConfig", "Events",
	"FunctionUrlConfig", "ProvisionedConcurrencyConfig", "ReservedConcurrentExecutions",
	"VersionDeletionPolicy", "VersionDescription",
}

// Configuration returns function's versioned settings (Globals merged),
// evaluated for values: the parameters' values as strings, lists
// comma-separated; a parameter without a value stays a reference.
func (t *Template) Configuration(function string, values map[string]string) (map[string]any, error) {
	r, ok := t.Resources[function]
	if !ok || r.Type != "AWS::Serverless::Function" {
		return nil, fmt.Errorf("template has no function %s", function)
	}
	props := mergeGlobals(t.Globals.Function, r.Properties).(map[string]any)
	for _, p := range notVersioned {
		delete(props, p)
	}
	e := evaluator{t: t, values: values}
	out, ok := e.eval(props).(map[string]any)
	if e.err != nil {
		return nil, fmt.Errorf("settings of %s: %w", function, e.err)
	}
	if !ok {
		return map[string]any{}, nil
	}
	return out, nil
}

// Digest returns the hex SHA-256 of function's configuration in each of
// the parameter sets (by name), in the order of their names.
func Digest(t *Template, sets map[string]map[string]string, function string) (string, error) {
	type entry struct {
		Set           string         `json:"set"`
		Configuration map[string]any `json:"configuration"`
	}
	var all []entry
	for _, name := range slices.Sorted(maps.Keys(sets)) {
		c, err := t.Configuration(function, sets[name])
		if err != nil {
			return "", err
		}
		all = append(all, entry{name, c})
	}
	// encoding/json writes map keys sorted: the same settings, the same bytes.
	b, err := json.Marshal(all)
	if err != nil {
		return "", fmt.Errorf("settings of %s: %w", function, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Defaults returns the template's default values, as strings.
func (t *Template) Defaults() map[string]string {
	out := map[string]string{}
	for name, p := range t.Parameters {
		if p.Default != nil {
			out[name] = scalar(p.Default)
		}
	}
	return out
}

// scalar is a YAML scalar as CloudFormation reads it: a string.
func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = scalar(e)
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v)
}

// mergeGlobals merges a Globals value into a function's as SAM does
// (samtranslator/plugins/globals/globals.py, _do_merge): objects merge key
// by key, lists concatenate, anything else (an intrinsic function
// included) is the function's own when it has one.
func mergeGlobals(global, local any) any {
	if local == nil {
		return global
	}
	if global == nil {
		return local
	}
	gm, gDict := global.(map[string]any)
	lm, lDict := local.(map[string]any)
	if gDict && lDict && !isIntrinsic(gm) && !isIntrinsic(lm) {
		out := maps.Clone(gm)
		for k, v := range lm {
			out[k] = mergeGlobals(gm[k], v)
		}
		return out
	}
	gl, gList := global.([]any)
	ll, lList := local.([]any)
	if gList && lList {
		return append(slices.Clone(gl), ll...)
	}
	return local
}

func isIntrinsic(m map[string]any) bool {
	if len(m) != 1 {
		return false
	}
	for k := range m {
		return k == "Ref" || k == "Condition" || strings.HasPrefix(k, "Fn::")
	}
	return false
}

// errUnsupported is an intrinsic function the evaluator does not know:
// the digest would not be able to tell its values apart.
var errUnsupported = errors.New("unsupported intrinsic function")
