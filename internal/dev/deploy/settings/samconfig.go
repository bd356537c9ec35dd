package settings

import (
	"fmt"
	"maps"
	"strings"

	"github.com/BurntSushi/toml"
)

// ParameterSets returns the parameter values of every deploy the build can
// know of: "defaults" (the template's defaults) and "samconfig.<env>" for
// each environment of samconfig.toml with deploy parameters (the defaults
// with its parameter_overrides on top, placeholders and all).
func ParameterSets(t *Template, samconfig []byte) (map[string]map[string]string, error) {
	var config map[string]any
	if err := toml.Unmarshal(samconfig, &config); err != nil {
		return nil, fmt.Errorf("samconfig.toml: %w", err)
	}
	defaults := t.Defaults()
	sets := map[string]map[string]string{"defaults": defaults}
	for env, commands := range config {
		overrides, ok := dig(commands, "deploy", "parameters", "parameter_overrides")
		if !ok {
			continue
		}
		var text string
		switch o := overrides.(type) {
		case string:
			text = o
		case []any:
			parts := make([]string, len(o))
			for i, p := range o {
				parts[i] = fmt.Sprint(p)
			}
			text = strings.Join(parts, " ")
		default:
			return nil, fmt.Errorf("samconfig.toml [%s.deploy.parameters]: parameter_overrides is neither a string nor a list", env)
		}
		values := maps.Clone(defaults)
		tokens, err := shellSplit(text)
		if err != nil {
			return nil, fmt.Errorf("samconfig.toml [%s]: parameter_overrides: %w", env, err)
		}
		for _, token := range tokens {
			key, value, ok := strings.Cut(token, "=")
			if !ok {
				return nil, fmt.Errorf("samconfig.toml [%s]: override %q is not KEY=VALUE", env, token)
			}
			values[key] = value
		}
		sets["samconfig."+env] = values
	}
	return sets, nil
}

func dig(v any, keys ...string) (any, bool) {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// shellSplit splits s into words as SAM CLI splits parameter_overrides
// (Python's shlex.split, POSIX mode): whitespace separates words; single
// quotes keep everything literally; double quotes keep everything but a
// backslash before ", \, $ or `; a backslash outside quotes keeps the next
// character.
func shellSplit(s string) ([]string, error) {
	var words []string
	var word strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case ' ', '\t', '\n', '\r':
			if inWord {
				words = append(words, word.String())
				word.Reset()
				inWord = false
			}
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("no closing quotation in %q", s)
			}
			word.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				word.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("no closing quotation in %q", s)
			}
			inWord = true
		case '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("no escaped character at the end of %q", s)
			}
			i++
			word.WriteByte(s[i])
			inWord = true
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, word.String())
	}
	return words, nil
}
