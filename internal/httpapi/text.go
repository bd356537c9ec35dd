package httpapi

import (
	"strings"
	"unicode/utf8"
)

// Problems with the bytes of a text value. PostgreSQL stores neither NUL
// nor invalid UTF-8 (SQLSTATE 22021), so such text is refused where it
// enters, naming the field, before anything is hashed or written.
const (
	detailNUL         = "must not contain NUL characters"
	detailInvalidUTF8 = "must be valid UTF-8 text"
)

// textProblem returns what is wrong with the bytes of s, or "".
func textProblem(s string) string {
	switch {
	case !utf8.ValidString(s):
		return detailInvalidUTF8
	case strings.IndexByte(s, 0) >= 0:
		return detailNUL
	}
	return ""
}

// printable names a field whose own name may hold bad bytes: NUL and
// invalid UTF-8 become U+FFFD, so that the problem document stays text.
func printable(name string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(name, "\uFFFD"), "\x00", "\uFFFD")
}

// headerProblem returns what is wrong with a header value the API reads:
// invalid UTF-8 or a control character (RFC 9110 allows neither NUL nor
// other controls but tab in a field value).
func headerProblem(v string) string {
	if !utf8.ValidString(v) {
		return detailInvalidUTF8
	}
	if strings.ContainsFunc(v, func(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }) {
		return "must not contain control characters"
	}
	return ""
}

// jsonStringProblem checks the raw bytes between the quotes of a JSON
// string literal, which encoding/json has already found well formed:
// invalid UTF-8 and unpaired UTF-16 surrogate escapes, which encoding/json
// would quietly turn into U+FFFD, and NUL, written \u0000. It returns "" for
// a good string.
func jsonStringProblem(raw []byte) string {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\' && i+1 < len(raw) && raw[i+1] == 'u':
			r, ok := hex4(raw[i+2:])
			if !ok {
				return detailInvalidUTF8
			}
			i += 6
			switch {
			case r == 0:
				return detailNUL
			case r >= 0xDC00 && r <= 0xDFFF:
				return detailInvalidUTF8 // a low surrogate alone
			case r >= 0xD800 && r <= 0xDBFF:
				if i+1 >= len(raw) || raw[i] != '\\' || raw[i+1] != 'u' {
					return detailInvalidUTF8
				}
				low, ok := hex4(raw[i+2:])
				if !ok || low < 0xDC00 || low > 0xDFFF {
					return detailInvalidUTF8
				}
				i += 6
			}
		case c == '\\':
			i += 2
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size <= 1 {
				return detailInvalidUTF8
			}
			i += size
		}
	}
	return ""
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}
