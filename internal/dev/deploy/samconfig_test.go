package deploy

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const samconfigPath = repoRoot + "/samconfig.toml"

// samconfigSections splits samconfig.toml into its tables: "[a.b]" → the
// text up to the next table.
func samconfigSections(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(samconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	current := ""
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "[") && strings.HasSuffix(strings.TrimSpace(line), "]") {
			current = strings.Trim(strings.TrimSpace(line), "[]")
			continue
		}
		sections[current] += line + "\n"
	}
	return sections
}

var overrideName = regexp.MustCompile(`([A-Za-z0-9]+)=\\"`)

// Each environment of samconfig.toml names a stack, deploys with
// CAPABILITY_IAM and a change set to confirm, and overrides only parameters
// that template.yaml has, including every parameter without a default.
func TestSamconfigEnvironmentsMatchTheTemplate(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	sections := samconfigSections(t)
	if !strings.Contains(sections[""], "version = 0.1") {
		t.Error("samconfig.toml: no `version = 0.1`")
	}
	var required []string
	for name, p := range tpl.raw.Parameters {
		if p.Default == nil {
			required = append(required, name)
		}
	}
	sort.Strings(required)
	stacks := map[string]string{}
	for _, env := range []string{"default", "prod"} {
		global := sections[env+".global.parameters"]
		stack := regexp.MustCompile(`stack_name = "([^"]+)"`).FindStringSubmatch(global)
		if stack == nil {
			t.Errorf("[%s.global.parameters] has no stack_name", env)
		} else if other, dup := stacks[stack[1]]; dup {
			t.Errorf("environments %s and %s deploy the same stack %s", other, env, stack[1])
		} else {
			stacks[stack[1]] = env
		}
		build := sections[env+".build.parameters"]
		for _, want := range []string{"cached = true", "parallel = true"} {
			if !strings.Contains(build, want) {
				t.Errorf("[%s.build.parameters] lacks %q", env, want)
			}
		}
		deploy := sections[env+".deploy.parameters"]
		for _, want := range []string{`capabilities = "CAPABILITY_IAM"`, "confirm_changeset = true", "resolve_s3 = true", "parameter_overrides"} {
			if !strings.Contains(deploy, want) {
				t.Errorf("[%s.deploy.parameters] lacks %q", env, want)
			}
		}
		set := map[string]bool{}
		for _, m := range overrideName.FindAllStringSubmatch(deploy, -1) {
			set[m[1]] = true
			if _, ok := tpl.raw.Parameters[m[1]]; !ok {
				t.Errorf("[%s.deploy.parameters] overrides %s, which template.yaml does not declare", env, m[1])
			}
		}
		for _, name := range required {
			if !set[name] {
				t.Errorf("[%s.deploy.parameters] does not set %s, which has no default", env, name)
			}
		}
	}
}
