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
