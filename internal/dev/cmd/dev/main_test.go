package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

// run refuses to start without a server to use or with a bad port, and
// says which setting is wrong.
func TestRunChecksItsSettings(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"no database", map[string]string{}, nil, "DATABASE_URL"},
		{"bad port", map[string]string{"DATABASE_URL": "postgres://x", "PORT": "eighty"}, nil, "PORT"},
		{"port out of range", map[string]string{"DATABASE_URL": "postgres://x", "PORT": "70000"}, nil, "PORT"},
		{"bad SQS port", map[string]string{"DATABASE_URL": "postgres://x", "SQS_PORT": "-1"}, nil, "SQS_PORT"},
		{"bad SES port", map[string]string{"DATABASE_URL": "postgres://x", "SES_PORT": "x"}, nil, "SES_PORT"},
		{"missing template", map[string]string{"DATABASE_URL": "postgres://x"}, []string{"-template", "testdata/none.yaml"}, "template"},
		{"unknown flag", map[string]string{}, []string{"-nope"}, "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"dev"}, tt.args...)
			err := run(context.Background(), args, func(k string) string { return tt.env[k] }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run = %v, want an error naming %q", err, tt.want)
			}
		})
	}
}
