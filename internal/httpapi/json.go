package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// maxBodyBytes is the largest request body read; a larger one answers 413.
const maxBodyBytes = 1 << 20

// Media types this API speaks.
const (
	mediaJSON    = "application/json"
	mediaProblem = "application/problem+json"
)

// decodeJSON reads the request body, at most maxBodyBytes, into v, a
// pointer to a struct. Before decoding it checks the body with checkBody
// against the struct's json member names, so a member name that matches
// only when case is ignored, a repeated member, and text with NUL or invalid
// UTF-8 are refused. Errors: *requestError (400), errBodyTooLarge (413).
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	return decodeBody(body, v)
}

// decodeBody is decodeJSON on a body already read. Errors: *requestError.
func decodeBody(body []byte, v any) error {
	if err := checkBody(body, membersOf(reflect.TypeOf(v))); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	return nil
}

// validatable is a request body that checks itself; the domain's input types
// (jobboard.Registration, NewCompany, NewJob, NewApplication) are.
type validatable interface {
	Validate() error
}

// normalizer is an input that tidies itself (trims, lower-cases) before it
// is validated.
type normalizer interface {
	Normalize()
}

// decodeValid decodes the body into a T, normalises it when T knows how, and
// validates it. Errors: those of decodeJSON, and *jobboard.ValidationError
// (422).
func decodeValid[T validatable](w http.ResponseWriter, r *http.Request) (T, error) {
	var in T
	if err := decodeJSON(w, r, &in); err != nil {
		return in, err
	}
	if n, ok := any(&in).(normalizer); ok {
		n.Normalize()
	}
	return in, in.Validate()
}

// readBody reads the whole body (at most maxBodyBytes) and checks that it
// is not empty and starts like a JSON object; checkBody checks the rest.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := readAll(w, r)
	if err != nil {
		return nil, err
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, badRequest("", "The request body is empty; a JSON object is required.")
	}
	if body[0] != '{' {
		return nil, badRequest("", "The request body must be a JSON object.")
	}
	return body, nil
}

// readAll reads the whole body, at most maxBodyBytes. Errors:
// errBodyTooLarge (413), a *requestError for a body that cannot be read.
func readAll(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, fmt.Errorf("read body: %w: %w", errBodyTooLarge, err)
	case err != nil:
		return nil, &requestError{detail: "The request body could not be read.", cause: err}
	}
	return body, nil
}

// members is the shape of the JSON objects a body may hold: each member
// name an object may have, with the shape of its value when that is an
// object or an array of objects, else nil. A nil members does not restrict
// names.
type members map[string]members

// memberShapes caches membersOf per type.
var memberShapes sync.Map // reflect.Type → members

// membersOf returns the shape that encoding/json would decode into t, from
// the json tags of its struct fields: nil for a type that is not a struct
// (or a pointer to, or slice of, one).
func membersOf(t reflect.Type) members {
	for t != nil && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() {
		return nil
	}
	if m, ok := memberShapes.Load(t); ok {
		return m.(members)
	}
	m := members{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		m[name] = membersOf(f.Type)
	}
	memberShapes.Store(t, m)
	return m
}

// frame is one open object or array while checkBody walks a body.
type frame struct {
	object   bool
	shape    members
	path     string          // the field name of this value ("" at the top)
	seen     map[string]bool // member names met so far (objects)
	wantName bool            // the next string is a member name (objects)
	name     string          // the current member's name (objects)
}

