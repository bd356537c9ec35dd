package httpapi_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
)

// A bad search is a 400 whatever If-None-Match says: "*" once answered 304
// before the parameters were read.
func TestBadSearchIsRefusedBeforeIfNoneMatch(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	for _, path := range []string{"/v1/jobs?limit=0", "/v1/jobs?nope=1", "/v1/jobs?cursor=garbage"} {
		r := a.do("GET", path, nil, header("If-None-Match", "*"))
		wantProblem(t, r, http.StatusBadRequest, "bad-request")
	}
	want(t, a.do("GET", "/v1/jobs?limit=5", nil, header("If-None-Match", "*")), http.StatusNotModified)
}

// The public reads take no query parameters: each would make another key
// in a shared cache (a CDN), so a parameter the API ignored would let
// anyone bust the cache at will. They answer 400, not stored anywhere.
func TestCacheableReadsRefuseQueryParameters(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	for _, path := range []string{
		fmt.Sprintf("/v1/jobs/%d", w.job.ID),
		fmt.Sprintf("/v1/companies/%d", w.company.ID),
		"/v1/openapi.json",
	} {
		want(t, a.do("GET", path, nil), http.StatusOK)
		r := a.do("GET", path+"?utm_source=x", nil)
		p := wantProblem(t, r, http.StatusBadRequest, "bad-request")
		if !slices.Equal(p.fields(), []string{"utm_source"}) || r.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s?utm_source=x: fields %v, Cache-Control %q; want [utm_source], no-store", path, p.fields(), r.Header.Get("Cache-Control"))
		}
	}
}
