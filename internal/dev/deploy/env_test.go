package deploy

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apisettings "github.com/jobboard/jobboard/functions/api/settings"
	feedbacksettings "github.com/jobboard/jobboard/functions/feedback/settings"
	migratesettings "github.com/jobboard/jobboard/functions/migrate/settings"
	hooksettings "github.com/jobboard/jobboard/functions/pretraffichook/settings"
	sweepersettings "github.com/jobboard/jobboard/functions/sweeper/settings"
	webhooksettings "github.com/jobboard/jobboard/functions/webhook/settings"
	workersettings "github.com/jobboard/jobboard/functions/worker/settings"
	"github.com/jobboard/jobboard/internal/function"
	"github.com/jobboard/jobboard/internal/secret"
)

// loaders are the functions' settings loaders, by their folder under
// functions/: each reads, through the getenv it is given, every variable
// its function uses, whatever their values.
var loaders = map[string]func(getenv func(string) string){
	"api":            loader(apisettings.Load),
	"worker":         loader(workersettings.Load),
	"sweeper":        loader(sweepersettings.Load),
	"webhook":        loader(webhooksettings.Load),
	"feedback":       loader(feedbacksettings.Load),
	"migrate":        loader(migratesettings.Load),
	"pretraffichook": loader(hooksettings.Load),
}

// loader drops what load returns: only the names it reads count here.
func loader[S any](load func(func(string) string) (S, error)) func(getenv func(string) string) {
	return func(getenv func(string) string) { _, _ = load(getenv) }
}

// reads calls load with a getenv that answers env's values and records the
// names asked for.
func reads(load func(getenv func(string) string), env map[string]string) map[string]bool {
	read := map[string]bool{}
	load(func(name string) string {
		read[name] = true
		return env[name]
	})
	return read
}

// localOnly are the variables a function may read that template.yaml does
// not set, each with the reason.
var localOnly = map[string]string{
	secret.EnvDatabaseURL:                 "local runs; on AWS the URL is built from the DATABASE_SECRET_ARN secret",
	secret.EnvJWTSecret:                   "local runs; on AWS the key is the JWT_SECRET_ARN secret",
	"PORT":                                "the API's local HTTP server",
	function.EnvLambdaRuntimeAPI:          "set by Lambda; tells a main that it runs inside Lambda",
	"AWS_LAMBDA_FUNCTION_NAME":            "set by Lambda",
	function.EnvFunctionVersion:           "set by Lambda: the version a sandbox runs, a dimension of the metrics",
	"AWS_LAMBDA_FUNCTION_MEMORY_SIZE":     "set by Lambda (the function's memory, in MB)",
	"AWS_REGION":                          "set by Lambda",
	"AWS_DEFAULT_REGION":                  "set by Lambda",
	"AWS_ACCESS_KEY_ID":                   "set by Lambda (the execution role's credentials)",
	"AWS_SECRET_ACCESS_KEY":               "set by Lambda (the execution role's credentials)",
	"AWS_SESSION_TOKEN":                   "set by Lambda (the execution role's credentials)",
	"AWS_ENDPOINT_URL":                    "local stand-ins for every service",
	"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "standard SDK setting: turns the endpoint variables off",
	"AWS_ENDPOINT_URL_SQS":                "local SQS stand-in",
	"AWS_ENDPOINT_URL_SESV2":              "local SES stand-in",
	"AWS_ENDPOINT_URL_SECRETS_MANAGER":    "local Secrets Manager stand-in (tests)",
	"AWS_ENDPOINT_URL_LAMBDA":             "local Lambda stand-in (the hook's tests)",
	"AWS_ENDPOINT_URL_CODEDEPLOY":         "local CodeDeploy stand-in (the hook's tests)",
	secret.EnvWebhookSealingKey:           "local runs; on AWS the key is the WEBHOOK_SEALING_KEY_SECRET_ARN secret",
	"WEBHOOK_ALLOW_INSECURE":              "local development and tests only (http, any port, loopback); never deployed",
}

