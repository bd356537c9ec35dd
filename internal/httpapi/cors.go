package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// CORS, for a front end developed against the local server (`make dev`). On
// AWS, API Gateway's own CORS configuration answers preflights and replaces
// these header fields with its own, from the same list of origins.
//
// template.yaml's CorsConfiguration lists the same header fields
// (internal/dev/deploy checks it).
var (
	// CORSAllowHeaders are the request header fields a browser may send.
	CORSAllowHeaders = []string{"Authorization", "Content-Type", "Idempotency-Key", "If-Match", "If-None-Match"}
	// CORSExposeHeaders are the answer's header fields a browser script may
	// read.
	CORSExposeHeaders = []string{"ETag", "Location", "Retry-After", "WWW-Authenticate", "X-Request-Id", "Idempotent-Replayed"}

	corsAllowHeaders  = strings.Join(CORSAllowHeaders, ", ")
	corsExposeHeaders = strings.Join(CORSExposeHeaders, ", ")
)

const corsMaxAge = "600"

// ParseAllowedOrigins reads a comma-separated list of origins, as in the
// environment variable CORS_ALLOWED_ORIGINS: each "*" (any origin) or a
// scheme, host and optional port such as https://app.example.com, without
// path. Empty entries are skipped; an empty list turns CORS off.
// Errors: an entry that is not an origin.
func ParseAllowedOrigins(list string) ([]string, error) {
	var origins []string
	for _, o := range strings.Split(list, ",") {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o != "*" {
			u, err := url.Parse(o)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
				u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
				return nil, fmt.Errorf("allowed origin %q: want * or scheme://host[:port], such as http://localhost:5173", o)
			}
			o = strings.ToLower(o)
		}
		origins = append(origins, o)
	}
	return origins, nil
}

// cors answers CORS preflights and marks the answers to allowed origins.
// Without allowed origins it changes nothing. Bearer tokens travel in the
// Authorization header, not in cookies, so credentials are never allowed.
func (s *server) cors(next http.Handler) http.Handler {
	if len(s.CORSAllowedOrigins) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		addVary(h, "Origin")
		origin := r.Header.Get("Origin")
		allow := s.allowOrigin(origin)
		if r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != "" {
			methods := s.allowed(r)
			if methods == "" {
				next.ServeHTTP(w, r) // no such endpoint: 404
				return
			}
			addVary(h, "Access-Control-Request-Method", "Access-Control-Request-Headers")
			if allow != "" {
				h.Set("Access-Control-Allow-Origin", allow)
				h.Set("Access-Control-Allow-Methods", methods)
				h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
				h.Set("Access-Control-Max-Age", corsMaxAge)
			}
			// A refused origin gets the same empty answer without the
			// Access-Control-Allow-* fields, which the browser refuses.
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allow != "" {
			h.Set("Access-Control-Allow-Origin", allow)
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		next.ServeHTTP(w, r)
	})
}

// allowOrigin returns the Access-Control-Allow-Origin for origin: the
// origin itself when listed, "*" when any is allowed, else "".
func (s *server) allowOrigin(origin string) string {
	switch {
	case origin == "":
		return ""
	case slices.Contains(s.CORSAllowedOrigins, strings.ToLower(origin)):
		return origin
	case slices.Contains(s.CORSAllowedOrigins, "*"):
		return "*"
	}
	return ""
}
