package function

import (
	"fmt"
	"strconv"
)

// ParseFlag reads the value of the boolean setting name: empty is false;
// otherwise one of strconv.ParseBool's forms (true, false, 1, 0…). Errors
// name the variable.
func ParseFlag(name, value string) (bool, error) {
	if value == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(value)
	if err != nil {
		return false, fmt.Errorf("%s = %q: want true or false", name, value)
	}
	return b, nil
}

// LocalFlag reads a boolean setting that only local development and tests
// may set (ParseFlag's forms): inside Lambda, true is an error naming the
// variable, so that a function deployed with it fails its cold start
// rather than run with a safeguard off. (On Lambda, 127.0.0.1:9001 is the
// runtime API itself.)
func (s Settings) LocalFlag(name, value string) (bool, error) {
	b, err := ParseFlag(name, value)
	if err == nil && b && s.Lambda {
		return false, fmt.Errorf("%s = %q: for local development and tests only, refused inside Lambda (%s is set)", name, value, EnvLambdaRuntimeAPI)
	}
	return b, err
}