// checkBody walks a body token by token, before anything is decoded, and
// refuses, naming the member (salary.currency for a nested one): text with
// NUL or invalid UTF-8 (raw bytes or unpaired surrogate escapes, which
// encoding/json would quietly replace with U+FFFD), a member name given
// twice in one object (encoding/json keeps the last), and a name that shape
// does not list exactly (encoding/json would match "Title" to "title"). It
// also refuses malformed JSON and data after the object. Errors:
// *requestError.
func checkBody(body []byte, shape members) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var (
		stack []*frame
		prev  int64
	)
	for {
		tok, err := dec.Token()
		if err != nil {
			return jsonError(err)
		}
		end := dec.InputOffset()
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				path, sh := valueOf(top, shape)
				stack = append(stack, &frame{object: v == '{', shape: sh, path: path, seen: map[string]bool{}, wantName: true})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) == 0 {
					if end != int64(len(body)) {
						return badRequest("", "The request body has data after the JSON object.")
					}
					return nil
				}
				valueDone(stack[len(stack)-1])
			}
		case string:
			raw := rawString(body, prev, end)
			if top != nil && top.object && top.wantName {
				field := joinField(top.path, printable(v))
				if p := jsonStringProblem(raw); p != "" {
					return badRequest(field, "has a name that "+p)
				}
				if top.seen[v] {
					return badRequest(field, "appears more than once")
				}
				top.seen[v] = true
				if top.shape != nil {
					if _, known := top.shape[v]; !known {
						return badRequest(field, unknownMember(top.shape, v))
					}
				}
				top.name, top.wantName = v, false
				break
			}
			if p := jsonStringProblem(raw); p != "" {
				path, _ := valueOf(top, shape)
				if path == "" {
					path = "body"
				}
				return badRequest(path, p)
			}
			valueDone(top)
		default:
			valueDone(top)
		}
		prev = end
	}
}

// valueOf returns the field name and shape of the value that starts inside
// top (nil: at the top level).
func valueOf(top *frame, shape members) (string, members) {
	switch {
	case top == nil:
		return "", shape
	case !top.object:
		return top.path, top.shape
	case top.shape == nil:
		return joinField(top.path, printable(top.name)), nil
	}
	return joinField(top.path, printable(top.name)), top.shape[top.name]
}

// valueDone moves an object's frame on to its next member name.
func valueDone(top *frame) {
	if top != nil && top.object {
		top.wantName = true
	}
}

func joinField(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// rawString returns the bytes between the quotes of the string token that
// ends at end; it starts after prev, past white space, commas and colons.
func rawString(body []byte, prev, end int64) []byte {
	start := prev
	for start < end && body[start] != '"' {
		start++
	}
	if end-start < 2 {
		return nil
	}
	return body[start+1 : end-1]
}

// unknownMember explains a member name that shape does not list, pointing
// at the right spelling when only the case differs.
func unknownMember(shape members, name string) string {
	for known := range shape {
		if strings.EqualFold(known, name) {
			return fmt.Sprintf("is not a known field (names are case-sensitive: %q)", known)
		}
	}
	return "is not a known field"
}

// jsonError describes a decoding error without echoing internals.
func jsonError(err error) *requestError {
	var (
		syntax   *json.SyntaxError
		typeErr  *json.UnmarshalTypeError
		fieldErr = unknownField(err)
	)
	switch {
	case errors.As(err, &syntax):
		return &requestError{detail: "The request body is not valid JSON (at byte " + strconv.FormatInt(syntax.Offset, 10) + ").", cause: err}
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		e := badRequest(field, "must be of JSON type "+jsonTypeName(typeErr.Type.Kind().String()))
		e.cause = err
		return e
	case fieldErr != "":
		e := badRequest(fieldErr, "is not a known field")
		e.cause = err
		return e
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &requestError{detail: "The request body is truncated JSON.", cause: err}
	}
	return &requestError{detail: "The request body is not valid JSON.", cause: err}
}

// unknownField returns the name in encoding/json's unknown-field error, or "".
// encoding/json has no typed error for it; the message format is stable.
func unknownField(err error) string {
	const prefix = `json: unknown field "`
	msg := err.Error()
	if len(msg) > len(prefix)+1 && msg[:len(prefix)] == prefix && msg[len(msg)-1] == '"' {
		return msg[len(prefix) : len(msg)-1]
	}
	return ""
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "struct", "map":
		return "object"
	case "slice", "array":
		return "array"
	case "ptr":
		return "object or null"
	default:
		return "number"
	}
}

// writeJSON encodes v into a buffer first, so an encoding failure can still
// become a 500, then sets the headers, then writes the status and body.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	return writeBody(w, status, mediaJSON, v)
}

func writeBody(w http.ResponseWriter, status int, contentType string, v any) error {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes()) // the client went away; nothing to do
	return nil
}
