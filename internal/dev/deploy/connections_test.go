package deploy

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// Database pool sizes of the functions (their mains): the API's lambdaPool,
// the worker's poolSize, the sweeper's MaxConns, the webhook function's
// poolSize, and the one connection the migration holds (tern,
// internal/postgres/schema). The hook never connects.
const (
	apiPoolSize     = 2
	workerPoolSize  = 2
	sweeperPoolSize = 1
	webhookPoolSize = 2
	migratePoolSize = 1
)

// apiAnswerMargin is functions/api's answerMargin: the end of an
// invocation the API keeps to answer 503 itself.
const apiAnswerMargin = time.Second

// unreservedSweeps is how many sweeps can run at once without a
// reservation: one a minute (the schedule), each at most 60 s (its
// Timeout), none retried and none older than 60 s (EventInvokeConfig).
const unreservedSweeps = 2

// database is what a parameter set is sized for: the smallest RDS for
// PostgreSQL instance class docs/deploying.md names for it. RDS sets
// max_connections to LEAST(DBInstanceClassMemory/9531392, 5000)
// (https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/CHAP_Limits.html#RDS_Limits.MaxConnections);
// a class's DBInstanceClassMemory is a little less than its memory, so
// maxConnections is an upper bound.
type database struct {
	class string
	gib   int
}

func (d database) maxConnections() int {
	return min(d.gib<<30/9531392, 5000)
}

var databaseFor = map[string]database{
	"defaults":          {"db.t4g.micro", 1},
	"samconfig.default": {"db.t4g.micro", 1},
	"samconfig.prod":    {"db.t4g.medium", 4},
}

// functionsShare is the share of max_connections the functions may use
// when they connect directly: what the RDS Proxy takes when there is one
// (MaxConnectionsPercent), leaving the rest to RDS's reserved
// connections, a console and `make migrate`.
const functionsShare = 0.8

// The connection arithmetic of every parameter set. Each sandbox holds its
// own pool, and a frozen sandbox keeps its connections, so the database
// must have room for every sandbox that can exist at once:
//
//	Σ concurrency × pool = API + worker + sweeper + webhooks + migration (during a deploy)
//
// against the functions' share of the database: through the RDS Proxy its
// share of max_connections (MaxConnectionsPercent); directly, the same
// share. Behind the proxy, Σ is what the database would need if every
// client connection were pinned (DATABASE_QUERY_EXEC_MODE=exec sends no
// named prepared statements, the main cause of pinning, so it needs far
// fewer). Without a reservation the API's sandboxes are bounded by the
// account's concurrency, not by the stack: the test computes how many fit,
// and docs/deploying.md says when to reserve. The timeouts leave the API
// the last second of its invocation to answer 503 itself.
func TestDatabaseConnectionsAreBounded(t *testing.T) {
	t.Parallel()
	docs, err := os.ReadFile(repoRoot + "/docs/deploying.md")
	if err != nil {
		t.Fatal(err)
	}
	eachSet(t, func(t *testing.T, set string) {
		c := translation(t, set)
		r := rehearsal(t, set)
		db := databaseFor[set]

		worker := c.eval(t, c.resource(t, "WorkerFunctionStatusEvents").Properties).(map[string]any)["ScalingConfig"].(map[string]any)["MaximumConcurrency"]
		var workers int
		if _, err := fmt.Sscan(fmt.Sprint(worker), &workers); err != nil || workers < 1 {
			t.Fatalf("worker MaximumConcurrency %v", worker)
		}
		webhook := c.eval(t, c.resource(t, "WebhookFunctionWebhookEvents").Properties).(map[string]any)["ScalingConfig"].(map[string]any)["MaximumConcurrency"]
		var webhooks int
		if _, err := fmt.Sscan(fmt.Sprint(webhook), &webhooks); err != nil || webhooks < 1 {
			t.Fatalf("webhook MaximumConcurrency %v", webhook)
		}
		sweeps := unreservedSweeps
		if n := r.Functions["SweeperFunction"].ReservedConcurrentExecutions; n != nil {
			sweeps = *n
		}
		// One PreTraffic hook per deployment group, each invokes the
		// migration once; they queue on the advisory lock, each
		// holding its connection. SchemaMigration's migration ends
		// before any alias moves, so before any hook runs.
		migrations := len(c.ofType("AWS::CodeDeploy::DeploymentGroup"))
		others := workers*workerPoolSize + sweeps*sweeperPoolSize + webhooks*webhookPoolSize + migrations*migratePoolSize

		share := functionsShare
		proxy := c.condition(t, "CreateDatabaseProxy")
		if proxy {
			pool := c.resource(t, "DatabaseProxyTargetGroup").Properties["ConnectionPoolConfigurationInfo"].(map[string]any)
			share = pool["MaxConnectionsPercent"].(float64) / 100
			borrow := time.Duration(pool["ConnectionBorrowTimeout"].(float64)) * time.Second
			statement, err := time.ParseDuration(c.Values["ApiStatementTimeout"])
			if err != nil {
				t.Fatal(err)
			}
			timeout := time.Duration(c.resource(t, "ApiFunction").Properties["Timeout"].(float64)) * time.Second
			if borrow+statement+apiAnswerMargin > timeout {
				t.Errorf("a borrow (%v) and a statement (%v) and the API's answer margin (%v) outlast its Timeout (%v): Lambda, not the API, would answer",
					borrow, statement, apiAnswerMargin, timeout)
			}
			t.Logf("%s timeouts: borrow %v + statement %v + answer margin %v = %v ≤ Timeout %v",
				set, borrow, statement, apiAnswerMargin, borrow+statement+apiAnswerMargin, timeout)
		}
		budget := int(math.Floor(float64(db.maxConnections()) * share))

		if n := r.Functions["ApiFunction"].ReservedConcurrentExecutions; n != nil {
			total := *n*apiPoolSize + others
			line := fmt.Sprintf("%d × %d + %d × %d + %d × %d + %d × %d + %d × %d = %d", *n, apiPoolSize, workers, workerPoolSize,
				sweeps, sweeperPoolSize, webhooks, webhookPoolSize, migrations, migratePoolSize, total)
			t.Logf("%s: %s ≤ %d (%.0f %% of %s's max_connections %d; through the proxy: %v)", set, line, budget, share*100, db.class, db.maxConnections(), proxy)
			if total > budget {
				t.Errorf("%s: %s > %d", set, line, budget)
			}
			if !strings.Contains(string(docs), line) {
				t.Errorf("docs/deploying.md does not show %q", line)
			}
			return
		}
		fit := (budget - others) / apiPoolSize
		t.Logf("%s: no API reservation: the API may run %d sandboxes (%d - %d × %d - %d × %d - %d × %d - %d × %d) / %d before %s (%d of %d) is full",
			set, fit, budget, workers, workerPoolSize, sweeps, sweeperPoolSize, webhooks, webhookPoolSize, migrations, migratePoolSize, apiPoolSize, db.class, budget, db.maxConnections())
		if fit < 10 {
			t.Errorf("%s: the API fits only %d sandboxes in %s", set, fit, db.class)
		}
		if want := fmt.Sprintf("%d API sandboxes", fit); !strings.Contains(string(docs), want) {
			t.Errorf("docs/deploying.md does not say %q", want)
		}
	})
}
