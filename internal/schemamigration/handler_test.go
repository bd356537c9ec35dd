package schemamigration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"

	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/postgres/schema"
	"github.com/jobboard/jobboard/internal/schemamigration"
)

// The handler against a real PostgreSQL, with a local HTTP server in place
// of the pre-signed S3 URL CloudFormation reads the answer from: it records
// each PUT, and the tests read what CloudFormation would.

// responseURL is the stand-in for the pre-signed S3 URL: it records every
// PUT and answers status (200 unless set).
type responseURL struct {
	srv    *httptest.Server
	mu     sync.Mutex
	puts   []put
	status int
}

type put struct {
	ContentType string
	Body        []byte
	Response    cfn.Response
}

func newResponseURL(t *testing.T) *responseURL {
	t.Helper()
	r := &responseURL{status: http.StatusOK}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if req.Method != http.MethodPut || err != nil {
			t.Errorf("answer: %s %s (%v); want a PUT", req.Method, req.URL, err)
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		p := put{ContentType: req.Header.Get("Content-Type"), Body: body}
		if err := json.Unmarshal(body, &p.Response); err != nil {
			t.Errorf("answer %s: %v", body, err)
		}
		r.mu.Lock()
		r.puts = append(r.puts, p)
		status := r.status
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// only returns the one answer the server got, failing t unless there was
// exactly one.
func (r *responseURL) only(t *testing.T) put {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.puts) != 1 {
		t.Fatalf("CloudFormation got %d answers; want 1: %+v", len(r.puts), r.puts)
	}
	return r.puts[0]
}

const (
	stackID = "arn:aws:cloudformation:us-east-1:123456789012:stack/jobboard/2f1c8d50-b1a4-11f0-9c2e-0a1b2c3d4e5f"
	// physicalID is what the handler makes of the stack and logical id.
	physicalID = stackID + "/SchemaMigration"
)

// request is a custom resource request as CloudFormation sends it.
func (r *responseURL) request(t *testing.T, requestType, physical string) json.RawMessage {
	t.Helper()
	ev := cfn.Event{
		RequestType:        cfn.RequestType(requestType),
		RequestID:          "5d478078-13e9-baf0-464a-7ef285ecc786",
		ResponseURL:        r.srv.URL + "/arn%3Aaws%3Acloudformation/SchemaMigration?X-Amz-Signature=abc",
		ResourceType:       "Custom::SchemaMigration",
		PhysicalResourceID: physical,
		LogicalResourceID:  "SchemaMigration",
		StackID:            stackID,
		ResourceProperties: map[string]any{
			"ServiceToken":           "arn:aws:lambda:us-east-1:123456789012:function:jobboard-MigrateFunction-AbC:live",
			"ServiceTimeout":         "900",
			"MigrateFunctionVersion": "4",
		},
	}
	if requestType == "Update" {
		ev.OldResourceProperties = map[string]any{"MigrateFunctionVersion": "3"}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// handler migrates the database at url as the function does.
func handler(t *testing.T, url string) *schemamigration.Handler {
	t.Helper()
	h, err := schemamigration.New(schemamigration.Config{
		Migrate: func(ctx context.Context) (schema.Report, error) { return schema.Apply(ctx, url) },
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// schemaVersion is the database's schema version, 0 without the version
// table (nothing ever migrated it).
func schemaVersion(t *testing.T, url string) int32 {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass('schema_version') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	var version int32
	if err := conn.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	return version
}

// tables counts the tables of the database's public schema.
func tables(t *testing.T, url string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// embedded is the number of migrations the build embeds.
func embedded(t *testing.T) int32 {
	t.Helper()
	files, err := fs.Glob(schema.Migrations(), "*.sql")
	if err != nil || len(files) < 2 {
		t.Fatalf("embedded migrations: %v, %v", files, err)
	}
	return int32(len(files))
}

// checkSuccess checks an answer that CloudFormation takes for success.
func checkSuccess(t *testing.T, p put, wantPhysicalID string, wantData map[string]any) {
	t.Helper()
	r := p.Response
	if r.Status != cfn.StatusSuccess || r.PhysicalResourceID != wantPhysicalID || r.RequestID != "5d478078-13e9-baf0-464a-7ef285ecc786" ||
		r.StackID != stackID || r.LogicalResourceID != "SchemaMigration" || r.Reason != "" {
		t.Errorf("answer %s; want SUCCESS for the request, physical id %s", p.Body, wantPhysicalID)
	}
	if got, _ := json.Marshal(r.Data); string(got) != mustJSON(t, wantData) {
		t.Errorf("answer's Data %s; want %s", got, mustJSON(t, wantData))
	}
	// The pre-signed URL is signed without a content type: a PUT that
	// sends one is refused by S3.
	if p.ContentType != "" {
		t.Errorf("answer sent with Content-Type %q; want none", p.ContentType)
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
	want := embedded(t)
	cf := newResponseURL(t)
	if _, err := handler(t, url).Handle(context.Background(), cf.request(t, "Create", "")); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	checkSuccess(t, cf.only(t), physicalID, map[string]any{"SchemaVersion": itoa(want)})
	if v := schemaVersion(t, url); v != want {
		t.Errorf("schema version %d after Create; want %d", v, want)
	}
	pgtest.CheckMigrated(t, url)
}

// A deploy that brings a new migration: Update applies it, and answers
// with the physical id CloudFormation has (another would be taken for a
// replacement).
func TestUpdateAppliesTheNewMigration(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	want := embedded(t)
	migrateTo(t, url, want-1)
	cf := newResponseURL(t)
	// Whatever id an earlier release answered, the same comes back.
	const earlier = "schema-migration-of-an-earlier-release"
	if _, err := handler(t, url).Handle(context.Background(), cf.request(t, "Update", earlier)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	checkSuccess(t, cf.only(t), earlier, map[string]any{"SchemaVersion": itoa(want)})
	if v := schemaVersion(t, url); v != want {
		t.Errorf("schema version %d after Update; want %d", v, want)
	}
}

// migrateTo applies the embedded migrations up to version, as the previous
// release did.
func migrateTo(t *testing.T, url string, version int32) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	m, err := migrate.NewMigrator(ctx, conn, "schema_version")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(schema.Migrations()); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, version); err != nil {
		t.Fatal(err)
	}
}

// The rollback of a failed update sends an Update back to the old
// properties, which may reach the previous version of the function: its
// migrations end before the database's version, and it answers SUCCESS
// without touching the database (otherwise the stack is left
// UPDATE_ROLLBACK_FAILED).
func TestUpdateOfAnOlderVersionSucceeds(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE schema_version SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	want := schemaVersion(t, url)
	cf := newResponseURL(t)
	if _, err := handler(t, url).Handle(ctx, cf.request(t, "Update", physicalID)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	checkSuccess(t, cf.only(t), physicalID, map[string]any{"SchemaVersion": itoa(want)})
	if v := schemaVersion(t, url); v != want {
		t.Errorf("schema version %d; want %d, untouched", v, want)
	}
}

// A migration that fails answers FAILED with its error as the reason and
// the physical id the rollback's Delete will name; the database keeps no
// part of the failed migration.
func TestAFailingMigrationAnswersFailed(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The first migration creates users: a table of that name is in its way.
	if _, err := conn.Exec(ctx, `CREATE TABLE users (squatter int)`); err != nil {
		t.Fatal(err)
	}
	cf := newResponseURL(t)
	if _, err := handler(t, url).Handle(ctx, cf.request(t, "Create", "")); err != nil {
		t.Fatalf("Handle: %v (the answer went out; the invocation itself succeeds)", err)
	}
	p := cf.only(t)
	r := p.Response
	if r.Status != cfn.StatusFailed || r.PhysicalResourceID != physicalID || r.Data != nil ||
		!strings.HasPrefix(r.Reason, "migrate: ") || !strings.Contains(r.Reason, "SQLSTATE 42P07") {
		t.Errorf("answer %s; want FAILED for %s, the migration's error (SQLSTATE 42P07) as the reason", p.Body, physicalID)
	}
	if v, n := schemaVersion(t, url), tables(t, url); v != 0 || n != 2 {
		t.Errorf("after the failed migration: version %d, %d tables; want 0 and 2 (the squatter, the version table)", v, n)
	}
}

// Delete (the stack deleted, or a failed create rolled back) answers
// SUCCESS, with the physical id it was given, and changes nothing; it does
// not even need the database.
func TestDeleteChangesNothing(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	for name, h := range map[string]*schemamigration.Handler{
		"database":             handler(t, url),
		"unreachable database": handler(t, "postgres://127.0.0.1:1/none"),
	} {
		t.Run(name, func(t *testing.T) {
			cf := newResponseURL(t)
			if _, err := h.Handle(context.Background(), cf.request(t, "Delete", physicalID)); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			checkSuccess(t, cf.only(t), physicalID, nil)
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
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE schema_version IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	h, err := schemamigration.New(schemamigration.Config{
		Migrate:      func(ctx context.Context) (schema.Report, error) { return schema.Apply(ctx, url) },
		AnswerMargin: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	cf := newResponseURL(t)
	invocation, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := h.Handle(invocation, cf.request(t, "Update", physicalID)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if invocation.Err() != nil {
		t.Errorf("the answer went out after the invocation's deadline")
	}
	p := cf.only(t)
	if p.Response.Status != cfn.StatusFailed || !strings.Contains(p.Response.Reason, "did not finish within the function's timeout") {
		t.Errorf("answer %s; want FAILED, the migration out of time", p.Body)
	}
}

// However long the error, the answer fits CloudFormation's 4096 bytes
// (a longer one is lost, and the stack waits for the ServiceTimeout).
func TestALongReasonIsShortened(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é\"\n<", 3000) // 4 runes, 6 bytes, 10 bytes as JSON
	h, err := schemamigration.New(schemamigration.Config{
		Migrate: func(context.Context) (schema.Report, error) { return schema.Report{}, errors.New(long) },
	})
	if err != nil {
		t.Fatal(err)
	}
	cf := newResponseURL(t)
	if _, err := h.Handle(context.Background(), cf.request(t, "Create", "")); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	p := cf.only(t)
	if len(p.Body) > 4096 || len(p.Body) < 4000 || p.Response.Status != cfn.StatusFailed ||
		!strings.HasPrefix(p.Response.Reason, "migrate: é\"\n<") || !strings.HasSuffix(p.Response.Reason, "…") {
		t.Errorf("answer of %d bytes, reason %.40q…; want FAILED, at most 4096 bytes, the reason cut with …", len(p.Body), p.Response.Reason)
	}
}

// Requests that cannot be answered, or not as asked, change nothing: a
// request type CloudFormation does not send is answered FAILED; one
// without a ResponseURL fails the invocation.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	h := handler(t, url)
	cf := newResponseURL(t)
	if _, err := h.Handle(context.Background(), cf.request(t, "Replace", physicalID)); err != nil {
		t.Fatalf("Handle: %v", err)
	}
	if p := cf.only(t); p.Response.Status != cfn.StatusFailed || !strings.Contains(p.Response.Reason, `unknown request type "Replace"`) {
		t.Errorf("answer %s; want FAILED, unknown request type", p.Body)
	}
	var ev map[string]any
	if err := json.Unmarshal(cf.request(t, "Create", ""), &ev); err != nil {
		t.Fatal(err)
	}
	delete(ev, "ResponseURL")
	if _, err := h.Handle(context.Background(), []byte(mustJSON(t, ev))); !errors.Is(err, schemamigration.ErrMalformedRequest) {
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
	cf := newResponseURL(t)
	cf.mu.Lock()
	cf.status = http.StatusForbidden // an expired pre-signed URL
	cf.mu.Unlock()
	ev := cf.request(t, "Create", "")
	if _, err := h.Handle(context.Background(), ev); err == nil {
		t.Fatal("Handle: no error for an answer S3 refused")
	}
	cf.mu.Lock()
	cf.status = http.StatusOK
	cf.mu.Unlock()
	if _, err := h.Handle(context.Background(), ev); err != nil {
		t.Fatalf("the retry: %v", err)
	}
	cf.mu.Lock()
	defer cf.mu.Unlock()
	if len(cf.puts) != 2 || !bytes.Equal(cf.puts[0].Body, cf.puts[1].Body) || cf.puts[1].Response.Status != cfn.StatusSuccess {
		t.Errorf("answers %+v; want the same SUCCESS twice", cf.puts)
	}
}

// Any other event (the PreTraffic hook's, an invocation by hand) migrates
// and answers with the result; a failure fails the invocation.
func TestOtherEventsMigrate(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	want := embedded(t)
	for i, ev := range []string{`{}`, `{"DeploymentId":"d-EXAMPLE"}`} {
		got, err := handler(t, url).Handle(context.Background(), json.RawMessage(ev))
		wantResult := schemamigration.Result{Migrated: true, SchemaVersion: want, Applied: want}
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
	if _, err := schemamigration.New(schemamigration.Config{}); err == nil {
		t.Error("New without Migrate: no error")
	}
}

func itoa(v int32) string {
	b, _ := json.Marshal(v)
	return string(b)
}
