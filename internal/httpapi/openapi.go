package httpapi

import (
	_ "embed" // for the OpenAPI document
	"net/http"
	"strconv"
)

// openAPIDocument is the hand-written OpenAPI 3.0 description of this API.
// The test suite validates every response it receives against it.
//
//go:embed openapi.json
var openAPIDocument []byte

// OpenAPI returns a copy of the OpenAPI 3.0 document (JSON) of the API.
func OpenAPI() []byte {
	return append([]byte(nil), openAPIDocument...)
}

// serveOpenAPI answers GET /v1/openapi.json; it takes no query parameters
// (see noQueryParameters).
func serveOpenAPI(w http.ResponseWriter, r *http.Request) error {
	if err := noQueryParameters(r); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", mediaJSON)
	h.Set("Content-Length", strconv.Itoa(len(openAPIDocument)))
	h.Set("Cache-Control", "public, max-age=300")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument) // the client went away; nothing to do
	return nil
}
