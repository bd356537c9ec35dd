package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/jobboard"
)

func TestCompanies(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	employer := a.register(jobboard.RoleEmployer)
	candidate := a.register(jobboard.RoleCandidate)

	r := a.do("POST", "/v1/companies", map[string]any{"name": "  Acme  ", "description": "We make things.", "website": "https://acme.example"}, as(employer))
	want(t, r, http.StatusCreated)
	c := decodeAs[jobboard.Company](t, r)
	if c.Name != "Acme" || c.CreatedBy != employer.ID || c.Website != "https://acme.example" || c.Description != "We make things." {
		t.Fatalf("company %+v", c)
	}
	if loc := r.Header.Get("Location"); loc != fmt.Sprintf("/v1/companies/%d", c.ID) {
		t.Fatalf("Location %q", loc)
	}

	// Companies are public.
	r = a.do("GET", fmt.Sprintf("/v1/companies/%d", c.ID), nil)
	want(t, r, http.StatusOK)
	if got := decodeAs[jobboard.Company](t, r); got != c {
		t.Fatalf("got %+v, want %+v", got, c)
	}
	wantProblem(t, a.do("GET", "/v1/companies/999999", nil), http.StatusNotFound, "not-found")
	for _, bad := range []string{"abc", "0", "-1", "01", "+1", "1.5", "99999999999999999999"} {
		p := wantProblem(t, a.do("GET", "/v1/companies/"+bad, nil), http.StatusBadRequest, "bad-request")
		if !slices.Equal(p.fields(), []string{"id"}) {
			t.Fatalf("id %q: fields %v", bad, p.fields())
		}
	}

	before := a.counts()
	wantProblem(t, a.do("POST", "/v1/companies", map[string]any{"name": "Nope"}), http.StatusUnauthorized, "unauthenticated")
	wantProblem(t, a.do("POST", "/v1/companies", map[string]any{"name": "Nope"}, as(candidate)), http.StatusForbidden, "forbidden")
	p := wantProblem(t, a.do("POST", "/v1/companies", map[string]any{"name": " ", "website": "ftp://x", "description": strings.Repeat("d", 20001)}, as(employer)),
		http.StatusUnprocessableEntity, "validation")
	if !slices.Equal(p.fields(), []string{"description", "name", "website"}) {
		t.Fatalf("fields %v", p.fields())
	}
	p = wantProblem(t, a.do("POST", "/v1/companies", map[string]any{"name": strings.Repeat("n", 201)}, as(employer)), http.StatusUnprocessableEntity, "validation")
	if !slices.Equal(p.fields(), []string{"name"}) {
		t.Fatalf("fields %v", p.fields())
	}
	wantProblem(t, a.do("POST", "/v1/companies", map[string]any{"name": "X", "owner": 1}, as(employer)), http.StatusBadRequest, "bad-request")
	wantProblem(t, a.do("POST", "/v1/companies", raw(`{"name": "X"`), as(employer)), http.StatusBadRequest, "bad-request")
	if after := a.counts(); !mapsEqual(before, after) {
		t.Fatalf("refused requests changed rows: %v → %v", before, after)
	}
}
