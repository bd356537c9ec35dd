package httpapi

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// pathID returns the positive integer path parameter name.
// Errors: *requestError.
func pathID(r *http.Request, name string) (int64, error) {
	id, ok := parseID(r.PathValue(name))
	if !ok {
		return 0, badRequest(name, "must be a positive integer id")
	}
	return id, nil
}

// parseID accepts canonical decimal positive int64s only: no sign, no
// leading zeros, no spaces.
func parseID(s string) (int64, bool) {
	if s == "" || s[0] == '0' || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil && id > 0
}

// query reads the query string strictly: each parameter at most once and
// only the ones an endpoint names; anything else is a 400, so that a typo
// such as ?salary_minimum=… does not silently widen a search.
type query struct {
	values url.Values
	err    *requestError
}

// newQuery parses r's query string and checks it names only allowed
// parameters, each once, with values that are text PostgreSQL can store
// (no NUL, valid UTF-8).
func newQuery(r *http.Request, allowed ...string) *query {
	q := &query{}
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		q.err = badRequest("", "The query string is malformed.")
		return q
	}
	q.values = values
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	slices.Sort(names) // problems in a stable order
	for _, name := range names {
		vs := values[name]
		switch {
		case textProblem(name) != "":
			q.fail(printable(name), "has a name that "+textProblem(name))
		case !slices.Contains(allowed, name):
			q.fail(name, "is not a known query parameter")
		case len(vs) > 1:
			q.fail(name, "must be given at most once")
		case textProblem(vs[0]) != "":
			q.fail(name, textProblem(vs[0]))
			delete(q.values, name) // so that no reader uses it
		}
	}
	return q
}

// noQueryParameters refuses every query parameter of a read that takes
// none. The public reads are cached by shared caches (a CDN) under their
// full URL, so a parameter the API ignored would still make a new cache
// key: a lever to bust the cache and reach the origin at will.
// Errors: *requestError.
func noQueryParameters(r *http.Request) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	return newQuery(r).done()
}

// fail records a problem with parameter name; all problems are reported
// together by done.
func (q *query) fail(name, detail string) {
	if q.err == nil {
		q.err = &requestError{detail: "The query string has invalid parameters."}
	}
	q.err.fields = append(q.err.fields, jobboard.FieldError{Field: name, Detail: detail})
}

// done returns the problems met, or nil. Errors: *requestError.
func (q *query) done() error {
	if q.err == nil {
		return nil
	}
	slices.SortStableFunc(q.err.fields, func(a, b jobboard.FieldError) int { return strings.Compare(a.Field, b.Field) })
	return q.err
}

func (q *query) get(name string) (string, bool) {
	vs, ok := q.values[name]
	if !ok || len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// text returns a free-text parameter, at most maxLen characters.
func (q *query) text(name string, maxLen int) string {
	v, _ := q.get(name)
	v = strings.TrimSpace(v)
	if len([]rune(v)) > maxLen {
		q.fail(name, "must be at most "+strconv.Itoa(maxLen)+" characters")
		return ""
	}
	return v
}

func (q *query) boolean(name string) *bool {
	v, ok := q.get(name)
	if !ok {
		return nil
	}
	switch v {
	case "true":
		b := true
		return &b
	case "false":
		b := false
		return &b
	}
	q.fail(name, `must be "true" or "false"`)
	return nil
}

// integer returns an integer parameter within [lo, hi].
func (q *query) integer(name string, lo, hi int64) *int64 {
	v, ok := q.get(name)
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi {
		q.fail(name, "must be an integer from "+strconv.FormatInt(lo, 10)+" to "+strconv.FormatInt(hi, 10))
		return nil
	}
	return &n
}

func (q *query) id(name string) *int64 {
	v, ok := q.get(name)
	if !ok {
		return nil
	}
	id, valid := parseID(v)
	if !valid {
		q.fail(name, "must be a positive integer id")
		return nil
	}
	return &id
}

// limit returns the page size: default DefaultPageSize, 1 to MaxPageSize.
func (q *query) limit() int {
	if n := q.integer("limit", 1, jobboard.MaxPageSize); n != nil {
		return int(*n)
	}
	return jobboard.DefaultPageSize
}

// cursor returns the keyset position encoded in the "cursor" parameter, or
// zero for the first page.
func (q *query) cursor() int64 {
	v, ok := q.get("cursor")
	if !ok {
		return 0
	}
	after, valid := decodeCursor(v)
	if !valid {
		q.fail("cursor", "is not a cursor this API issued")
		return 0
	}
	return after
}

// cursorPrefix versions the cursor format, so that it can change without
// misreading cursors that clients still hold.
const cursorPrefix = "v1:"

// encodeCursor makes the opaque next_cursor for a keyset position; "" for
// the last page. Clients must treat it as opaque: base64url of "v1:<id>".
func encodeCursor(after int64) string {
	if after <= 0 {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.FormatInt(after, 10)))
}

func decodeCursor(s string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) {
		return 0, false
	}
	return parseID(strings.TrimPrefix(string(b), cursorPrefix))
}

// page is the JSON of one page of a list.
type page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

// newPage converts a store page; next_cursor is null on the last page.
func newPage[T any](p jobboard.Page[T]) page[T] {
	out := page[T]{Items: p.Items}
	if out.Items == nil {
		out.Items = []T{}
	}
	if c := encodeCursor(p.NextAfter); c != "" {
		out.NextCursor = &c
	}
	return out
}