// localOnlyFor are local-only variables of one function.
var localOnlyFor = map[string]map[string]string{
	"ApiFunction": {
		"PASSWORD_HASH_CONCURRENCY": "optional: a Lambda sandbox serves one request at a time, so it hashes one password at a time whatever the setting; the default follows the memory Lambda gives",
	},
	"WorkerFunction": {
		"STATUS_EVENTS_QUEUE_URL":  "the local poller of `make dev`; on AWS the SQS event source mapping polls",
		"LOCAL_INVOCATION_TIMEOUT": "the local poller's deadline, shortened by `make chaos`; on AWS the function's Timeout",
	},
	"SweeperFunction": {
		"SWEEP_INTERVAL": "the local loop of `make dev`; on AWS the EventBridge schedule sets the pace",
		"SWEEP_GRACE":    "shortened by `make chaos`; the deployed sweeper keeps the default",
	},
	"FeedbackFunction": {
		"FEEDBACK_QUEUE_URL":       "the local poller of `make dev`; on AWS the SQS event source mapping polls",
		"LOCAL_INVOCATION_TIMEOUT": "the local poller's deadline; on AWS the function's Timeout",
	},
	"WebhookFunction": {
		"LOCAL_INVOCATION_TIMEOUT": "the local poller's deadline; on AWS the function's Timeout",
		"WEBHOOK_ATTEMPT_TIMEOUT":  "the code's default (10 s) is the deployed value; tests shorten it",
		"WEBHOOK_BACKOFF_BASE":     "the code's default (20 s) is the deployed value; `make chaos` shortens it",
		"WEBHOOK_BACKOFF_MAX":      "the code's default (12 h, SQS's longest visibility) is the deployed value; `make chaos` shortens it",
	},
}

// templateFirst are variables the template may set for a function before
// its code reads them, each with the reason. An entry stays correct once the
// code reads the variable (then it is simply not needed).
var templateFirst = map[string]map[string]string{
	"ApiFunction": {
		"CORS_ALLOWED_ORIGINS":     "on AWS API Gateway answers CORS (HttpApi CorsConfiguration); the function gets the same origins for the local server's CORS",
		"DATABASE_QUERY_EXEC_MODE": queryExecMode,
	},
	"WorkerFunction":   {"DATABASE_QUERY_EXEC_MODE": queryExecMode},
	"SweeperFunction":  {"DATABASE_QUERY_EXEC_MODE": queryExecMode},
	"MigrateFunction":  {"DATABASE_QUERY_EXEC_MODE": queryExecMode},
	"WebhookFunction":  {"DATABASE_QUERY_EXEC_MODE": queryExecMode},
	"FeedbackFunction": {"DATABASE_QUERY_EXEC_MODE": queryExecMode},
	// Globals give every function the database's settings; the hook never
	// connects to the database: it invokes the migration function.
	"PreTrafficHookFunction": {
		"DATABASE_HOST":            "the hook never connects to the database",
		"DATABASE_SSLROOTCERT":     "the hook never connects to the database",
		"DATABASE_QUERY_EXEC_MODE": "the hook never connects to the database",
	},
}

// queryExecMode is why DATABASE_QUERY_EXEC_MODE is set behind an RDS Proxy:
// pgx's query exec mode ("exec": no named prepared statements, which would
// pin each client connection to a database connection), for the database
// settings to read.
const queryExecMode = "pgx's query exec mode behind RDS Proxy, for the database settings to read"

