package pretraffichook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"
	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/postgres/schema"
	"github.com/jobboard/jobboard/internal/pretraffichook"
)

// These tests run the hook against the API's own code (its handler behind
// the Lambda adapter, over a real database) and real migrations; only the
// CodeDeploy call is stood in for, by a recorder. internal/dev/deploy runs the
// built functions under the Lambda runtime emulator.

// inProcessAPI invokes the API's handler over url's database as Lambda
// would invoke its function: an HTTP API event in, a response out.
type inProcessAPI struct {
	adapter *httpadapter.HandlerAdapterV2
	calls   atomic.Int32
}

func newAPI(t *testing.T, url string) *inProcessAPI {
	t.Helper()
	db := pgtest.Open(t, url)
	h := httpapi.NewServer(httpapi.Config{
		Writes: db, Users: db, Companies: db, Jobs: db, Applications: db, Pinger: db, Logins: db,
		TokenKey: []byte(strings.Repeat("k", 32)),
	})
	return &inProcessAPI{adapter: httpadapter.NewV2(h)}
}

func (a *inProcessAPI) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	a.calls.Add(1)
	var req events.APIGatewayV2HTTPRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, err
	}
	resp, err := a.adapter.ProxyWithContext(ctx, req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(resp)
}

// reports records what the hook tells CodeDeploy; fail makes it refuse.
type reports struct {
	mu   sync.Mutex
	got  []string
	fail error
}

func (r *reports) ReportHook(_ context.Context, deploymentID, executionID, status string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, deploymentID+" "+executionID+" "+status)
	return r.fail
}

func (r *reports) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

var deployment = pretraffichook.Event{DeploymentID: "d-ABCDEF123", LifecycleEventHookExecutionID: "exec-1"}

