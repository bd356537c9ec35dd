package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// maxBodyBytes is the largest request body read; a larger one answers 413.
const maxBodyBytes = 1 << 20

// Media types this API speaks.
const (
	mediaJSON    = "application/json"
	mediaProblem = "application/problem+json"
)

// decodeJSON reads the request body, at most maxBodyBytes, into v. It refuses
// unknown fields, a body that is not a JSON object, and trailing data.
// Errors: *requestError (400), *http.MaxBytesError (413).
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(w, r)
	if err != nil {
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

// readBody reads the whole body (at most maxBodyBytes) and checks that it is
// exactly one JSON object with nothing after it.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("read body: %w", err)
		}
		return nil, &requestError{detail: "The request body could not be read.", cause: err}
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return nil, badRequest("", "The request body is empty; a JSON object is required.")
	}
	if body[0] != '{' {
		return nil, badRequest("", "The request body must be a JSON object.")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, jsonError(err)
	}
	if dec.InputOffset() != int64(len(body)) {
		return nil, badRequest("", "The request body has data after the JSON object.")
	}
	return body, nil
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
