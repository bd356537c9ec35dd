package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// The hook needs the versions to migrate with and to smoke-test; the error
// names every one missing. (Its work, under the Lambda runtime emulator:
// internal/dev/deploy; its logic: internal/pretraffichook.)
func TestErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"nothing set", []string{"hook"}, nil, []string{"MIGRATE_FUNCTION_VERSION_ARN", "API_FUNCTION_VERSION_ARN"}},
		{"no API version", []string{"hook"}, map[string]string{"MIGRATE_FUNCTION_VERSION_ARN": "arn:aws:lambda:us-east-1:123456789012:function:m:1"}, []string{"API_FUNCTION_VERSION_ARN"}},
		{"bad log level", []string{"hook"}, map[string]string{"LOG_LEVEL": "loud"}, []string{"LOG_LEVEL"}},
		{"unknown command", []string{"hook", "run"}, nil, []string{"unknown command"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := run(context.Background(), tt.args, env(tt.env), io.Discard)
			for _, w := range tt.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("run: %v; want an error mentioning %q", err, w)
				}
			}
		})
	}
}

// Outside Lambda it runs once and fails when a step does: here the Lambda
// endpoint refuses connections, so the migration's invocation fails, and
// nothing is reported (an empty event is an invocation by hand).
func TestRunsOnceOutsideLambda(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	err := run(context.Background(), []string{"hook"}, env(map[string]string{
		"MIGRATE_FUNCTION_VERSION_ARN": "arn:aws:lambda:us-east-1:123456789012:function:m:1",
		"API_FUNCTION_VERSION_ARN":     "arn:aws:lambda:us-east-1:123456789012:function:a:1",
		"AWS_REGION":                   "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_ENDPOINT_URL_LAMBDA": "http://127.0.0.1:1",
	}), &out)
	if err == nil || !strings.Contains(out.String(), `"status":"Failed"`) || !strings.Contains(out.String(), `"name":"migrate"`) {
		t.Errorf("run: %v, output %s; want a failed migration step", err, out.String())
	}
}
