package deploy

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/migrate/cfntest"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// The migration function as CloudFormation invokes it for the custom
// resource SchemaMigration: its bootstrap under the Lambda emulator,
// against a local database, with a local server in place of the
// pre-signed S3 URL that CloudFormation reads the answer from (cfntest).

// schemaMigrationID is the physical id the function gives the resource.
const schemaMigrationID = cfntest.StackID + "/" + cfntest.LogicalResourceID

func testSchemaMigration(t *testing.T, rie string, bins map[string]string) {
	embedded := pgtest.EmbeddedMigrations(t)
	// startMigrate runs the migration function over the database at url.
	startMigrate := func(t *testing.T, url string) *emulator {
		return startEmulator(t, rie, "MigrateFunction", bins["MigrateFunction"], map[string]string{
			"DATABASE_URL": url, "LOG_LEVEL": "INFO", "AWS_REGION": "us-east-1",
			"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
			"AWS_LAMBDA_FUNCTION_TIMEOUT": "60", "AWS_LAMBDA_FUNCTION_VERSION": "4",
		})
	}
	success := func(t *testing.T, a cfntest.Answer, physicalID string, version int32) {
		t.Helper()
		r := a.Response
		if r.Status != "SUCCESS" || r.PhysicalResourceID != physicalID || r.Reason != "" || r.Data["SchemaVersion"] != fmt.Sprint(version) {
			t.Errorf("answer %s; want SUCCESS, physical id %s, SchemaVersion %d", a.Body, physicalID, version)
		}
	}

	t.Run("create migrates", func(t *testing.T) {
		t.Parallel()
		db := pgtest.NewEmptyURL(t)
		cf := cfntest.New(t)
		startMigrate(t, db).invoke(cf.Request(t, "Create", ""))
		success(t, cf.Only(t), schemaMigrationID, embedded)
		pgtest.CheckMigrated(t, db)
		if v := pgtest.SchemaVersion(t, db); v != embedded {
			t.Errorf("schema version %d; want %d", v, embedded)
		}
	})

	t.Run("update applies a new migration", func(t *testing.T) {
		t.Parallel()
		db := pgtest.NewEmptyURL(t)
		pgtest.MigrateTo(t, db, embedded-1) // the previous release's schema
		cf := cfntest.New(t)
		startMigrate(t, db).invoke(cf.Request(t, "Update", schemaMigrationID))
		success(t, cf.Only(t), schemaMigrationID, embedded)
		if v := pgtest.SchemaVersion(t, db); v != embedded {
			t.Errorf("schema version %d after the update; want %d", v, embedded)
		}
	})

	// CloudFormation's rollback of a deploy that brought a migration: the
	// database cannot be reached (what may have failed the deploy), and
	// the rollback still completes.
	t.Run("an update to a lower level needs no database", func(t *testing.T) {
		t.Parallel()
		cf := cfntest.New(t)
		level := fmt.Sprint(embedded)
		startMigrate(t, "postgres://127.0.0.1:1/none?connect_timeout=2").invoke(cf.Update(t, schemaMigrationID,
			map[string]any{"MigrationLevel": fmt.Sprint(embedded + 1)}, map[string]any{"MigrationLevel": level}))
		if a := cf.Only(t); a.Response.Status != "SUCCESS" || a.Response.PhysicalResourceID != schemaMigrationID {
			t.Errorf("answer %s; want SUCCESS for %s without the database", a.Body, schemaMigrationID)
		}
	})

	t.Run("a failing migration answers failed", func(t *testing.T) {
		t.Parallel()
		db := pgtest.NewEmptyURL(t)
		if _, err := pgtest.Pool(t, db).Exec(context.Background(), "CREATE TABLE users (squatter int)"); err != nil {
			t.Fatal(err)
		}
		cf := cfntest.New(t)
		startMigrate(t, db).invoke(cf.Request(t, "Create", ""))
		a := cf.Only(t)
		if r := a.Response; r.Status != "FAILED" || r.PhysicalResourceID != schemaMigrationID || !strings.Contains(r.Reason, `relation "users" already exists (SQLSTATE 42P07)`) {
			t.Errorf("answer %s; want FAILED, physical id %s, the migration's error as the reason", a.Body, schemaMigrationID)
		}
		if v := pgtest.SchemaVersion(t, db); v != 0 {
			t.Errorf("schema version %d after the failed migration; want 0", v)
		}
	})

	t.Run("delete changes nothing", func(t *testing.T) {
		t.Parallel()
		db := pgtest.NewEmptyURL(t)
		pgtest.MigrateTo(t, db, embedded-1)
		before := catalogue(t, db)
		cf := cfntest.New(t)
		startMigrate(t, db).invoke(cf.Request(t, "Delete", schemaMigrationID))
		a := cf.Only(t)
		if r := a.Response; r.Status != "SUCCESS" || r.PhysicalResourceID != schemaMigrationID || r.Reason != "" || r.Data != nil {
			t.Errorf("answer %s; want SUCCESS, physical id %s", a.Body, schemaMigrationID)
		}
		if after := catalogue(t, db); after != before {
			t.Errorf("the database changed on Delete:\nbefore %s\nafter  %s", before, after)
		}
	})
}

