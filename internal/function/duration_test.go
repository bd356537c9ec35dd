package function_test

import (
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/function"
)

func TestParseDuration(t *testing.T) {
	const def = 7 * time.Second
	for _, c := range []struct {
		value       string
		least, most time.Duration
		want        time.Duration
		ok          bool
	}{
		{"", time.Second, time.Minute, def, true},
		{"30s", time.Second, time.Minute, 30 * time.Second, true},
		{"1s", time.Second, time.Minute, time.Second, true},
		{"1m", time.Second, time.Minute, time.Minute, true},
		{"999ms", time.Second, time.Minute, def, false},
		{"61s", time.Second, time.Minute, def, false},
		{"soon", time.Second, time.Minute, def, false},
		{"30", time.Second, time.Minute, def, false},
		{"100h", time.Second, 0, 100 * time.Hour, true}, // no upper bound
		{"0s", time.Nanosecond, 0, def, false},
		{"-1s", time.Nanosecond, 0, def, false},
	} {
		got, err := function.ParseDuration("SOME_TIMEOUT", c.value, def, c.least, c.most)
		if got != c.want || (err == nil) != c.ok {
			t.Errorf("%q in [%v, %v]: %v, %v; want %v, ok %v", c.value, c.least, c.most, got, err, c.want, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "SOME_TIMEOUT") {
			t.Errorf("%q: error %q does not name the variable", c.value, err)
		}
	}
}

// The local invocation timeout is read one way by every queue consumer:
// from 5 s to 15 min, empty its default.
func TestLocalInvocationTimeout(t *testing.T) {
	const def = 30 * time.Second
	for value, want := range map[string]time.Duration{"": def, "5s": 5 * time.Second, "8s": 8 * time.Second, "15m": 15 * time.Minute} {
		got, err := function.LocalInvocationTimeout(func(k string) string { return map[string]string{function.EnvLocalInvocationTimeout: value}[k] }, def)
		if err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", value, got, err, want)
		}
	}
	for _, value := range []string{"0s", "-1s", "4s", "16m", "8", "soon"} {
		_, err := function.LocalInvocationTimeout(func(k string) string { return map[string]string{function.EnvLocalInvocationTimeout: value}[k] }, def)
		if err == nil || !strings.Contains(err.Error(), "LOCAL_INVOCATION_TIMEOUT") || !strings.Contains(err.Error(), "5s to 15m0s") {
			t.Errorf("%q: %v; want an error naming the variable and its range", value, err)
		}
	}
}
