package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
)

// PASSWORD_HASH_CONCURRENCY sets the hashing slots; unset, they follow the
// cores and the memory the process may take.
func TestPasswordHashesSetting(t *testing.T) {
	t.Parallel()
	cfg, err := loadSettings(withDB(map[string]string{"PASSWORD_HASH_CONCURRENCY": "3"}))
	if err != nil || cfg.passwordHashes != 3 {
		t.Fatalf("PASSWORD_HASH_CONCURRENCY=3: %d, %v", cfg.passwordHashes, err)
	}
	cfg, err = loadSettings(withDB(map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128"}))
	if err != nil || cfg.passwordHashes != 1 {
		t.Fatalf("a 128 MB Lambda: %d slots, %v; want 1", cfg.passwordHashes, err)
	}
	cfg, err = loadSettings(withDB(map[string]string{}))
	want := httpapi.PasswordHashConcurrency(runtime.GOMAXPROCS(0), memoryLimit(env(nil), readNothing), httpapi.DefaultPasswordParams)
	if err != nil || cfg.passwordHashes < 1 || cfg.passwordHashes > want {
		t.Fatalf("default: %d slots, %v; want 1 to %d", cfg.passwordHashes, err, want)
	}
}

func readNothing(string) ([]byte, error) { return nil, fs.ErrNotExist }

// The memory limit is Lambda's memory size there, else the lowest of the
// cgroup's memory.max and the machine's MemTotal.
func TestMemoryLimit(t *testing.T) {
	t.Parallel()
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(name string) ([]byte, error) {
			if v, ok := m[name]; ok {
				return []byte(v), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	meminfo := "MemTotal:       24576000 kB\nMemFree:         1000 kB\n"
	for _, tt := range []struct {
		name  string
		env   map[string]string
		files map[string]string
		want  int64
	}{
		{"Lambda", map[string]string{"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512"}, map[string]string{"/proc/meminfo": meminfo}, 512 << 20},
		{"machine", nil, map[string]string{"/proc/meminfo": meminfo}, 24576000 << 10},
		{"container", nil, map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "1073741824\n"}, 1 << 30},
		{"container without a limit", nil, map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, 24576000 << 10},
		{"unknown", nil, nil, 0},
	} {
		if got := memoryLimit(env(tt.env), files(tt.files)); got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, got, tt.want)
		}
	}
}

// Behind API Gateway a client is the request context's sourceIp, never a
// forwarded-for header, which the client writes: wrong passwords from one
// source block that source, whatever X-Forwarded-For they claim, and not
// another source that claims the first one's address.
func TestLambdaClientIsTheGatewaySourceIP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	key := []byte(strings.Repeat("k", 32))
	h := openHandler(t, settings{passwordHashes: 1}, database.Source{URL: pgtest.NewURL(t)}, staticKeys(key))
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
