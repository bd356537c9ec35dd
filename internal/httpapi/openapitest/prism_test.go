package openapitest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// jobJSON is a job as GET /v1/jobs/{id} answers it, with salary set to
// salary (raw JSON).
func jobJSON(salary string) []byte {
	return []byte(`{"id":1,"company_id":1,"title":"Go","description":"d","location":"","remote":false,"employment_type":"full_time",` +
		`"salary":` + salary + `,"status":"open","created_at":"2026-01-02T03:04:05Z","updated_at":"2026-01-02T03:04:05Z"}`)
}

func jobHeader() http.Header {
	return http.Header{
		"Content-Type": {"application/json"}, "X-Request-Id": {"r1"}, "Etag": {`"abc"`},
		"Cache-Control": {"public, max-age=30, stale-while-revalidate=30"}, "Vary": {"Authorization"},
	}
}

// Prism checks every response of a documented route that Check is given,
// on its own: a job whose salary is neither an object nor null is refused
// by it (and by kin-openapi), a job without a salary accepted by both.
func TestPrismChecksResponses(t *testing.T) {
	t.Parallel()
	p, err := sharedPrism()
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/jobs/1", nil)
	if err := p.check(req, http.StatusOK, jobHeader(), jobJSON("null")); err != nil {
		t.Fatalf("Prism refuses a job without a salary: %v", err)
	}
	err = p.check(req, http.StatusOK, jobHeader(), jobJSON(`"lots"`))
	if err == nil || !strings.Contains(err.Error(), "prism: Error response.body.salary") {
		t.Fatalf("Prism on a salary of the wrong type: %v; want a violation naming salary", err)
	}
	missing := jobHeader()
	missing.Del("X-Request-Id")
	if err := p.check(req, http.StatusOK, missing, jobJSON("null")); err == nil {
		t.Fatal("Prism accepts an answer without its required X-Request-Id")
	}
	if err := Check(t, req, http.StatusOK, jobHeader(), jobJSON(`"lots"`)); err == nil || !strings.Contains(err.Error(), "prism:") {
		t.Fatalf("Check does not ask Prism: %v", err)
	}
}

// The reason for a second validator: with OpenAPI 3.0's nullable beside an
// allOf (where it takes no effect, since it adds null only to its own
// schema's type and allOf's member still says object), kin-openapi
// accepted null, and Prism refuses it. The API's document puts nullable
// where it takes effect, and both accept.
func TestPrismIsStricterThanKinOnNullableAllOf(t *testing.T) {
	t.Parallel()
	const doc = `{
  "openapi": "3.0.3",
  "info": {"title": "t", "version": "1"},
  "paths": {"/v1/jobs/{id}": {"get": {
    "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
    "responses": {"200": {"description": "a job", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Job"}}}}}}}},
  "components": {"schemas": {
    "Salary": {"type": "object", "properties": {"min": {"type": "integer"}}},
    "Job": {"type": "object", "properties": {"salary": {"allOf": [{"$ref": "#/components/schemas/Salary"}], "nullable": true, "type": "object"}}}}}
}`
	path := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := openapi3.NewLoader().LoadFromData([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var job any
	if err := json.Unmarshal([]byte(`{"salary":null}`), &job); err != nil {
		t.Fatal(err)
	}
	if err := loaded.Components.Schemas["Job"].Value.VisitJSON(job); err != nil {
		t.Fatalf("kin-openapi refuses it too now (%v): the second validator's reason has changed", err)
	}
	p, err := startPrism(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.stdin.Close() })
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/v1/jobs/1", nil)
	err = p.check(req, http.StatusOK, http.Header{"Content-Type": {"application/json"}}, []byte(`{"salary":null}`))
	if err == nil || !strings.Contains(err.Error(), "salary") {
		t.Fatalf("Prism on salary null beside allOf: %v; want a violation", err)
	}
}