// catalogue describes the database's tables, columns and schema version.
func catalogue(t *testing.T, url string) string {
	t.Helper()
	var s string
	err := pgtest.Pool(t, url).QueryRow(context.Background(), `SELECT string_agg(table_name || '.' || column_name, ',' ORDER BY table_name, column_name)
		FROM information_schema.columns WHERE table_schema = 'public'`).Scan(&s)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s v%d", s, pgtest.SchemaVersion(t, url))
}

// reach returns every resource from reaches by references and DependsOn:
// what CloudFormation creates, or updates, before it.
func reach(deps map[string][]string, from string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		for _, d := range deps[n] {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(from)
	return seen
}

// migratedFirst are the functions that must not run on a schema older than
// their code: their functions, versions and aliases (and so everything
// that invokes the aliases) come after SchemaMigration.
var migratedFirst = []string{"ApiFunction", "WorkerFunction", "SweeperFunction", "WebhookFunction", "FeedbackFunction"}

// migrationOrderProblems says what is wrong with SchemaMigration in c:
// what it invokes and when CloudFormation sends it an Update, and the
// order of the stack around it.
func migrationOrderProblems(t *testing.T, c *cfnTemplate) []string {
	t.Helper()
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	r := c.resource(t, "SchemaMigration")
	if r.Type != "Custom::SchemaMigration" {
		bad("SchemaMigration is a %s; want Custom::SchemaMigration", r.Type)
	}
	alias := c.resource(t, "MigrateFunctionAliaslive")
	if fmt.Sprint(r.Properties["ServiceToken"]) != fmt.Sprint(map[string]any{"Ref": "MigrateFunctionAliaslive"}) {
		bad("SchemaMigration's ServiceToken is %v; want the migration function's alias", r.Properties["ServiceToken"])
	}
	// An Update whenever the deploy publishes a new version: the version
	// the alias moves to.
	if fmt.Sprint(r.Properties["MigrateFunctionVersion"]) != fmt.Sprint(alias.Properties["FunctionVersion"]) {
		bad("SchemaMigration's MigrateFunctionVersion is %v; want the alias's version %v", r.Properties["MigrateFunctionVersion"], alias.Properties["FunctionVersion"])
	}
	if fmt.Sprint(r.Properties["DatabaseSecretArn"]) != fmt.Sprint(map[string]any{"Ref": "DatabaseSecretArn"}) {
		bad("SchemaMigration's DatabaseSecretArn is %v; want the parameter (another database, another migration)", r.Properties["DatabaseSecretArn"])
	}

	deps := c.dependencies()
	before := reach(deps, "SchemaMigration")
	for _, fn := range migratedFirst {
		version, _ := c.resource(t, fn+"Aliaslive").Properties["FunctionVersion"].(map[string]any)["Fn::GetAtt"].([]any)
		for _, name := range []string{fn, fmt.Sprint(version[0]), fn + "Aliaslive"} {
			if !reach(deps, name)["SchemaMigration"] {
				bad("%s does not wait for SchemaMigration", name)
			}
			if before[name] {
				bad("SchemaMigration waits for %s", name)
			}
		}
	}
	for _, name := range []string{"MigrateFunctionAliaslive", "MigrateFunctionEventInvokeConfig"} {
		if !before[name] {
			bad("SchemaMigration does not wait for %s", name)
		}
	}
	props := c.eval(t, r.Properties).(map[string]any)
	if proxy := c.created(t, "DatabaseProxyTargetGroup"); proxy != (props["DatabaseProxyTargetGroup"] == refPlaceholder("DatabaseProxyTargetGroup")) {
		bad("SchemaMigration's DatabaseProxyTargetGroup is %v with the proxy created: %v; want the target group exactly when it is", props["DatabaseProxyTargetGroup"], proxy)
	}

	// It answers within the ServiceTimeout, and Lambda's retry of an
	// invocation that did not answer starts early enough to end within
	// it too: no retry migrates after CloudFormation stopped listening.
	timeout := c.resource(t, "MigrateFunction").Properties["Timeout"].(float64)
	service, _ := props["ServiceTimeout"].(float64)
	invoke := c.eval(t, c.resource(t, "MigrateFunctionEventInvokeConfig").Properties).(map[string]any)
	age, _ := invoke["MaximumEventAgeInSeconds"].(float64)
	if service > 3600 || age < 60 || age+timeout > service || invoke["Qualifier"] != "live" {
		bad("ServiceTimeout %v, the function's Timeout %v, its async invocations %v; want a retry a minute after a failure, and every retry's start (event age) plus the Timeout within ServiceTimeout ≤ 3600",
			props["ServiceTimeout"], timeout, invoke)
	}
	// The level a rollback is recognised by is the migrations' count.
	if level := fmt.Sprint(props["MigrationLevel"]); level != fmt.Sprint(pgtest.EmbeddedMigrations(t)) {
		bad("SchemaMigration's MigrationLevel is %s; this release embeds %d migrations", level, pgtest.EmbeddedMigrations(t))
	}
	return problems
}

// The schema migration comes first: the API, the worker, the sweeper and
// the webhook function wait for it, on a new stack and on every update, in every parameter set
// (CloudFormation orders resources by their references and DependsOn).
func TestSchemaMigrationComesFirst(t *testing.T) {
	t.Parallel()
	eachSet(t, func(t *testing.T, set string) {
		for _, p := range migrationOrderProblems(t, translation(t, set)) {
			t.Error(p)
		}
	})
	// The check can fail: without its DependsOn, the API is created at
	// once, beside the migration.
	t.Run("the API without DependsOn", func(t *testing.T) {
		t.Parallel()
		c := translation(t, "defaults")
		fn := c.Resources["ApiFunction"]
		fn.DependsOn = nil
		c.Resources["ApiFunction"] = fn
		got := strings.Join(migrationOrderProblems(t, c), "\n")
		if !strings.Contains(got, "ApiFunction does not wait for SchemaMigration") || !strings.Contains(got, "ApiFunctionAliaslive does not wait") {
			t.Errorf("problems: %s; want the API and its alias not waiting", got)
		}
	})
}

// A deploy that changes only a migration builds a new migration function
// and nothing else (only it embeds the migrations): SAM then publishes a
// new version of it alone, which changes SchemaMigration's properties, so
// CloudFormation sends an Update and the migration runs, while no alias
// that CodeDeploy shifts changes (no hook would run). A change to the API
// alone leaves SchemaMigration as it was.
func TestAMigrationOnlyDeployMigrates(t *testing.T) {
	t.Parallel()
	base := translation(t, "defaults")
	for _, tt := range []struct {
		function       string
		wantMigration  bool
		wantCodeDeploy []string
	}{
		{"MigrateFunction", true, nil},
		{"ApiFunction", false, []string{"ApiFunctionAliaslive"}},
	} {
		t.Run(tt.function, func(t *testing.T) {
			t.Parallel()
			var next cfnTemplate
			cachedSamtool(t, &struct {
				Template *cfnTemplate `json:"template"`
			}{&next}, "translate", "defaults", "--code", tt.function+"="+tt.function+"-a-new-build.zip")
			changed := func(name string) bool {
				a, b := base.Resources[name], next.Resources[name]
				return fmt.Sprint(a.Properties, a.DependsOn, a.UpdatePolicy) != fmt.Sprint(b.Properties, b.DependsOn, b.UpdatePolicy)
			}
			if changed("SchemaMigration") != tt.wantMigration {
				t.Errorf("SchemaMigration %v → %v; want an update: %v", base.Resources["SchemaMigration"].Properties, next.Resources["SchemaMigration"].Properties, tt.wantMigration)
			}
			var shifted []string
			for name, r := range next.Resources {
				if r.Type == "AWS::Lambda::Alias" && r.UpdatePolicy != nil && changed(name) {
					shifted = append(shifted, name)
				}
			}
			if !slices.Equal(shifted, tt.wantCodeDeploy) {
				t.Errorf("aliases CodeDeploy would shift: %v; want %v", shifted, tt.wantCodeDeploy)
			}
		})
	}
}

// The rehearsal creates the stack through the custom resource: moto's
// CloudFormation sends the migration function (running under the Lambda
// emulator) its Create, the function migrates an empty database and
// answers at the request's ResponseURL, and only that answer completes the
// stack.
func TestDeployRehearsalMigrates(t *testing.T) {
	t.Parallel()
	embedded := pgtest.EmbeddedMigrations(t)
	eachSet(t, func(t *testing.T, set string) {
		r := rehearsal(t, set)
		if r.StatusBeforeCustomResources != "CREATE_IN_PROGRESS" || r.Status != "CREATE_COMPLETE" {
			t.Errorf("stack %s before the custom resource's answer, %s after; want CREATE_IN_PROGRESS, CREATE_COMPLETE", r.StatusBeforeCustomResources, r.Status)
		}
		if len(r.CustomResources) != 1 {
			t.Fatalf("custom resources %+v; want SchemaMigration", r.CustomResources)
		}
		cr := r.CustomResources[0]
		alias := "arn:aws:lambda:us-east-1:123456789012:function:" + r.Functions["MigrateFunction"].FunctionName + ":live"
		req := cr.Request
		if cr.LogicalResourceID != "SchemaMigration" || cr.Function != "MigrateFunction" || req.RequestType != "Create" ||
			req.ResourceType != "Custom::SchemaMigration" || req.ServiceToken != alias || req.ResourceProperties["MigrateFunctionVersion"] != "1" {
			t.Errorf("custom resource %s (%s) sent %s to %s (%s) with %v; want SchemaMigration's Create to MigrateFunction's alias %s, version 1",
				cr.LogicalResourceID, cr.ResourceType, req.RequestType, cr.Function, req.ServiceToken, req.ResourceProperties, alias)
		}
		if len(cr.Answers) != 1 {
			t.Fatalf("answers %+v; want 1", cr.Answers)
		}
		a := cr.Answers[0]
		if a.Method != http.MethodPut || a.ContentType != "" || a.Bytes > 4096 || a.Body.Status != "SUCCESS" ||
			a.Body.PhysicalResourceID != req.StackID+"/SchemaMigration" || a.Body.StackID != req.StackID ||
			a.Body.Data["SchemaVersion"] != fmt.Sprint(embedded) || cr.Result != "" {
			t.Errorf("answer %s (%q, %d bytes) %+v, invocation result %v; want a PUT without a content type: SUCCESS, %s/SchemaMigration, SchemaVersion %d",
				a.Method, a.ContentType, a.Bytes, a.Body, cr.Result, req.StackID, embedded)
		}
		if r.SchemaVersionInDatabase != embedded {
			t.Errorf("the database's schema version %d; want %d", r.SchemaVersionInDatabase, embedded)
		}
	})
}
