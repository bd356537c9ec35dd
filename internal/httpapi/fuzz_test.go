package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// The fuzz targets of the decoders of client input. Their seed corpora in
// testdata/fuzz (every input of the red-team findings among them) run as
// ordinary tests; `make fuzz` explores further. The property is the same for
// all: no panic, an error that answers a 4xx, never a 5xx, and decoded text
// that PostgreSQL can store (no NUL, valid UTF-8).

// clientError fails t unless err answers a 4xx problem.
func clientError(t *testing.T, err error) {
	t.Helper()
	if p, unexpected := problemFor(err); unexpected || p.Status >= 500 || p.Status < 400 {
		t.Fatalf("error %v answers %d (unexpected %t); want a 4xx", err, p.Status, unexpected)
	}
}

// storableText fails t when any string reachable from v has NUL or invalid
// UTF-8.
func storableText(t *testing.T, v any) {
	t.Helper()
	var walk func(path string, rv reflect.Value)
	walk = func(path string, rv reflect.Value) {
		switch rv.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !rv.IsNil() {
				walk(path, rv.Elem())
			}
		case reflect.Struct:
			for i := range rv.NumField() {
				if rv.Type().Field(i).IsExported() {
					walk(path+"."+rv.Type().Field(i).Name, rv.Field(i))
				}
			}
		case reflect.String:
			if p := textProblem(rv.String()); p != "" {
				t.Fatalf("%s = %q got through: %s", path, rv.String(), p)
			}
		}
	}
	walk("", reflect.ValueOf(v))
}

// decodeFuzzed runs decodeValid on body as a request, for one input type.
func decodeFuzzed[T validatable](t *testing.T, body []byte) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	v, err := decodeValid[T](httptest.NewRecorder(), r)
	if err != nil {
		clientError(t, err)
		return
	}
	storableText(t, v)
}

// FuzzRequestBody: every JSON request body type.
func FuzzRequestBody(f *testing.F) {
	f.Add([]byte(`{"email":"a@example.com","password":"long enough pw","name":"A","role":"candidate"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		decodeFuzzed[jobboard.Registration](t, body)
		decodeFuzzed[jobboard.NewJob](t, body)
		decodeFuzzed[jobboard.NewApplication](t, body)
		decodeFuzzed[jobboard.NewCompany](t, body)
		decodeFuzzed[jobboard.PasswordResetRequest](t, body)
		decodeFuzzed[jobboard.PasswordReset](t, body)
		for _, v := range []any{&jobboard.Credentials{}, &statusChange{}} {
			r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
			if err := decodeJSON(httptest.NewRecorder(), r, v); err != nil {
				clientError(t, err)
				continue
			}
			storableText(t, v)
		}
	})
}

// FuzzJobPatch: the job merge patch.
func FuzzJobPatch(f *testing.F) {
	f.Add([]byte(`{"title":"Go","salary":{"min":1}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, partial, err := parseJobPatch(body)
		if err != nil {
			clientError(t, err)
			return
		}
		storableText(t, p)
		storableText(t, partial)
		if partial != nil {
			if _, err := partial.mergeInto(nil); err != nil {
				clientError(t, err)
			}
		}
	})
}

// FuzzSearchQuery: the query string of GET /v1/jobs, cursors included.
func FuzzSearchQuery(f *testing.F) {
	f.Add("q=engineer&location=Berlin&limit=5&cursor=" + encodeCursor(42))
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/jobs", nil)
		r.URL.RawQuery = rawQuery
		filter, err := jobFilter(r)
		if err != nil {
			clientError(t, err)
			return
		}
		storableText(t, filter)
		if filter.Limit < 1 || filter.Limit > jobboard.MaxPageSize || filter.After < 0 {
			t.Fatalf("limit %d, after %d", filter.Limit, filter.After)
		}
	})
}

// FuzzCursor: a cursor decodes to a positive id that encodes back to a
// cursor of the same id, or is refused.
func FuzzCursor(f *testing.F) {
	f.Add(encodeCursor(7))
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := decodeCursor(s)
		if !ok {
			return
		}
		if id <= 0 {
			t.Fatalf("cursor %q decodes to %d", s, id)
		}
		if again, ok := decodeCursor(encodeCursor(id)); !ok || again != id {
			t.Fatalf("cursor of %d does not round-trip: %d %t", id, again, ok)
		}
	})
}

// FuzzIfMatch: the If-Match header.
func FuzzIfMatch(f *testing.F) {
	f.Add(`"1", W/"2", "x"`)
	f.Fuzz(func(t *testing.T, v string) {
		c, err := parseIfMatch(http.Header{"If-Match": {v}})
		if err != nil {
			clientError(t, err)
			return
		}
		for _, version := range c.versions {
			if version <= 0 {
				t.Fatalf("If-Match %q gives version %d", v, version)
			}
		}
	})
}

// FuzzStoredHash: a stored password hash is either refused as malformed or
// within the bounds that keep one login cheap.
func FuzzStoredHash(f *testing.F) {
	f.Add(newPasswordHasher(PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1}).hash("pw"))
	h := newPasswordHasher(PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1})
	f.Fuzz(func(t *testing.T, encoded string) {
		p, salt, key, err := parseHash(encoded)
		if err != nil {
			if !errors.Is(err, errMalformedHash) {
				t.Fatalf("parseHash(%q): %v, not errMalformedHash", encoded, err)
			}
			return
		}
		if p.MemoryKiB > maxMemoryKiB || p.Time < 1 || p.Time > maxTime || p.Threads < 1 || p.Threads > maxThreads ||
			len(salt) == 0 || len(key) == 0 {
			t.Fatalf("parseHash(%q) accepted %+v", encoded, p)
		}
		// Verifying runs argon2 with the stored parameters; keep the fuzzer
		// fast by verifying only the cheap ones.
		if p.MemoryKiB <= 1024 && p.Time <= 2 {
			if _, err := h.verify("pw", encoded); err != nil {
				t.Fatalf("verify after a successful parse: %v", err)
			}
		}
		if strings.Count(encoded, "$") != 5 {
			t.Fatalf("parseHash accepted %q", encoded)
		}
	})
}
