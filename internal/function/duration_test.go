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
