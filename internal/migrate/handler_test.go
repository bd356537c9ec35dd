package migrate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/jobboard/jobboard/internal/migrate"
	"github.com/jobboard/jobboard/internal/migrate/cfntest"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/postgres/schema"
)

// The handler against a real PostgreSQL, with a local server in place of
// the pre-signed S3 URL CloudFormation reads the answer from (cfntest): it
// records each PUT, and the tests read what CloudFormation would.

// physicalID is what the handler makes of the stack and the logical id.
const physicalID = cfntest.StackID + "/" + cfntest.LogicalResourceID

// handler migrates the database at url as the function does.
func handler(t *testing.T, url string) *migrate.Handler {
	t.Helper()
	h, err := migrate.New(migrate.Config{
		Migrate: func(ctx context.Context) (schema.Report, error) { return schema.Apply(ctx, url) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// tables counts the tables of the database's public schema.
func tables(t *testing.T, url string) int {
	t.Helper()
	var n int
	if err := pgtest.Pool(t, url).QueryRow(context.Background(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// checkSuccess checks an answer that CloudFormation takes for success.
func checkSuccess(t *testing.T, a cfntest.Answer, wantPhysicalID string, wantData map[string]any) {
	t.Helper()
	r := a.Response
	if r.Status != cfn.StatusSuccess || r.PhysicalResourceID != wantPhysicalID || r.Reason != "" {
		t.Errorf("answer %s; want SUCCESS, physical id %s", a.Body, wantPhysicalID)
	}
	if got, _ := json.Marshal(r.Data); string(got) != mustJSON(t, wantData) {
		t.Errorf("answer's Data %s; want %s", got, mustJSON(t, wantData))
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A stack's first deploy: Create migrates an empty database and answers
// SUCCESS with the schema's version.
func TestCreateMigrates(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	want := pgtest.EmbeddedMigrations(t)
	cf := cfntest.New(t)
	if _, err := handler(t, url).Handle(context.Background(), cf.Request(t, "Create", "")); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	checkSuccess(t, cf.Only(t), physicalID, map[string]any{"SchemaVersion": fmt.Sprint(want)})
	if v := pgtest.SchemaVersion(t, url); v != want {
		t.Errorf("schema version %d after Create; want %d", v, want)
	}
	pgtest.CheckMigrated(t, url)
}

// An Update migrates and answers with the physical id CloudFormation has,
// whatever an earlier release answered (another id would be taken for a
// replacement, and the old one deleted):
//   - a deploy that brings a new migration: Update applies it;
//   - the rollback of a failed update, which sends an Update back to the
//     old properties and may reach the previous version of the function:
//     its migrations end before the database's version, and it answers
//     SUCCESS without touching the database (a FAILED would leave the stack
//     UPDATE_ROLLBACK_FAILED).
func TestUpdate(t *testing.T) {
	t.Parallel()
	embedded := pgtest.EmbeddedMigrations(t)
	for _, tt := range []struct {
		name        string
		from, want  int32
		prepareFrom func(t *testing.T, url string)
	}{
		{"a new migration", embedded - 1, embedded, func(t *testing.T, url string) { pgtest.MigrateTo(t, url, embedded-1) }},
		{"a database ahead", embedded + 1, embedded + 1, func(t *testing.T, url string) {
			pgtest.MigrateTo(t, url, embedded)
			if _, err := pgtest.Pool(t, url).Exec(context.Background(), `UPDATE schema_version SET version = version + 1`); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			url := pgtest.NewEmptyURL(t)
			tt.prepareFrom(t, url)
			cf := cfntest.New(t)
			const earlier = "schema-migration-of-an-earlier-release"
			if _, err := handler(t, url).Handle(context.Background(), cf.Request(t, "Update", earlier)); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			checkSuccess(t, cf.Only(t), earlier, map[string]any{"SchemaVersion": fmt.Sprint(tt.want)})
			if v := pgtest.SchemaVersion(t, url); v != tt.want {
				t.Errorf("schema version %d after Update from %d; want %d", v, tt.from, tt.want)
			}
		})
	}
}

// A migration that fails answers FAILED with its error as the reason and
// the physical id the rollback's Delete will name; the database keeps no
// part of the failed migration.
func TestAFailingMigrationAnswersFailed(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	ctx := context.Background()
	// The first migration creates users: a table of that name is in its way.
	if _, err := pgtest.Pool(t, url).Exec(ctx, `CREATE TABLE users (squatter int)`); err != nil {
		t.Fatal(err)
	}
	cf := cfntest.New(t)
	if _, err := handler(t, url).Handle(ctx, cf.Request(t, "Create", "")); err != nil {
		t.Fatalf("Handle: %v (the answer went out; the invocation itself succeeds)", err)
	}
	a := cf.Only(t)
	r := a.Response
	if r.Status != cfn.StatusFailed || r.PhysicalResourceID != physicalID || r.Data != nil ||
		!strings.HasPrefix(r.Reason, "migrate: ") || !strings.Contains(r.Reason, "SQLSTATE 42P07") {
		t.Errorf("answer %s; want FAILED for %s, the migration's error (SQLSTATE 42P07) as the reason", a.Body, physicalID)
	}
	if v, n := pgtest.SchemaVersion(t, url), tables(t, url); v != 0 || n != 2 {
		t.Errorf("after the failed migration: version %d, %d tables; want 0 and 2 (the squatter, the version table)", v, n)
	}
}

// Delete (the stack deleted, or a failed create rolled back) answers
// SUCCESS, with the physical id it was given, and changes nothing; it does
// not even need the database.
func TestDeleteChangesNothing(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	for name, h := range map[string]*migrate.Handler{
		"database":             handler(t, url),
		"unreachable database": handler(t, "postgres://127.0.0.1:1/none"),
	} {
		t.Run(name, func(t *testing.T) {
			cf := cfntest.New(t)
			if _, err := h.Handle(context.Background(), cf.Request(t, "Delete", physicalID)); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			checkSuccess(t, cf.Only(t), physicalID, nil)
		})
	}
	if n := tables(t, url); n != 0 {
		t.Errorf("%d tables after Delete; want 0", n)
	}
}

// A migration that cannot finish in time (here it waits for a lock the
// test holds) is stopped before the invocation's deadline, and the answer
// says so: CloudFormation hears FAILED instead of waiting for the
// resource's ServiceTimeout.
func TestAMigrationOutOfTimeAnswersFailedBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	ctx := context.Background()
	tx, err := pgtest.Pool(t, url).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE schema_version IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	h, err := migrate.New(migrate.Config{
		Migrate:      func(ctx context.Context) (schema.Report, error) { return schema.Apply(ctx, url) },
		AnswerMargin: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	cf := cfntest.New(t)
	invocation, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := h.Handle(invocation, cf.Request(t, "Update", physicalID)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if invocation.Err() != nil {
		t.Errorf("the answer went out after the invocation's deadline")
	}
	if a := cf.Only(t); a.Response.Status != cfn.StatusFailed || !strings.Contains(a.Response.Reason, "did not finish within the function's timeout") {
		t.Errorf("answer %s; want FAILED, the migration out of time", a.Body)
	}
}

// However long the error, the answer fits CloudFormation's 4096 bytes
// (a longer one is lost, and the stack waits for the ServiceTimeout).
func TestALongReasonIsShortened(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é\"\n<", 3000) // 4 runes, 6 bytes, 10 bytes as JSON
	h, err := migrate.New(migrate.Config{
		Migrate: func(context.Context) (schema.Report, error) { return schema.Report{}, errors.New(long) },
	})
	if err != nil {
		t.Fatal(err)
	}
	cf := cfntest.New(t)
	if _, err := h.Handle(context.Background(), cf.Request(t, "Create", "")); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	a := cf.Only(t) // at most 4096 bytes
	if len(a.Body) < cfntest.MaxAnswerBytes-10 || a.Response.Status != cfn.StatusFailed ||
		!strings.HasPrefix(a.Response.Reason, "migrate: é\"\n<") || !strings.HasSuffix(a.Response.Reason, "…") {
		t.Errorf("answer of %d bytes, reason %.40q…; want FAILED, the reason cut with … to just fit", len(a.Body), a.Response.Reason)
	}
}

// Requests that cannot be answered, or not as asked, change nothing: a
// request type CloudFormation does not send is answered FAILED; one
// without a ResponseURL fails the invocation.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	h := handler(t, url)
	cf := cfntest.New(t)
	if _, err := h.Handle(context.Background(), cf.Request(t, "Replace", physicalID)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if a := cf.Only(t); a.Response.Status != cfn.StatusFailed || !strings.Contains(a.Response.Reason, `unknown request type "Replace"`) {
		t.Errorf("answer %s; want FAILED, unknown request type", a.Body)
	}
	var ev map[string]any
	if err := json.Unmarshal(cf.Request(t, "Create", ""), &ev); err != nil {
		t.Fatal(err)
	}
	delete(ev, "ResponseURL")
	if _, err := h.Handle(context.Background(), []byte(mustJSON(t, ev))); !errors.Is(err, migrate.ErrMalformedRequest) {
		t.Errorf("a Create without ResponseURL: %v; want ErrMalformedRequest", err)
	}
	if n := tables(t, url); n != 0 {
		t.Errorf("%d tables after bad requests; want 0", n)
	}
}

// An answer that does not reach CloudFormation fails the invocation, so
// that Lambda retries it (CloudFormation invokes asynchronously); the
// retry migrates again, which is a no-op, and answers.
func TestAnUndeliveredAnswerFailsTheInvocation(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	h := handler(t, url)
	cf := cfntest.New(t)
	cf.SetStatus(http.StatusForbidden) // an expired pre-signed URL
	ev := cf.Request(t, "Create", "")
	if _, err := h.Handle(context.Background(), ev); err == nil {
		t.Fatal("Handle: no error for an answer S3 refused")
	}
	cf.SetStatus(http.StatusOK)
	if _, err := h.Handle(context.Background(), ev); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	if got := cf.Answers(); len(got) != 2 || !bytes.Equal(got[0].Body, got[1].Body) || got[1].Response.Status != cfn.StatusSuccess {
		t.Errorf("answers %+v; want the same SUCCESS twice", got)
	}
}

// Any other event (the PreTraffic hook's, an invocation by hand) migrates
// and answers with the result; a failure fails the invocation.
func TestOtherEventsMigrate(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	want := pgtest.EmbeddedMigrations(t)
	for i, ev := range []string{`{}`, `{"DeploymentId":"d-EXAMPLE"}`} {
		got, err := handler(t, url).Handle(context.Background(), json.RawMessage(ev))
		wantResult := migrate.Result{Migrated: true, SchemaVersion: want, Applied: want}
		if i > 0 {
			wantResult.Applied = 0
		}
		if err != nil || got != wantResult {
			t.Errorf("Handle(%s): %+v, %v; want %+v", ev, got, err, wantResult)
		}
	}
	if _, err := handler(t, "postgres://127.0.0.1:1/none").Handle(context.Background(), json.RawMessage(`{}`)); err == nil {
		t.Error("Handle with an unreachable database: no error")
	}
}

func TestNewNeedsMigrate(t *testing.T) {
	t.Parallel()
	if _, err := migrate.New(migrate.Config{}); err == nil {
		t.Error("New without Migrate: no error")
	}
}

// unreachable is a database nothing listens for: a handler that connects
// to it fails.
const unreachable = "postgres://127.0.0.1:1/none?connect_timeout=2"

// An Update to a lower MigrationLevel of the same database (CloudFormation's
// rollback of a deploy that brought a migration, or a downgrade) answers
// SUCCESS without connecting: the database has every migration the lower
// level needs. Any other Update migrates, which with the database
// unreachable answers FAILED: the handler did try.
func TestAnUpdateToALowerLevelNeedsNoDatabase(t *testing.T) {
	t.Parallel()
	const db, other = "arn:aws:secretsmanager:us-east-1:123456789012:secret:jobboard-db-AbCdEf", "arn:aws:secretsmanager:us-east-1:123456789012:secret:other-db-XyZ123"
	for _, tt := range []struct {
		name        string
		old, props  map[string]any
		wantSuccess bool
	}{
		{"a rollback to the previous level", map[string]any{"MigrationLevel": "11"}, map[string]any{"MigrationLevel": "10"}, true},
		{"a downgrade by several levels", map[string]any{"MigrationLevel": "11"}, map[string]any{"MigrationLevel": "3"}, true},
		{"a new migration", map[string]any{"MigrationLevel": "10"}, map[string]any{"MigrationLevel": "11"}, false},
		{"the same level", map[string]any{"MigrationLevel": "10"}, map[string]any{"MigrationLevel": "10"}, false},
		{"a lower level of another database", map[string]any{"MigrationLevel": "11", "DatabaseSecretArn": other}, map[string]any{"MigrationLevel": "10", "DatabaseSecretArn": db}, false},
		{"no level before", map[string]any{}, map[string]any{"MigrationLevel": "10"}, false},
		{"a level that is no number", map[string]any{"MigrationLevel": "11"}, map[string]any{"MigrationLevel": "ten"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cf := cfntest.New(t)
			if _, err := handler(t, unreachable).Handle(context.Background(), cf.Update(t, physicalID, tt.old, tt.props)); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			a := cf.Only(t)
			if tt.wantSuccess {
				checkSuccess(t, a, physicalID, nil)
				return
			}
			if a.Response.Status != cfn.StatusFailed || !strings.Contains(a.Response.Reason, "connect") {
				t.Errorf("answer %s; want FAILED, the database unreachable", a.Body)
			}
		})
	}
}

// A handler that panics still answers: FAILED, with the panic as the
// reason, so that CloudFormation does not wait for the ServiceTimeout.
func TestAPanicAnswersFailed(t *testing.T) {
	t.Parallel()
	h, err := migrate.New(migrate.Config{
		Migrate: func(context.Context) (schema.Report, error) { panic("the migration's bug") },
	})
	if err != nil {
		t.Fatal(err)
	}
	cf := cfntest.New(t)
	if _, err := h.Handle(context.Background(), cf.Request(t, "Create", "")); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if a := cf.Only(t); a.Response.Status != cfn.StatusFailed || a.Response.PhysicalResourceID != physicalID ||
		!strings.Contains(a.Response.Reason, "panic: the migration's bug") {
		t.Errorf("answer %s; want FAILED for %s, the panic as the reason", a.Body, physicalID)
	}
}

// The answer's PUT is bounded in time: a ResponseURL that never answers
// (a network that drops it) fails the invocation within the client's
// timeout, and Lambda's retry answers again.
func TestAnAnswerThatHangsFailsTheInvocation(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	t.Cleanup(func() { close(release); hang.Close() })
	h, err := migrate.New(migrate.Config{
		Migrate: func(context.Context) (schema.Report, error) { return schema.Report{To: 10, Embedded: 10}, nil },
		Client:  &http.Client{Timeout: 200 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	var ev map[string]any
	if err := json.Unmarshal(cfntest.New(t).Request(t, "Create", ""), &ev); err != nil {
		t.Fatal(err)
	}
	ev["ResponseURL"] = hang.URL + "/answer"
	if _, err := h.Handle(context.Background(), []byte(mustJSON(t, ev))); err == nil || !strings.Contains(err.Error(), "Client.Timeout") {
		t.Errorf("Handle: %v; want the answer's timeout", err)
	}
}
