package pretraffichook

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// check is one request of the smoke test and the answer it must get. The
// requests are HTTP API (payload v2) events, as API Gateway would send
// them, invoked on the new version itself: the gateway still sends every
// user to the old one.
type check struct {
	name   string
	method string
	path   string
	query  string
	body   string
	// want is the status; problem says the answer must be an RFC 9457
	// problem (application/problem+json), otherwise JSON.
	want    int
	problem bool
}

// smokeChecks: the new version is ready (it reaches the database), serves
// a read against the migrated schema, and refuses a write it must refuse
// (no bearer token) without changing anything.
var smokeChecks = []check{
	{name: "readiness", method: "GET", path: "/readyz", want: 200},
	{name: "read", method: "GET", path: "/v1/jobs", query: "limit=1", want: 200},
	{name: "rejected write", method: "POST", path: "/v1/companies", body: `{"name":"deploy smoke test"}`, want: 401, problem: true},
}

// userAgent marks the smoke test's requests in the API's logs.
const userAgent = "jobboard-deploy-hook"

// request is the check's event; ev names the request id after the hook
// execution, so that the API's log lines of a deploy can be found.
func (c check) request(ev Event, now time.Time) events.APIGatewayV2HTTPRequest {
	id := "deploy-hook-" + strings.ReplaceAll(c.name, " ", "-")
	if ev.LifecycleEventHookExecutionID != "" {
		id += "-" + ev.LifecycleEventHookExecutionID
	}
	headers := map[string]string{"user-agent": userAgent, "accept": "application/json"}
	if c.body != "" {
		headers["content-type"] = "application/json"
		headers["content-length"] = strconv.Itoa(len(c.body))
	}
	return events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       "ANY /{proxy+}",
		RawPath:        c.path,
		RawQueryString: c.query,
		Headers:        headers,
		Body:           c.body,
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RouteKey:  "ANY /{proxy+}",
			Stage:     "$default",
			RequestID: id,
			Time:      now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch: now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    c.method,
				Path:      c.path,
				Protocol:  "HTTP/1.1",
				SourceIP:  "127.0.0.1",
				UserAgent: userAgent,
			},
		},
	}
}

// run invokes the API with the check's request and checks the answer.
func (c check) run(ctx context.Context, api Invoker, ev Event) error {
	payload, err := json.Marshal(c.request(ev, time.Now()))
	if err != nil {
		return err
	}
	out, err := api.Invoke(ctx, payload)
	if err != nil {
		return fmt.Errorf("%s %s: invoke: %w", c.method, c.path, err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode == 0 {
		return fmt.Errorf("%s %s: not an HTTP API response: %.200s", c.method, c.path, out)
	}
	if resp.StatusCode != c.want {
		return fmt.Errorf("%s %s: status %d, want %d: %.300s", c.method, c.path, resp.StatusCode, c.want, resp.Body)
	}
	mediaType, _, _ := mime.ParseMediaType(header(resp.Headers, "Content-Type"))
	wantType := "application/json"
	if c.problem {
		wantType = "application/problem+json"
	}
	if mediaType != wantType || !json.Valid([]byte(resp.Body)) {
		return fmt.Errorf("%s %s: a %s answer of %d bytes; want %s", c.method, c.path, mediaType, len(resp.Body), wantType)
	}
	return nil
}

// header finds a response header field regardless of its case.
func header(h map[string]string, name string) string {
	for k, v := range h {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}
