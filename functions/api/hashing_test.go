package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/functions/api/settings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// Behind API Gateway a client is the request context's sourceIp, never a
// forwarded-for header, which the client writes: wrong passwords from one
// source block that source, whatever X-Forwarded-For they claim, and not
// another source that claims the first one's address.
func TestLambdaClientIsTheGatewaySourceIP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := []byte(strings.Repeat("k", 32))
	h := openHandler(t, settings.Settings{PasswordHashes: 1}, database.Source{URL: pgtest.NewURL(t)}, staticKeys(key))
	adapter := httpadapter.NewV2(h)
	login := func(sourceIP, forwardedFor string) int {
		t.Helper()
		var ev events.APIGatewayV2HTTPRequest
		ev.Version, ev.RawPath = "2.0", "/v1/auth/login"
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path, ev.RequestContext.HTTP.SourceIP = http.MethodPost, "/v1/auth/login", sourceIP
		ev.RequestContext.RequestID = fmt.Sprintf("req-%s-%s", sourceIP, forwardedFor)
		ev.Headers = map[string]string{"content-type": "application/json", "x-forwarded-for": forwardedFor}
		body, _ := json.Marshal(map[string]string{"email": "someone@example.com", "password": "wrong password"})
		ev.Body = string(body)
		resp, err := adapter.ProxyWithContext(ctx, ev)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	const attacker, other = "198.51.100.9", "203.0.113.9"
	for i := range 5 {
		if got := login(attacker, fmt.Sprintf("192.0.2.%d", i)); got != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i, got)
		}
	}
	// The block after the fifth failure lasts 1 s and each further failure
	// doubles it, counted from the attempt's start; a loaded machine can
	// spend the shorter blocks hashing the attempt before. Up to six more
	// attempts (the last block 32 s) each claim an address not claimed
	// before: were failures counted by X-Forwarded-For, each of those would
	// have one, under the five free ones, and never be blocked.
	blocked := false
	for i := range 6 {
		if got := login(attacker, fmt.Sprintf("192.0.2.%d", 100+i)); got == http.StatusTooManyRequests {
			blocked = true
			break
		} else if got != http.StatusUnauthorized {
			t.Fatalf("wrong password from the same source, claiming another: %d, want 429 or 401", got)
		}
	}
	if !blocked {
		t.Fatal("six more wrong passwords from the same source, each claiming another: never 429, want the source blocked")
	}
	if got := login(other, attacker); got != http.StatusUnauthorized {
		t.Fatalf("another source claiming the blocked one's address: %d, want 401 (not blocked)", got)
	}
}
