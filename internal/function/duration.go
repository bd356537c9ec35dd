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
