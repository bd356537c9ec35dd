package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// The PreTraffic hook as deployed: the hook's, the migration function's and
// the API's bootstraps, each under the Lambda runtime emulator, against a
// local database. Two small stand-ins play what has no local emulator: the
// Lambda service's front (it routes an Invoke to the emulator of the
// function the ARN names, and marks a function error with
// X-Amz-Function-Error, as Lambda does and the emulator does not), and
// CodeDeploy's PutLifecycleEventHookExecutionStatus, whose calls it
// records. The test checks what CodeDeploy was told.

// Version ARNs the hook is given, as template.yaml gives them.
const (
	migrateVersionARN = "arn:aws:lambda:us-east-1:123456789012:function:jobboard-MigrateFunction-AbC:3"
	apiVersionARN     = "arn:aws:lambda:us-east-1:123456789012:function:jobboard-ApiFunction-XyZ:7"
)

// lambdaFront routes Lambda Invoke calls to emulators by function ARN.
type lambdaFront struct {
	mu      sync.Mutex
	targets map[string]*emulator
	calls   map[string]int
}

func (f *lambdaFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// POST /2015-03-31/functions/{FunctionName}/invocations
	name, ok := strings.CutPrefix(r.URL.EscapedPath(), "/2015-03-31/functions/")
	name, ok2 := strings.CutSuffix(name, "/invocations")
	name, err := url.PathUnescape(name)
	f.mu.Lock()
	target := f.targets[name]
	f.calls[name]++
	f.mu.Unlock()
	if !ok || !ok2 || err != nil || r.Method != http.MethodPost || target == nil {
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, `{"Type":"User","Message":"Function not found: %s"}`, name)
		return
	}
	payload, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	out, err := target.rawInvoke(r.Context(), payload)
	if err != nil {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = fmt.Fprintf(w, `{"Message":%q}`, err.Error())
		return
	}
	var fnErr struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if json.Unmarshal(out, &fnErr) == nil && fnErr.ErrorType != "" {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
	}
	w.Header().Set("X-Amz-Executed-Version", name[strings.LastIndex(name, ":")+1:])
	_, _ = w.Write(out)
}

func (f *lambdaFront) invoked(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

// rawInvoke posts payload to the emulator and returns what it answers, a
// function error included.
func (e *emulator) rawInvoke(ctx context.Context, payload []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.invokeAt+"/2015-03-31/functions/function/invocations", bytes.NewReader(payload))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: read the answer: %w", e.name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d: %s", e.name, resp.StatusCode, body)
	}
	return body, nil
}

// codeDeploy records PutLifecycleEventHookExecutionStatus calls (the AWS
// JSON 1.1 protocol the SDK speaks).
type codeDeploy struct {
	mu      sync.Mutex
	reports []hookReport
}

type hookReport struct {
	DeploymentID string `json:"deploymentId"`
	ExecutionID  string `json:"lifecycleEventHookExecutionId"`
	Status       string `json:"status"`
}

