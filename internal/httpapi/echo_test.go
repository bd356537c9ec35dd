package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// An answer echoes at most 8 of the caller's names, each at most 64 bytes,
// then a count: 7,000 unknown query parameters in a 48 KB request line once
// got a 436 KiB answer. Now every echo is bounded, whatever the request.
func TestEchoesAreCapped(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()

	var q strings.Builder
	for i := range 7000 {
		fmt.Fprintf(&q, "&p%d=1", i)
	}
	longName := strings.Repeat("é", 5000) // 10,000 bytes, two per rune
	tests := []struct {
		name, method, path string
		body               any
		as                 user
		wantShown, wantOut int
	}{
		{"7,000 unknown query parameters", "GET", "/v1/jobs?" + q.String()[1:], nil, user{}, 8, 6992},
		{"unknown parameters of a job read", "GET", fmt.Sprintf("/v1/jobs/%d?%s", w.job.ID, q.String()[1:]), nil, user{}, 8, 6992},
		{"a 10 KB parameter name", "GET", "/v1/jobs?" + longName + "=1", nil, user{}, 1, 0},
		{"a 10 KB member name", "POST", "/v1/companies", raw(`{"` + longName + `":1}`), w.employer, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := a.do(tt.method, tt.path, tt.body, as(tt.as))
			p := wantProblem(t, r, http.StatusBadRequest, "bad-request")
			if len(p.Errors) != tt.wantShown {
				t.Fatalf("%d errors named, want %d", len(p.Errors), tt.wantShown)
			}
			more := decodeAs[struct {
				MoreErrors int `json:"more_errors"`
			}](t, r)
			if more.MoreErrors != tt.wantOut {
				t.Fatalf("more_errors %d, want %d", more.MoreErrors, tt.wantOut)
			}
			for _, f := range p.Errors {
				if len(f.Field) > 64+len("…") || !utf8.ValidString(f.Field) {
					t.Fatalf("field name of %d bytes echoed (valid UTF-8: %t)", len(f.Field), utf8.ValidString(f.Field))
				}
			}
			// The answer is a small, bounded size, whatever was sent.
			if len(r.Body) > 2048 {
				t.Fatalf("answer of %d bytes to a request of %d: %s", len(r.Body), len(tt.path), r.Body)
			}
		})
	}

	// Field errors of validation are all named when they are fewer than the
	// cap: a job with every one of its seven fields wrong.
	r := a.do("POST", fmt.Sprintf("/v1/companies/%d/jobs", w.company.ID), map[string]any{
		"title": "", "description": "", "location": strings.Repeat("l", 201), "employment_type": "gig",
		"salary": map[string]any{"min": -1, "max": -2, "currency": "euro"},
	}, as(w.employer))
	p := wantProblem(t, r, http.StatusUnprocessableEntity, "validation")
	if len(p.Errors) != 7 || strings.Contains(string(r.Body), "more_errors") {
		t.Fatalf("validation errors %v; want all 7 and no more_errors", p.fields())
	}
}
