// Package openapitest checks HTTP responses against the API's OpenAPI
// document (httpapi.OpenAPI) with two independent validators: kin-openapi,
// in process, and Stoplight Prism's validating proxy (see prism.go). Tests
// wrap their client's transport with Transport, so that every response a
// test receives is checked; responses obtained another way (the Lambda
// adapter, an httptest.ResponseRecorder) go through Check.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/jobboard/jobboard/internal/httpapi"
)

// The OpenAPI document, parsed and checked once per test binary.
var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// Spec returns the parsed and validated document and a router over it. It
// fails tb if the document is invalid.
func Spec(tb testing.TB) (*openapi3.T, routers.Router) {
	tb.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(httpapi.OpenAPI())
		if specErr != nil {
			return
		}
		if specErr = specDoc.Validate(context.Background()); specErr != nil {
			return
		}
		// The document's server is relative ("/": wherever it is served);
		// the tests' servers listen on random ports. Route by path alone.
		specDoc.Servers = nil
		specRouter, specErr = legacy.NewRouter(specDoc)
	})
	if specErr != nil {
		tb.Fatalf("OpenAPI document: %v", specErr)
	}
	return specDoc, specRouter
}

// Check validates one response against the OpenAPI document, with
// kin-openapi and with Prism: its status must be documented for the
// operation, its headers and body must match. Unmatched routes must answer a 404 (unknown path) or 405 (known
// path, other method, with Allow) problem.
func Check(tb testing.TB, req *http.Request, status int, header http.Header, body []byte) error {
	doc, router := Spec(tb)
	route, params, err := findRoute(router, req)
	if err != nil {
		// Not a documented operation: a 404 problem for an unknown path, a
		// 405 problem whose Allow lists the documented methods for a known
		// path.
		var allow []string
		for _, m := range []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"} {
			probe := req.Clone(context.Background())
			probe.Method = m
			if m == "HEAD" {
				probe.Method = "GET" // GET routes answer HEAD too
			}
			if _, _, err := findRoute(router, probe); err == nil {
				allow = append(allow, m)
			}
		}
		if len(allow) > 0 && isPreflight(req) && status == http.StatusNoContent {
			// A CORS preflight, where CORS is on, is protocol machinery,
			// not an operation of the document: an empty 204 (with or
			// without Access-Control fields, as the origin is allowed or
			// not). Where CORS is off, it is an OPTIONS request like any.
			if len(body) != 0 {
				return fmt.Errorf("CORS preflight: want an empty 204, got %d bytes", len(body))
			}
			if header.Get("X-Request-Id") == "" {
				return errors.New("no X-Request-Id")
			}
			return nil
		}
		want := http.StatusNotFound
		if len(allow) > 0 {
			want = http.StatusMethodNotAllowed
			if got := header.Get("Allow"); got != strings.Join(allow, ", ") {
				return fmt.Errorf("header Allow %q, want %q", got, strings.Join(allow, ", "))
			}
		}
		if status != want {
			return fmt.Errorf("route not in the document (%w), so want %d, got %d", err, want, status)
		}
		if ct := header.Get("Content-Type"); ct != "application/problem+json" {
			return fmt.Errorf("content type %q, want application/problem+json", ct)
		}
		if header.Get("X-Request-Id") == "" {
			return errors.New("no X-Request-Id")
		}
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			return fmt.Errorf("problem body: %w", err)
		}
		return doc.Components.Schemas["Problem"].Value.VisitJSON(v)
	}
	var kinErr error
	if status == http.StatusNotModified {
		kinErr = checkNotModified(route, header, body)
	} else {
		input := &openapi3filter.ResponseValidationInput{
			RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
			Status:                 status,
			Header:                 header,
			Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
		}
		input.SetBodyBytes(body)
		kinErr = openapi3filter.ValidateResponse(context.Background(), input)
	}
	p, err := sharedPrism()
	if err != nil {
		return errors.Join(kinErr, err)
	}
	return errors.Join(kinErr, p.check(req, status, header, body))
}

// checkNotModified validates a 304, which kin-openapi's validator skips:
// the operation must document it, its required header fields must be there
// and every documented field must match its schema; there is no body.
func checkNotModified(route *routers.Route, header http.Header, body []byte) error {
	ref := route.Operation.Responses.Status(http.StatusNotModified)
	if ref == nil || ref.Value == nil {
		return errors.New("304 is not documented for this operation")
	}
	if len(body) != 0 {
		return fmt.Errorf("304 with a body of %d bytes", len(body))
	}
	for name, h := range ref.Value.Headers {
		values := header.Values(name)
		if len(values) == 0 {
			if h.Value.Required {
				return fmt.Errorf("304 lacks header %s", name)
			}
			continue
		}
		if err := h.Value.Schema.Value.VisitJSON(strings.Join(values, ", ")); err != nil {
			return fmt.Errorf("304 header %s: %w", name, err)
		}
	}
	return nil
}

// isPreflight reports whether req is a CORS preflight request.
func isPreflight(req *http.Request) bool {
	return req.Method == http.MethodOptions && req.Header.Get("Origin") != "" &&
		req.Header.Get("Access-Control-Request-Method") != ""
}

// findRoute is the router's FindRoute, minus its leniency: it matches
// "/v1/jobs/" to /v1/jobs and "/v1/companies" to /v1/companies/{id}
// (an empty id), which the API answers 404 and 405.
func findRoute(router routers.Router, req *http.Request) (*routers.Route, map[string]string, error) {
	route, params, err := router.FindRoute(req)
	if err != nil {
		return nil, nil, err
	}
	if strings.Count(route.Path, "/") != strings.Count(req.URL.Path, "/") {
		return nil, nil, routers.ErrPathNotFound
	}
	for _, v := range params {
		if v == "" {
			return nil, nil, routers.ErrPathNotFound
		}
	}
	return route, params, nil
}

// Transport returns a RoundTripper that checks every response it carries
// with Check and reports mismatches with tb.Errorf (safe from any
// goroutine). base nil means http.DefaultTransport.
func Transport(tb testing.TB, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &validatingTransport{tb: tb, base: base}
}

type validatingTransport struct {
	tb   testing.TB
	base http.RoundTripper
}

func (v *validatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := v.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err := Check(v.tb, req, resp.StatusCode, resp.Header, body); err != nil {
		v.tb.Errorf("%s %s → %d does not match the OpenAPI document: %v\nbody: %s", req.Method, req.URL.RequestURI(), resp.StatusCode, err, body)
	}
	return resp, nil
}