// environmentProblems checks the names that the settings loader load of
// the function name reads against env, the environment template.yaml
// gives it: every name read is set there or is local-only, every name set
// there is read (or listed in templateFirst), and the names read are the
// same whether nothing is set (local) or env is, inside Lambda: a loader
// that skipped a name for some values would hide it from this test.
func environmentProblems(name string, load func(getenv func(string) string), env map[string]string) []string {
	var problems []string
	local := reads(load, nil)
	inLambda := maps.Clone(env)
	inLambda[function.EnvLambdaRuntimeAPI] = "127.0.0.1:9001"
	deployed := reads(load, inLambda)
	for _, v := range sortedKeys(local) {
		if !deployed[v] {
			problems = append(problems, fmt.Sprintf("%s: its settings loader reads %s locally but not with template.yaml's environment in Lambda: read every variable, whatever the values", name, v))
		}
	}
	for _, v := range sortedKeys(deployed) {
		if !local[v] {
			problems = append(problems, fmt.Sprintf("%s: its settings loader reads %s with template.yaml's environment in Lambda but not locally: read every variable, whatever the values", name, v))
		}
		if _, set := env[v]; !set && localOnly[v] == "" && localOnlyFor[name][v] == "" {
			problems = append(problems, fmt.Sprintf("%s: its settings loader reads %s, which template.yaml does not set for it", name, v))
		}
	}
	for _, v := range sortedKeys(env) {
		if !deployed[v] && templateFirst[name][v] == "" {
			problems = append(problems, fmt.Sprintf("%s: template.yaml sets %s, which its settings loader never reads (reads %v)", name, v, sortedKeys(deployed)))
		}
	}
	return problems
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// Every variable a function's settings loader reads is set for it in
// template.yaml (or is local-only, see localOnly), and every variable the
// template sets is read: a missing one breaks the deployed function at
// cold start, an unread one is a leftover or a typo. The names are those
// the loader asks a recording getenv for: the wiring gets values, never
// the environment, so the loader's are all the function reads.
func TestFunctionEnvironmentMatchesTheCode(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	seen := map[string]bool{}
	for name, dir := range functionDirs(t, tpl) {
		seen[dir] = true
		if _, err := os.Stat(filepath.Join(repoRoot, "functions", dir)); err != nil {
			t.Errorf("%s: its code, functions/%s, does not exist (%v): cannot check its environment", name, dir, err)
			continue
		}
		load, ok := loaders[dir]
		if !ok {
			t.Errorf("%s: functions/%s has no settings loader in loaders: add its settings package's Load", name, dir)
			continue
		}
		for _, p := range environmentProblems(name, load, tpl.environment(t, name)) {
			t.Error(p)
		}
	}
	for dir := range loaders {
		if !seen[dir] {
			t.Errorf("loaders lists functions/%s, which builds no function of template.yaml", dir)
		}
	}
}

// environmentProblems itself, on loaders written for the purpose: each
// mismatch it exists to catch is reported.
func TestEnvironmentProblemsFindsEachMismatch(t *testing.T) {
	t.Parallel()
	load := func(getenv func(string) string) {
		_ = getenv("QUEUE_URL")
		_ = getenv(secret.EnvDatabaseURL) // local-only: in order
		_ = getenv("NOT_IN_TEMPLATE")
		if getenv(function.EnvLambdaRuntimeAPI) == "" {
			_ = getenv("ONLY_LOCALLY")
		}
		if getenv("FLAG") != "" {
			_ = getenv("ONLY_WHEN_FLAG_SET")
		}
	}
	env := map[string]string{"QUEUE_URL": "q", "FLAG": "1", "NEVER_READ": "x", "ONLY_WHEN_FLAG_SET": "z"}
	problems := environmentProblems("SomeFunction", load, env)
	got := strings.Join(problems, "\n")
	wants := []string{
		"reads ONLY_LOCALLY locally but not with template.yaml's environment",
		"reads ONLY_WHEN_FLAG_SET with template.yaml's environment in Lambda but not locally",
		"reads NOT_IN_TEMPLATE, which template.yaml does not set",
		"template.yaml sets NEVER_READ, which its settings loader never reads",
	}
	for _, want := range wants {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
	// QUEUE_URL, DATABASE_URL (local-only) and FLAG are in order.
	if len(problems) != len(wants) {
		t.Errorf("%d problems, want %d:\n%s", len(problems), len(wants), got)
	}
}
