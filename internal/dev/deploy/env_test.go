package deploy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/awsenv"
	"github.com/jobboard/jobboard/internal/function"
	fndatabase "github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/secret"
)

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
	"AWS_ENDPOINT_URL":                    "local stand-ins for every service (the SDK reads it too)",
	"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "standard SDK setting: turns the endpoint variables off",
	"AWS_ENDPOINT_URL_SQS":                "local SQS stand-in (the SDK reads it too)",
	"AWS_ENDPOINT_URL_SESV2":              "local SES stand-in (the SDK reads it too)",
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

// awsenvReads are the variables awsenv.Load reads.
var awsenvReads = []string{awsenv.EnvRegion, awsenv.EnvDefaultRegion, awsenv.EnvAccessKeyID, awsenv.EnvSecretAccessKey,
	awsenv.EnvSessionToken, awsenv.EnvEndpointURL, awsenv.EnvIgnoreConfiguredEndpointURLs}

// packageReads are the variables that a call into one of the project's
// packages reads with the getenv it is given, by import path and function.
var packageReads = map[string]map[string][]string{
	"github.com/jobboard/jobboard/internal/secret": {
		"Database":        {secret.EnvDatabaseURL, secret.EnvDatabaseSecretARN, secret.EnvDatabaseHost, secret.EnvDatabaseSSLRootCert},
		"DatabaseAs":      {secret.EnvDatabaseURL, secret.EnvDatabaseSecretARN, secret.EnvDatabaseHost, secret.EnvDatabaseSSLRootCert},
		"WebhookSealer":   {secret.EnvWebhookSealingKey, secret.EnvWebhookSealingKeyARN},
		"NewJWTKeySource": {secret.EnvJWTSecret, secret.EnvJWTSecretARN},
	},
	"github.com/jobboard/jobboard/internal/awsenv": {"Load": awsenvReads},
	"github.com/jobboard/jobboard/internal/function": {
		"Load":                   append([]string{function.EnvLambdaRuntimeAPI, function.EnvLogLevel, function.EnvFunctionVersion}, awsenvReads...),
		"LocalInvocationTimeout": {function.EnvLocalInvocationTimeout},
	},
	// LoadSettings also reads the variable its second argument names (see
	// envReads).
	"github.com/jobboard/jobboard/internal/function/database": {
		"LoadSettings": {secret.EnvDatabaseURL, secret.EnvDatabaseSecretARN, fndatabase.EnvQueryExecMode},
		"Find":         databaseReads,
		"Open":         databaseReads,
	},
}

// databaseReads are the variables secret.Database reads.
var databaseReads = []string{secret.EnvDatabaseURL, secret.EnvDatabaseSecretARN, secret.EnvDatabaseHost, secret.EnvDatabaseSSLRootCert}