func (c *codeDeploy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var rep hookReport
	if r.Header.Get("X-Amz-Target") != "CodeDeploy_20141006.PutLifecycleEventHookExecutionStatus" ||
		json.NewDecoder(r.Body).Decode(&rep) != nil || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"__type":"ValidationException","message":"not a signed PutLifecycleEventHookExecutionStatus"}`))
		return
	}
	c.mu.Lock()
	c.reports = append(c.reports, rep)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(map[string]string{"lifecycleEventHookExecutionId": rep.ExecutionID})
}

func (c *codeDeploy) all() []hookReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reports)
}

// hookRun is one deploy's hook: its emulators and stand-ins.
type hookRun struct {
	hook, api *emulator
	front     *lambdaFront
	deploy    *codeDeploy
}

// startHook starts the API over apiDB, the migration function over
// migrateDB, and the hook pointed at both through the stand-ins.
func startHook(t *testing.T, rie string, bins map[string]string, apiDB, migrateDB string) *hookRun {
	t.Helper()
	common := map[string]string{
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1",
		"LOG_LEVEL": "INFO", "AWS_LAMBDA_FUNCTION_TIMEOUT": "60",
	}
	with := func(extra map[string]string) map[string]string {
		env := map[string]string{}
		for k, v := range common {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		return env
	}
	h := &hookRun{deploy: &codeDeploy{}}
	// The API's secrets as the template passes them, here as values: in
	// Lambda it refuses to start without either key.
	h.api = startEmulator(t, rie, "ApiFunction", bins["ApiFunction"], with(map[string]string{
		"DATABASE_URL": apiDB, "JWT_SECRET": strings.Repeat("j", 64), "WEBHOOK_SEALING_KEY": strings.Repeat("w", 64),
		"AWS_LAMBDA_FUNCTION_VERSION": "7"}))
	migrate := startEmulator(t, rie, "MigrateFunction", bins["MigrateFunction"], with(map[string]string{
		"DATABASE_URL": migrateDB, "AWS_LAMBDA_FUNCTION_VERSION": "3"}))
	front := &lambdaFront{targets: map[string]*emulator{apiVersionARN: h.api, migrateVersionARN: migrate}, calls: map[string]int{}}
	frontSrv := httptest.NewServer(front)
	t.Cleanup(frontSrv.Close)
	h.front = front
	deploySrv := httptest.NewServer(h.deploy)
	t.Cleanup(deploySrv.Close)
	h.hook = startEmulator(t, rie, "PreTrafficHookFunction", bins["PreTrafficHookFunction"], with(map[string]string{
		"MIGRATE_FUNCTION_VERSION_ARN": migrateVersionARN,
		"API_FUNCTION_VERSION_ARN":     apiVersionARN,
		"AWS_ENDPOINT_URL_LAMBDA":      frontSrv.URL,
		"AWS_ENDPOINT_URL_CODEDEPLOY":  deploySrv.URL,
		"AWS_LAMBDA_FUNCTION_TIMEOUT":  "120",
	}))
	return h
}

// run invokes the hook as CodeDeploy does and returns what it answered.
func (h *hookRun) run(t *testing.T, executionID string) (status string, steps []map[string]string) {
	t.Helper()
	event := fmt.Sprintf(`{"DeploymentId":"d-EXAMPLE123","LifecycleEventHookExecutionId":%q}`, executionID)
	var res struct {
		Status string              `json:"status"`
		Steps  []map[string]string `json:"steps"`
	}
	if err := json.Unmarshal(h.hook.invoke([]byte(event)), &res); err != nil {
		t.Fatalf("hook answer: %v", err)
	}
	return res.Status, res.Steps
}

func stepNames(steps []map[string]string) []string {
	var out []string
	for _, s := range steps {
		state := "ok"
		if s["error"] != "" {
			state = "failed"
		}
		out = append(out, s["name"]+": "+state)
	}
	return out
}

func testDeployHook(t *testing.T, rie string, bins map[string]string) {
	t.Run("succeeds", func(t *testing.T) {
		t.Parallel()
		db := pgtest.NewEmptyURL(t)
		h := startHook(t, rie, bins, db, db)
		status, steps := h.run(t, "exec-ok")
		want := []string{"migrate: ok", "smoke: readiness: ok", "smoke: read: ok", "smoke: rejected write: ok"}
		if status != "Succeeded" || !slices.Equal(stepNames(steps), want) {
			t.Errorf("hook: %s %v; want Succeeded %v", status, steps, want)
		}
		if got := h.deploy.all(); len(got) != 1 || got[0] != (hookReport{"d-EXAMPLE123", "exec-ok", "Succeeded"}) {
			t.Errorf("CodeDeploy was told %+v; want one Succeeded for d-EXAMPLE123/exec-ok", got)
		}
		pgtest.CheckMigrated(t, db)
		conn, err := pgx.Connect(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		var companies int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM companies`).Scan(&companies); err != nil || companies != 0 {
			t.Errorf("companies after the smoke test: %d (%v); want 0 (the write was refused)", companies, err)
		}
		// The smoke test's requests are counted under the new version.
		lines := emfLines(t, h.api.output.String())
		if len(lines) != 3 {
			t.Errorf("the API wrote %d metric lines for the 3 smoke requests:\n%s", len(lines), h.api.output.String())
		}
		checkVersionedMetrics(t, "api", "7", lines)
	})

	t.Run("a migration fails", func(t *testing.T) {
		t.Parallel()
		db := pgtest.NewEmptyURL(t)
		conn, err := pgx.Connect(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(context.Background(), "CREATE TABLE users (squatter int)"); err != nil {
			t.Fatal(err)
		}
		conn.Close(context.Background())
		h := startHook(t, rie, bins, pgtest.NewURL(t), db)
		status, steps := h.run(t, "exec-migration")
		if status != "Failed" || !slices.Equal(stepNames(steps), []string{"migrate: failed"}) || !strings.Contains(steps[0]["error"], "Unhandled") {
			t.Errorf("hook: %s %v; want Failed at the migration (a function error)", status, steps)
		}
		if got := h.deploy.all(); len(got) != 1 || got[0].Status != "Failed" {
			t.Errorf("CodeDeploy was told %+v; want one Failed", got)
		}
		if n := h.front.invoked(apiVersionARN); n != 0 {
			t.Errorf("the new API version was invoked %d times after a failed migration", n)
		}
	})

	t.Run("a smoke check fails", func(t *testing.T) {
		t.Parallel()
		// The new version's database lacks the schema it needs (as a
		// version whose SQL does not fit the migrated schema would): it is
		// ready, and fails the read.
		h := startHook(t, rie, bins, pgtest.NewEmptyURL(t), pgtest.NewEmptyURL(t))
		status, steps := h.run(t, "exec-smoke")
		want := []string{"migrate: ok", "smoke: readiness: ok", "smoke: read: failed"}
		if status != "Failed" || !slices.Equal(stepNames(steps), want) || !strings.Contains(steps[2]["error"], "status 500") {
			t.Errorf("hook: %s %v; want Failed at the read (%v)", status, steps, want)
		}
		if got := h.deploy.all(); len(got) != 1 || got[0] != (hookReport{"d-EXAMPLE123", "exec-smoke", "Failed"}) {
			t.Errorf("CodeDeploy was told %+v; want one Failed", got)
		}
		checkVersionedMetrics(t, "api", "7", emfLines(t, h.api.output.String()))
	})
}

