// Package httpapi is the HTTP layer of the job board: NewServer returns a
// plain net/http handler serving the JSON API under /v1, described by the
// embedded OpenAPI document at /v1/openapi.json.
//
// Every route is registered in routes.go. Handlers return an error, and one
// function (problemFor) turns errors into RFC 9457 problem responses with
// errors.Is/As: the domain's error kinds from package jobboard, request
// errors (400), oversized bodies (413); anything else is a 500 whose cause is
// logged, never shown. Authentication is a bearer JWT (HS256) issued by
// register and login; passwords are hashed with argon2id. What a caller may
// see is decided by the stores, which answer jobboard.ErrNotFound for what
// the caller may not see (404, not 403). Every POST, PATCH and DELETE runs
// as one unit of work (write, write.go), which relays the events it
// committed before the client gets the answer.
//
// The same handler serves local HTTP and, through the API Gateway proxy
// adapter in functions/api, Lambda; when a request comes through API Gateway
// its request id is the one in every log line and in X-Request-Id.
package httpapi