// envReads parses the non-test Go files of the package in dir and returns
// the names of the environment variables it reads: string constants passed
// to getenv(...), os.Getenv(...) or os.LookupEnv(...), plus what its calls
// into internal/secret, internal/awsenv and internal/function read
// (packageReads). problems lists what it cannot see through: a name that is
// not a constant, or getenv handed to another package.
func envReads(dir string) (reads map[string]bool, problems []string, err error) {
	fset := token.NewFileSet()
	matches, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, nil, err
	}
	var files []*ast.File
	for _, path := range matches {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no Go files in %s", dir)
	}

	// String constants, anywhere in the package, by name.
	consts := map[string]string{}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			decl, ok := n.(*ast.GenDecl)
			if !ok || decl.Tok != token.CONST {
				return true
			}
			for _, spec := range decl.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := stringLit(vs.Values[i]); ok {
							consts[name.Name] = s
						}
					}
				}
			}
			return true
		})
	}

	reads = map[string]bool{}
	for _, f := range files {
		imports := map[string]string{} // local name → path
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			pos := fset.Position(call.Pos())
			name := func(arg ast.Expr) {
				if s, ok := stringLit(arg); ok {
					reads[s] = true
					return
				}
				if id, ok := arg.(*ast.Ident); ok {
					if s, ok := consts[id.Name]; ok {
						reads[s] = true
						return
					}
				}
				problems = append(problems, fmt.Sprintf("%s: environment variable name is not a string constant", pos))
			}
			var pkg, fn string
			switch fun := call.Fun.(type) {
			case *ast.Ident:
				fn = fun.Name
			case *ast.SelectorExpr:
				if x, ok := fun.X.(*ast.Ident); ok {
					if path, isImport := imports[x.Name]; isImport {
						pkg = path
					}
				}
				fn = fun.Sel.Name
			}
			switch {
			case pkg == "" && fn == "getenv" && len(call.Args) == 1:
				name(call.Args[0])
				return true
			case pkg == "os" && (fn == "Getenv" || fn == "LookupEnv") && len(call.Args) == 1:
				name(call.Args[0])
				return true
			case packageReads[pkg] != nil:
				for _, v := range packageReads[pkg][fn] {
					reads[v] = true
				}
				if strings.HasSuffix(pkg, "/function/database") && fn == "LoadSettings" && len(call.Args) == 2 {
					if s, ok := stringLit(call.Args[1]); ok && s != "" {
						reads[s] = true
					}
				}
				return true
			}
			if pkg != "" {
				for _, arg := range call.Args {
					if id, ok := arg.(*ast.Ident); ok && id.Name == "getenv" {
						problems = append(problems, fmt.Sprintf("%s: getenv is handed to %s.%s, whose reads this test cannot see; read the variables in main or teach env_test.go about it", pos, pkg, fn))
					}
				}
			}
			return true
		})
	}
	return reads, problems, nil
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Every variable a function's code reads is set for it in template.yaml
// (or is local-only, see localOnly), and every variable the template sets
// is read: a missing one breaks the deployed function at cold start, an
// unread one is a leftover or a typo.
func TestFunctionEnvironmentMatchesTheCode(t *testing.T) {
	t.Parallel()
	tpl := loadTemplate(t)
	for name, dir := range functionDirs(t, tpl) {
		path := filepath.Join(repoRoot, "functions", dir)
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: its code, functions/%s, does not exist (%v): cannot check its environment", name, dir, err)
			continue
		}
		reads, problems, err := envReads(path)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		for _, p := range problems {
			t.Errorf("%s: %s", name, p)
		}
		env := tpl.environment(t, name)
		for _, v := range sortedKeys(reads) {
			if _, set := env[v]; !set && localOnly[v] == "" && localOnlyFor[name][v] == "" {
				t.Errorf("%s: functions/%s reads %s, which template.yaml does not set for it", name, dir, v)
			}
		}
		for v := range env {
			if !reads[v] && templateFirst[name][v] == "" {
				t.Errorf("%s: template.yaml sets %s, which functions/%s never reads (reads %v)", name, v, dir, sortedKeys(reads))
			}
		}
	}
}

// envReads itself, on a package written for the purpose.
func TestEnvReadsFindsEveryKindOfRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := `package main

import (
	"context"
	"os"

	sec "github.com/jobboard/jobboard/internal/secret"
	"example.com/config"
)

const envQueue = "QUEUE_URL"

func run(ctx context.Context, getenv func(string) string) error {
	const local = "LOCAL_CONST"
	_ = getenv("LITERAL")
	_ = getenv(envQueue)
	_ = getenv(local)
	_ = os.Getenv("FROM_OS")
	_, _, _ = sec.Database(ctx, getenv, nil)
	name := "DYNAMIC"
	_ = getenv(name)
	config.Load(getenv)
	return helper(getenv)
}

func helper(getenv func(string) string) error { _ = getenv("IN_HELPER"); return nil }
`
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main_test.go"), []byte("package main\nfunc f(getenv func(string) string) { getenv(\"TEST_ONLY\") }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reads, problems, err := envReads(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "DATABASE_HOST DATABASE_SECRET_ARN DATABASE_SSLROOTCERT DATABASE_URL FROM_OS IN_HELPER LITERAL LOCAL_CONST QUEUE_URL"
	if got := strings.Join(sortedKeys(reads), " "); got != want {
		t.Errorf("reads = %s; want %s", got, want)
	}
	if len(problems) != 2 || !strings.Contains(problems[0], "not a string constant") || !strings.Contains(problems[1], "example.com/config.Load") {
		t.Errorf("problems = %q; want the dynamic name and getenv handed to config.Load", problems)
	}
}
