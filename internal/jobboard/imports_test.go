package jobboard_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/jobboard/jobboard/"

// allowedInternal lists, for each package under internal/, which other
// internal packages its non-test code may import: the arrows point inward,
// from the adapters to the domain. Composition roots (functions/*,
// internal/devstack, internal/cmd/*) wire everything and are not listed.
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
	"internal/webhook/webhooktest": {"internal/localhost"},
	"internal/emf":                 {},
	"internal/localaws":            {"internal/localhost"},
	// The local stand-in for the Lambda event source mapping: linked into
	// the worker for its local mode, so it must not pull in the stand-ins'
	// launchers and test helpers (package localaws).
	"internal/localaws/eventsource": {},
	"internal/secret":               {},
	"internal/awsenv":               {},
	// The API's JSON client for the programs that drive it from outside.
	"internal/apiclient": {},
	// What the functions' mains share: their common settings and logger.
	"internal/function": {"internal/awsenv"},
	// How the functions open their database: the secret, then the pool.
	// A composition helper of the mains, apart from package function so
	// that the deploy hook links no driver.
	"internal/function/database": {"internal/postgres", "internal/secret"},
	// Free ports and the module's root, and a log buffer shared by
	// goroutines: for tests and the local tools, on the standard library.
	"internal/localhost":       {},
	"internal/syncio":          {},
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
