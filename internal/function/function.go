// Package function holds what the job board's Lambda functions share in
// their mains: the settings each reads from its environment besides its own
// (whether it runs inside Lambda, its log level, its AWS configuration), the
// logger made of them, the Wiring that every main's wire returns, and the
// shape of every main (Main and Run): read the settings once (every error
// joined), then wire the adapters from those values, then run, under the
// Lambda runtime or outside Lambda in its local mode. A main is its name,
// its settings package's Load and its wire. Package database opens the
// database of those that have one.
package function

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/jobboard/jobboard/internal/awsenv"
)

// The environment variables Load reads, besides awsenv.Load's.
const (
	// EnvLambdaRuntimeAPI is set by Lambda in every sandbox; without it a
	// function runs in its local mode.
	EnvLambdaRuntimeAPI = "AWS_LAMBDA_RUNTIME_API"
	// EnvLogLevel is the lowest level logged: debug, info, warn or error,
	// in any case; unset means info.
	EnvLogLevel = "LOG_LEVEL"
	// EnvFunctionVersion is set by Lambda: the version the sandbox runs
	// ("7" behind an alias, "$LATEST" otherwise).
	EnvFunctionVersion = "AWS_LAMBDA_FUNCTION_VERSION"
)

// Settings are the settings every function reads.
type Settings struct {
	// Lambda is true inside Lambda (AWS_LAMBDA_RUNTIME_API is set): the
	// function hands its handler to the Lambda runtime. Otherwise it runs
	// its local mode.
	Lambda bool
	// LogLevel is LOG_LEVEL's level.
	LogLevel slog.Level
	// Version is the function version Lambda runs (AWS_LAMBDA_FUNCTION_VERSION),
	// the dimension by which the metrics of a new version are told apart
	// during a deploy; empty outside Lambda.
	Version string
	// AWS is the configuration of every AWS client the function makes,
	// from the environment alone (see awsenv).
	AWS aws.Config
}

// Load reads the shared settings through getenv. Errors: a LOG_LEVEL that
// names no level (the error names LOG_LEVEL).
func Load(getenv func(string) string) (Settings, error) {
	s := Settings{
		Lambda:  getenv(EnvLambdaRuntimeAPI) != "",
		Version: getenv(EnvFunctionVersion),
		AWS:     awsenv.Load(getenv),
	}
	if lvl := getenv(EnvLogLevel); lvl != "" {
		if err := s.LogLevel.UnmarshalText([]byte(lvl)); err != nil {
			return s, fmt.Errorf("%s: %w", EnvLogLevel, err)
		}
	}
	return s, nil
}

// Logger returns the function's logger: JSON lines at the settings' level
// on w, the function's standard output (which Lambda sends to CloudWatch
// Logs).
func (s Settings) Logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: s.LogLevel}))
}
