package jobboard_test

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/jobboard/jobboard/"

// allowedInternal lists, for each package of the module, which other
// internal packages its non-test code may import: the arrows point inward,
// from the adapters to the domain. Every package is listed, or is a
// composition root (compositionRoot): a package the test does not know
// fails it, so a new package states its arrows when it is added.
var allowedInternal = map[string][]string{
	"internal/jobboard": {},
	"internal/postgres": {"internal/jobboard"},
	"internal/httpapi":  {"internal/jobboard", "internal/emf"},
	"internal/queue":    {"internal/jobboard"},
	"internal/mail":     {"internal/jobboard"},
	"internal/worker":   {"internal/jobboard", "internal/emf", "internal/sqsbatch"},
	"internal/outbox":   {"internal/jobboard"},
	// The scheduled sweep: stragglers of the outbox, backlogs, retention.
	"internal/sweeper": {"internal/jobboard", "internal/emf"},
	// The delivery feedback function's handler: SES's events, decoded.
	"internal/feedback": {"internal/jobboard", "internal/emf", "internal/sqsbatch"},
	// The webhook delivery function's handler and client, and the
	// receivers its tests and the chaos run use.
	"internal/webhook":             {"internal/jobboard", "internal/emf", "internal/sqsbatch"},
	"internal/webhook/webhooktest": {"internal/dev/localhost"},
	"internal/emf":                 {},
	// The SQS batch consumer that the worker, the webhook and the feedback
	// functions plug their record logic into.
	"internal/sqsbatch":     {"internal/jobboard"},
	"internal/dev/localaws": {"internal/dev/localhost"},
	// The Lambda event source mapping played locally: linked into the
	// worker and the webhook function for their local mode.
	"internal/function/eventsource": {},
	"internal/secret":               {},
	"internal/awsenv":               {},
	// The API's JSON client for the programs that drive it from outside.
	"internal/dev/apiclient": {},
	// What the functions' mains share: their common settings and logger.
	"internal/function": {"internal/awsenv"},
	// How the functions open their database: the secret, then the pool.
	// A composition helper of the mains, apart from package function so
	// that the deploy hook links no driver.
	"internal/function/database": {"internal/postgres", "internal/secret"},
	// Free ports and the module's root, and a log buffer shared by
	// goroutines: for tests and the local tools, on the standard library.
	"internal/dev/localhost":   {},
	"internal/dev/syncio":      {},
	"internal/postgres/schema": {},
	// The deploy's PreTraffic hook: migrate, smoke-test, report.
	"internal/pretraffichook": {},
	// The migration function's answers to CloudFormation, which say what
	// schema.Apply did.
	"internal/migrate":         {"internal/postgres/schema"},
	"internal/migrate/cfntest": {},
	// A TCP proxy that injects faults, for tests and the chaos run.
	"internal/dev/faultproxy": {},
	// A stand-in for SES's sending quota (a token bucket with latency in
	// front of the local SES), for the pacing tests and the quota benchmark.
	"internal/dev/quota": {},
	// Packages of tests alone: the deploy's (template, emulator, moto
	// rehearsal) and the documents' (links, figures).
	"internal/dev/deploy": {},
	"internal/dev/docs":   {},
	// The digest of a function's settings that the Lambda builds write
	// beside each bootstrap (internal/dev/cmd/settingsdigest).
	"internal/dev/deploy/settings": {},
	// Test support beside what it tests (named *test, as httptest is).
	"internal/httpapi/openapitest": {"internal/httpapi", "internal/dev/localhost"},
	"internal/postgres/pgtest":     {"internal/jobboard", "internal/postgres", "internal/postgres/schema", "internal/dev/localhost"},
	"internal/secret/secrettest":   {"internal/secret"},
	"internal/worker/workertest": {"internal/jobboard", "internal/worker", "internal/mail", "internal/postgres",
		"internal/postgres/pgtest", "internal/queue", "internal/function/eventsource",
		"internal/dev/localaws", "internal/dev/syncio"},
}

// compositionRoot reports the packages that wire everything and so may
// import any package: the functions' mains, and the dev tree's programs
// and harnesses that run the whole system.
func compositionRoot(rel string) bool {
	switch {
	case strings.HasPrefix(rel, "functions/"), strings.HasPrefix(rel, "internal/dev/cmd/"):
		return true
	}
	return rel == "internal/dev/devstack" || rel == "internal/dev/chaos"
}

// The domain imports only the standard library, and no adapter imports
// another adapter: they meet only in the composition roots.
func TestImportsPointInward(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", "../...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, problem := range importProblems(strings.Split(strings.TrimSpace(string(out)), "\n"), true) {
		t.Error(problem)
	}
}

// A package the test does not know fails it: it must be listed (or be a
// composition root) before its arrows are taken on trust.
func TestImportsFailsOnAnUnlistedPackage(t *testing.T) {
	got := importProblems([]string{
		module + "internal/jobboard:context",
		module + "internal/newthing:" + module + "internal/jobboard",
	}, false)
	want := "package internal/newthing is not in allowedInternal: list the internal packages it may import"
	found := false
	for _, p := range got {
		found = found || p == want
	}
	if !found {
		t.Errorf("importProblems = %q, want among them %q", got, want)
	}
}

// importProblems checks go list's "package:imports" lines against
// allowedInternal and returns what breaks the rules; for the whole module
// (whole), a listed package that go list did not name too.
func importProblems(lines []string, whole bool) []string {
	var problems []string
	seen := map[string]bool{}
	for _, line := range lines {
		pkg, imports, _ := strings.Cut(line, ":")
		rel := strings.TrimPrefix(pkg, module)
		if compositionRoot(rel) {
			continue
		}
		allowed, listed := allowedInternal[rel]
		if !listed {
			problems = append(problems, fmt.Sprintf("package %s is not in allowedInternal: list the internal packages it may import", rel))
			continue
		}
		seen[rel] = true
		for _, imp := range strings.Fields(imports) {
			if rel == "internal/jobboard" && strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") {
				problems = append(problems, fmt.Sprintf("internal/jobboard imports %s: the domain takes only the standard library", imp))
			}
			// The HTTP API is plain net/http: the Lambda adapter and its
			// context stay in functions/api.
			if rel == "internal/httpapi" && strings.Contains(imp, "aws-lambda-go") {
				problems = append(problems, fmt.Sprintf("internal/httpapi imports %s: only functions/api may know about Lambda", imp))
			}
			target, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			ok := false
			for _, a := range allowed {
				ok = ok || target == a
			}
			if !ok {
				problems = append(problems, fmt.Sprintf("%s imports %s: it may import only %v", rel, target, allowed))
			}
		}
	}
	if whole {
		for rel := range allowedInternal {
			if !seen[rel] {
				problems = append(problems, fmt.Sprintf("package %s not found by go list: update allowedInternal", rel))
			}
		}
	}
	return problems
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