func newHook(t *testing.T, migrate func(context.Context) error, api pretraffichook.Invoker, r pretraffichook.Reporter) *pretraffichook.Hook {
	t.Helper()
	h, err := pretraffichook.New(pretraffichook.Config{Migrate: migrate, API: api, Reporter: r, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func migrateTo(url string) func(context.Context) error {
	return func(ctx context.Context) error { return schema.Migrate(ctx, url) }
}

func steps(res pretraffichook.Result) []string {
	var out []string
	for _, s := range res.Steps {
		state := "ok"
		if s.Error != "" {
			state = "failed"
		}
		out = append(out, s.Name+": "+state)
	}
	return out
}

// A new deployment's empty database: the hook migrates it, the new
// version passes its smoke test, and CodeDeploy hears Succeeded.
func TestHookMigratesSmokeTestsAndReportsSucceeded(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	api, r := newAPI(t, url), &reports{}
	res, err := newHook(t, migrateTo(url), api, r).Handle(context.Background(), deployment)
	if err != nil || res.Status != pretraffichook.Succeeded {
		t.Fatalf("Handle = %+v, %v; want Succeeded", res, err)
	}
	want := []string{"migrate: ok", "smoke: readiness: ok", "smoke: read: ok", "smoke: rejected write: ok"}
	if got := steps(res); !slices.Equal(got, want) {
		t.Errorf("steps %v; want %v", got, want)
	}
	if got := r.all(); !slices.Equal(got, []string{"d-ABCDEF123 exec-1 Succeeded"}) {
		t.Errorf("reports %v; want one Succeeded", got)
	}
	// The rejected write changed nothing.
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var companies int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM companies").Scan(&companies); err != nil || companies != 0 {
		t.Errorf("companies after the smoke test: %d (%v); want 0", companies, err)
	}
}

// A migration that fails (the database holds a table the first migration
// creates) reports Failed, and the new version is never invoked.
func TestFailedMigrationReportsFailed(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(context.Background(), "CREATE TABLE users (squatter int)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())

	api, r := newAPI(t, pgtest.NewURL(t)), &reports{}
	res, err := newHook(t, migrateTo(url), api, r).Handle(context.Background(), deployment)
	if err != nil || res.Status != pretraffichook.Failed || !strings.Contains(res.Steps[0].Error, "users") {
		t.Fatalf("Handle = %+v, %v; want Failed at the migration", res, err)
	}
	if got := steps(res); !slices.Equal(got, []string{"migrate: failed"}) {
		t.Errorf("steps %v; want the migration alone", got)
	}
	if api.calls.Load() != 0 {
		t.Errorf("the API was invoked %d times after a failed migration", api.calls.Load())
	}
	if got := r.all(); !slices.Equal(got, []string{"d-ABCDEF123 exec-1 Failed"}) {
		t.Errorf("reports %v; want one Failed", got)
	}
}

// A new version that cannot serve reads (here: its database lacks the
// schema, as a version whose SQL does not fit the migrated schema would
// fail) is ready but fails the read: Failed, and the checks after it do
// not run.
func TestFailedSmokeCheckReportsFailed(t *testing.T) {
	t.Parallel()
	api, r := newAPI(t, pgtest.NewEmptyURL(t)), &reports{}
	res, err := newHook(t, migrateTo(pgtest.NewEmptyURL(t)), api, r).Handle(context.Background(), deployment)
	if err != nil || res.Status != pretraffichook.Failed {
		t.Fatalf("Handle = %+v, %v; want Failed", res, err)
	}
	want := []string{"migrate: ok", "smoke: readiness: ok", "smoke: read: failed"}
	if got := steps(res); !slices.Equal(got, want) {
		t.Errorf("steps %v; want %v", got, want)
	}
	if e := res.Steps[2].Error; !strings.Contains(e, "status 500") {
		t.Errorf("read step error %q; want the API's 500", e)
	}
	if got := r.all(); !slices.Equal(got, []string{"d-ABCDEF123 exec-1 Failed"}) {
		t.Errorf("reports %v; want one Failed", got)
	}
}

// An API that fails the invocation itself (a crash) fails the check.
func TestFunctionErrorFailsTheSmokeTest(t *testing.T) {
	t.Parallel()
	crash := invokerFunc(func(context.Context, []byte) ([]byte, error) {
		return nil, errors.New("function error Runtime.ExitError: exit status 2")
	})
	r := &reports{}
	res, err := newHook(t, func(context.Context) error { return nil }, crash, r).Handle(context.Background(), deployment)
	if err != nil || res.Status != pretraffichook.Failed || !strings.Contains(res.Steps[1].Error, "Runtime.ExitError") {
		t.Fatalf("Handle = %+v, %v; want Failed with the function error", res, err)
	}
}

type invokerFunc func(context.Context, []byte) ([]byte, error)

func (f invokerFunc) Invoke(ctx context.Context, p []byte) ([]byte, error) { return f(ctx, p) }

// When CodeDeploy cannot be told, the invocation fails, so that Lambda
// runs it again (every step is safe to repeat).
func TestUnreportedOutcomeFailsTheInvocation(t *testing.T) {
	t.Parallel()
	url := pgtest.NewURL(t)
	r := &reports{fail: errors.New("injected: ThrottlingException")}
	res, err := newHook(t, migrateTo(url), newAPI(t, url), r).Handle(context.Background(), deployment)
	if err == nil || !strings.Contains(err.Error(), "ThrottlingException") || res.Status != pretraffichook.Succeeded {
		t.Fatalf("Handle = %+v, %v; want the report's error", res, err)
	}
}

// Invoked by hand (the runbook's check), the hook reports nothing and
// fails the invocation when a step failed.
func TestInvokedByHand(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyURL(t)
	for _, tt := range []struct {
		name    string
		migrate func(context.Context) error
		wantErr bool
	}{
		{"succeeds", migrateTo(url), false},
		{"fails", func(context.Context) error { return fmt.Errorf("injected: connect: connection refused") }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &reports{}
			res, err := newHook(t, tt.migrate, newAPI(t, url), r).Handle(context.Background(), pretraffichook.Event{})
			if gotErr := errors.Is(err, pretraffichook.ErrStepFailed); gotErr != tt.wantErr || (err != nil && !gotErr) {
				t.Errorf("Handle = %+v, %v; want an error: %v", res, err, tt.wantErr)
			}
			if len(r.all()) != 0 {
				t.Errorf("reported %v by hand", r.all())
			}
		})
	}
}

// A step that panics (a bug in the migration's or the smoke test's code)
// has failed: CodeDeploy hears Failed at once, and the rest is not run;
// the invocation itself succeeds, its job done.
func TestAPanickingStepReportsFailed(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name     string
		migrate  func(context.Context) error
		api      pretraffichook.Invoker
		wantStep string
	}{
		{"migration", func(context.Context) error { panic("the migration's bug") }, panicking{}, "migrate"},
		{"smoke test", func(context.Context) error { return nil }, panicking{}, "smoke: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &reports{}
			h, err := pretraffichook.New(pretraffichook.Config{Migrate: tt.migrate, API: tt.api, Reporter: r})
			if err != nil {
				t.Fatal(err)
			}
			res, err := h.Handle(context.Background(), deployment)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			last := res.Steps[len(res.Steps)-1]
			if res.Status != pretraffichook.Failed || !strings.HasPrefix(last.Name, tt.wantStep) || !strings.HasPrefix(last.Error, "panic: ") {
				t.Errorf("result %+v; want Failed, the %s step's panic as its error, the last step", res, tt.wantStep)
			}
			if got := r.all(); !slices.Equal(got, []string{"d-ABCDEF123 exec-1 Failed"}) {
				t.Errorf("reported %v; want Failed once", got)
			}
		})
	}
}

// panicking is an API whose invocation panics.
type panicking struct{}

func (panicking) Invoke(context.Context, []byte) ([]byte, error) { panic("the smoke test's bug") }
