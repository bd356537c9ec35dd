package function

import (
	"fmt"
	"time"
)

// ParseDuration reads the value of the duration setting name: empty is
// def; otherwise a Go duration (such as 30s) from least to most, or of at
// least least when most is zero. Errors name the variable and the range;
// the duration returned with one is def.
func ParseDuration(name, value string, def, least, most time.Duration) (time.Duration, error) {
	if value == "" {
		return def, nil
	}
	d, err := time.ParseDuration(value)
	switch {
	case most > 0 && (err != nil || d < least || d > most):
		return def, fmt.Errorf("%s = %q: want a duration from %v to %v", name, value, least, most)
	case err != nil || d < least:
		return def, fmt.Errorf("%s = %q: want a duration of at least %v, such as 30s", name, value, least)
	}
	return d, nil
}

// EnvLocalInvocationTimeout is the deadline of one invocation of a queue
// consumer's handler in its local mode (the worker, the webhook and the
// feedback functions); on AWS the function's Timeout is. `make chaos`
// shortens it to reach the deadline within a short run.
const EnvLocalInvocationTimeout = "LOCAL_INVOCATION_TIMEOUT"

// The range of EnvLocalInvocationTimeout: from the shortest in which a
// record can start (the worker's start margin is 5 s) to Lambda's longest
// Timeout.
const (
	minLocalInvocationTimeout = 5 * time.Second
	maxLocalInvocationTimeout = 15 * time.Minute
)

// LocalInvocationTimeout reads EnvLocalInvocationTimeout through getenv:
// empty is def (the function's Timeout in template.yaml), otherwise a
// duration from 5s to 15m. Errors name the variable and the range.
func LocalInvocationTimeout(getenv func(string) string, def time.Duration) (time.Duration, error) {
	return ParseDuration(EnvLocalInvocationTimeout, getenv(EnvLocalInvocationTimeout), def,
		minLocalInvocationTimeout, maxLocalInvocationTimeout)
}
