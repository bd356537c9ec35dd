package settings

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// evaluator evaluates template values as CloudFormation would for a
// parameter set, as far as a function's settings need: conditions and
// Fn::If, Ref to a parameter or AWS::NoValue (the member disappears),
// Fn::Equals, Fn::Not, Fn::And, Fn::Or, Fn::Join, Fn::Split, Fn::Select and
// Fn::Sub. What only CloudFormation knows stays a reference: a Ref to a
// resource or pseudo parameter is "${Ref:X}", Fn::GetAtt "${GetAtt:X.Y}",
// and Fn::Sub keeps the ${X} it cannot resolve. The first error stops it
// (err).
type evaluator struct {
	t      *Template
	values map[string]string
	err    error
}

// noValue stands for AWS::NoValue while eval works; it never escapes.
type noValueT struct{}

var noValue = noValueT{}

func (e *evaluator) fail(format string, args ...any) any {
	if e.err == nil {
		e.err = fmt.Errorf(format, args...)
	}
	return nil
}

func (e *evaluator) eval(v any) any {
	switch x := v.(type) {
	case []any:
		out := []any{}
		for _, el := range x {
			if r := e.eval(el); r != noValue {
				out = append(out, r)
			}
		}
		return out
	case map[string]any:
		if isIntrinsic(x) {
			for name, arg := range x {
				return e.intrinsic(name, arg)
			}
		}
		out := map[string]any{}
		for k, el := range x {
			if r := e.eval(el); r != noValue {
				out[k] = r
			}
		}
		return out
	}
	return v
}

func (e *evaluator) str(v any) string {
	switch x := e.eval(v).(type) {
	case string:
		return x
	case nil:
		return ""
	default:
		return scalar(x)
	}
}

func (e *evaluator) condition(name string) bool {
	def, ok := e.t.Conditions[name]
	if !ok {
		e.fail("no condition %s", name)
		return false
	}
	b, ok := e.eval(def).(bool)
	if !ok && e.err == nil {
		e.fail("condition %s is not a boolean", name)
	}
	return b
}

func (e *evaluator) intrinsic(name string, arg any) any {
	args, _ := arg.([]any)
	switch name {
	case "Ref":
		ref, _ := arg.(string)
		if ref == "AWS::NoValue" {
			return noValue
		}
		p, isParam := e.t.Parameters[ref]
		v, given := e.values[ref]
		if !isParam || !given {
			return "${Ref:" + ref + "}"
		}
		if p.IsList() {
			var list []any
			for _, s := range strings.Split(v, ",") {
				list = append(list, s)
			}
			return list
		}
		return v
	case "Fn::GetAtt":
		switch a := arg.(type) {
		case string:
			return "${GetAtt:" + a + "}"
		case []any:
			if len(a) == 2 {
				return fmt.Sprintf("${GetAtt:%v.%v}", a[0], a[1])
			}
		}
		return e.fail("malformed Fn::GetAtt %v", arg)
	case "Condition":
		return e.condition(fmt.Sprint(arg))
	case "Fn::If":
		if len(args) != 3 {
			return e.fail("malformed Fn::If %v", arg)
		}
		if e.condition(fmt.Sprint(args[0])) {
			return e.eval(args[1])
		}
		return e.eval(args[2])
	case "Fn::Equals":
		if len(args) != 2 {
			return e.fail("malformed Fn::Equals %v", arg)
		}
		return e.str(args[0]) == e.str(args[1])
	case "Fn::Not":
		if len(args) != 1 {
			return e.fail("malformed Fn::Not %v", arg)
		}
		b, _ := e.eval(args[0]).(bool)
		return !b
	case "Fn::And", "Fn::Or":
		and := name == "Fn::And"
		for _, a := range args {
			if b, _ := e.eval(a).(bool); b != and {
				return !and
			}
		}
		return and
	case "Fn::Join":
		if len(args) != 2 {
			return e.fail("malformed Fn::Join %v", arg)
		}
		list, _ := e.eval(args[1]).([]any)
		parts := make([]string, len(list))
		for i, el := range list {
			parts[i] = scalar(el)
		}
		return strings.Join(parts, e.str(args[0]))
	case "Fn::Split":
		if len(args) != 2 {
			return e.fail("malformed Fn::Split %v", arg)
		}
		var out []any
		for _, s := range strings.Split(e.str(args[1]), e.str(args[0])) {
			out = append(out, s)
		}
		return out
	case "Fn::Select":
		if len(args) != 2 {
			return e.fail("malformed Fn::Select %v", arg)
		}
		list, _ := e.eval(args[1]).([]any)
		i, err := strconv.Atoi(e.str(args[0]))
		if err != nil || i < 0 || i >= len(list) {
			return e.fail("Fn::Select %v: index out of range", arg)
		}
		return list[i]
	case "Fn::Sub":
		return e.sub(arg)
	}
	return e.fail("%s: %w", name, errUnsupported)
}

var subVar = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

// sub evaluates Fn::Sub: a string, or a string with a map of its own
// variables.
func (e *evaluator) sub(arg any) any {
	s, ok := arg.(string)
	vars := map[string]any{}
	if list, isList := arg.([]any); isList && len(list) == 2 {
		s, ok = list[0].(string)
		vars, _ = list[1].(map[string]any)
	}
	if !ok {
		return e.fail("malformed Fn::Sub %v", arg)
	}
	return subVar.ReplaceAllStringFunc(s, func(m string) string {
		name := m[2 : len(m)-1]
		if v, ok := vars[name]; ok {
			return e.str(v)
		}
		if _, isParam := e.t.Parameters[name]; isParam {
			if v, ok := e.values[name]; ok {
				return v
			}
		}
		return m
	})
}