// emfLines are the Embedded Metric Format lines in a function's output.
func emfLines(t *testing.T, output string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(output))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["_aws"] != nil {
			out = append(out, m)
		}
	}
	return out
}

// checkVersionedMetrics: the lines of service carry its version as the
// FunctionVersion dimension, and every metric a rollback alarm reads by
// FunctionVersion for that service is on them, under the dimensions the
// alarm names.
func checkVersionedMetrics(t *testing.T, service, version string, lines []map[string]any) {
	t.Helper()
	if len(lines) == 0 {
		t.Fatalf("no metric lines from %s", service)
	}
	written := map[string]bool{}
	for _, l := range lines {
		if l["Service"] != service || l["FunctionVersion"] != version {
			t.Errorf("metric line %v; want Service %s, FunctionVersion %s", l, service, version)
		}
		for _, d := range l["_aws"].(map[string]any)["CloudWatchMetrics"].([]any) {
			directive := d.(map[string]any)
			byVersion := false
			for _, set := range directive["Dimensions"].([]any) {
				byVersion = byVersion || fmt.Sprint(set) == "[Service FunctionVersion]"
			}
			for _, m := range directive["Metrics"].([]any) {
				if byVersion {
					written[directive["Namespace"].(string)+" "+m.(map[string]any)["Name"].(string)] = true
				}
			}
		}
	}
	read := 0
	for alarm, m := range versionAlarmMetrics(t) {
		if m.Dimensions["Service"] != service {
			continue
		}
		read++
		if len(m.Dimensions) != 2 || !written[m.Namespace+" "+m.MetricName] {
			t.Errorf("%s reads %s %s by %v; the %s writes no such metric by Service and FunctionVersion (it writes %v)",
				alarm, m.Namespace, m.MetricName, m.Dimensions, service, written)
		}
	}
	if read == 0 {
		t.Errorf("no rollback alarm reads the %s's metrics by version", service)
	}
}
