package jobboard_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/jobboard/jobboard/"

// allowedInternal lists, for each package under internal/, which other
// internal packages its non-test code may import: the arrows point inward,
// from the adapters to the domain. Composition roots (functions/*, and the
// dev tree's devstack, chaos and cmd/*) wire everything and are not listed.
var allowedInternal = map[string][]string{
	"internal/jobboard": {},
	"internal/postgres": {"internal/jobboard"},
	"internal/httpapi":  {"internal/jobboard", "internal/emf"},
	"internal/queue":    {"internal/jobboard"},
	"internal/mail":     {"internal/jobboard"},
	"internal/worker":   {"internal/jobboard", "internal/emf"},
	"internal/outbox":   {"internal/jobboard", "internal/emf"},
	// The webhook delivery function's handler and client, and the
	// receivers its tests and the chaos run use.
	"internal/webhook":             {"internal/jobboard", "internal/emf"},
	"internal/webhook/webhooktest": {},
	"internal/emf":                 {},
	"internal/dev/localaws":        {},
	// The Lambda event source mapping played locally: linked into the
	// worker and the webhook function for their local mode.
	"internal/function/eventsource": {},
	"internal/secret":               {},
	"internal/awsenv":               {},
	// The API's JSON client for the programs that drive it from outside.
	"internal/dev/apiclient": {},
	// What the functions' mains share: their common settings and logger.
	"internal/function":        {"internal/awsenv"},
	"internal/postgres/schema": {},
	// The deploy's PreTraffic hook: migrate, smoke-test, report.
	"internal/deployhook": {},
	// The migration function's answers to CloudFormation, which say what
	// schema.Apply did.
	"internal/schemamigration":         {"internal/postgres/schema"},
	"internal/schemamigration/cfntest": {},
}

// The domain imports only the standard library, and no adapter imports
// another adapter: they meet only in the composition roots.
func TestImportsPointInward(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		rel := strings.TrimPrefix(pkg, module)
		allowed, checked := allowedInternal[rel]
		if !checked {
			continue
		}
		seen[rel] = true
		for _, imp := range strings.Fields(imports) {
			if rel == "internal/jobboard" && strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				t.Errorf("internal/jobboard imports %s: the domain takes only the standard library", imp)
			}
			// The HTTP API is plain net/http: the Lambda adapter and its
			// context stay in functions/api.
			if rel == "internal/httpapi" && strings.Contains(imp, "aws-lambda-go") {
				t.Errorf("internal/httpapi imports %s: only functions/api may know about Lambda", imp)
			}
			if !strings.HasPrefix(imp, module) {
				continue
			}
			target := strings.TrimPrefix(imp, module)
			ok := false
			for _, a := range allowed {
				ok = ok || target == a
			}
			if !ok {
				t.Errorf("%s imports %s: adapters may import only %v", rel, target, allowed)
			}
		}
	}
	for rel := range allowedInternal {
		if !seen[rel] {
			t.Errorf("package %s not found by go list: update allowedInternal", rel)
		}
	}
}

// devTree holds the tools that prove the system or run it locally.
const devTree = "internal/dev/"

// The tree shows what ships: no function links anything under
// internal/dev, and every package outside it is linked into a function,
// but for the test-support packages beside what they test (named *test,
// as net/http/httptest is).
func TestTheTreeShowsWhatShips(t *testing.T) {
	shipped := map[string]bool{}
	for _, pkg := range goList(t, "-deps", "../../functions/...") {
		rel, ours := strings.CutPrefix(pkg, module)
		if !ours {
			continue
		}
		shipped[rel] = true
		if strings.HasPrefix(rel, devTree) {
			t.Errorf("%s is linked into a function: shipped code must not import the dev tree", rel)
		}
	}
	if !shipped["internal/jobboard"] {
		t.Fatalf("go list -deps found no functions: %v", shipped)
	}
	for _, pkg := range goList(t, "../...") {
		rel := strings.TrimPrefix(pkg, module)
		testSupport := strings.HasSuffix(rel, "test")
		switch {
		case strings.HasPrefix(rel, devTree), strings.HasPrefix(rel, "functions/"), testSupport:
		case !shipped[rel]:
			t.Errorf("%s is linked into no function: a tool belongs under %s", rel, devTree)
		}
	}
}

// goList runs go list with args from this package's folder (the repository
// root is two up) and returns the packages it names.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, out)
	}
	return strings.Fields(string(out))
}
