package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// Defaults of Config.PublicMaxAge and Config.StaleWhileRevalidate: short,
// so that a closed job leaves shared caches within a minute.
const (
	DefaultPublicMaxAge         = 30 * time.Second
	DefaultStaleWhileRevalidate = 30 * time.Second
)

// Cache-Control values. Every answer is noStore unless a handler says
// otherwise: only the public reads (job search, job, company) do.
const (
	noStore = "no-store"
	// privateRevalidate is for a signed-in caller's reads of public things:
	// a member may see closed jobs, so no shared cache may keep them, but
	// the caller's own cache may, revalidating with the entity tag.
	privateRevalidate = "private, no-cache"
)

// noStoreByDefault marks every answer no-store before the handler runs;
// handlers of cacheable answers replace it.
func noStoreByDefault(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", noStore)
		next.ServeHTTP(w, r)
	})
}

// publicCacheControl is the Cache-Control of anonymous public reads.
func publicCacheControl(maxAge, staleWhileRevalidate time.Duration) string {
	return fmt.Sprintf("public, max-age=%d, stale-while-revalidate=%d",
		int64(maxAge/time.Second), int64(staleWhileRevalidate/time.Second))
}

// cacheHeaders sets the validator and caching fields of a public read. The
// answer depends on Authorization (members see closed jobs; a bad token is
// a 401), so caches must key on it.
func (s *server) cacheHeaders(h http.Header, signedIn bool, tag string) {
	h.Set("ETag", tag)
	if signedIn {
		h.Set("Cache-Control", privateRevalidate)
	} else {
		h.Set("Cache-Control", s.publicCache)
	}
	addVary(h, "Authorization")
}

// addVary adds field names to Vary, keeping one field line so that every
// cache reads them all.
func addVary(h http.Header, names ...string) {
	all := h.Values("Vary")
	if len(all) == 0 && len(names) == 1 {
		h.Set("Vary", names[0]) // the common case, without a join
		return
	}
	h.Set("Vary", strings.Join(append(all, names...), ", "))
}

// writeCacheable answers v (200) with its entity tag and caching fields, or
// 304 Not Modified without a body when If-None-Match names the tag.
func (s *server) writeCacheable(w http.ResponseWriter, r *http.Request, signedIn bool, tag string, v any) error {
	s.cacheHeaders(w.Header(), signedIn, tag)
	if noneMatch(r.Header, tag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	return writeJSON(w, http.StatusOK, v)
}

// jobETag is a job's entity tag: its updated_at in microseconds, which every
// change moves strictly forward (see postgres.UpdateJob).
func jobETag(j jobboard.Job) string {
	return `"` + strconv.FormatInt(j.UpdatedAt.UnixMicro(), 36) + `"`
}

// companyETag is a company's entity tag: a hash of its representation.
// Companies have no version of their own, and reading one is a single
// primary-key lookup that the answer needs anyway, so there is no cheaper
// test to use instead.
func companyETag(c jobboard.Company) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("entity tag of company %d: %w", c.ID, err)
	}
	return digestTag(b), nil
}

// listingETag is a search page's entity tag: the listing version (which
// every change to a job or membership bumps), the query, and the caller
// (a member filtering by their company sees its closed jobs).
func listingETag(version int64, rawQuery string, actor *jobboard.Actor) string {
	caller := "anonymous"
	if actor != nil {
		caller = strconv.FormatInt(actor.UserID, 10)
	}
	return `"` + strconv.FormatInt(version, 36) + "-" + digestTag([]byte(caller + "?" + rawQuery))[1:]
}

// digestTag is a strong entity tag made of the first 96 bits of b's SHA-256.
func digestTag(b []byte) string {
	sum := sha256.Sum256(b)
	return `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
}

// noneMatch reports whether If-None-Match names tag (weak comparison, RFC
// 9110 §13.1.2) or is "*". A malformed header matches nothing, so the
// client gets the full answer.
func noneMatch(h http.Header, tag string) bool {
	lines := h.Values("If-None-Match")
	if len(lines) == 0 {
		return false
	}
	want := strings.TrimPrefix(tag, "W/")
	rest := strings.Join(lines, ",")
	for {
		rest = strings.TrimLeft(rest, " \t,")
		switch {
		case rest == "":
			return false
		case rest[0] == '*':
			return true
		}
		rest = strings.TrimPrefix(rest, "W/")
		if !strings.HasPrefix(rest, `"`) {
			return false
		}
		end := strings.IndexByte(rest[1:], '"')
		if end < 0 {
			return false
		}
		if rest[:end+2] == want {
			return true
		}
		rest = rest[end+2:]
	}
}

// listingNotModified answers 304 for a job search whose If-None-Match
// names the tag of the current listing version: one single-row read
// instead of the search. It reports whether it answered. Without
// If-None-Match it reads nothing: the search itself brings the version,
// read with its page or just before it (jobboard.JobListing), so a page is
// never older than its tag, and a plain search costs one round trip.
func (s *server) listingNotModified(w http.ResponseWriter, r *http.Request, actor *jobboard.Actor) (bool, error) {
	if len(r.Header.Values("If-None-Match")) == 0 {
		return false, nil
	}
	version, err := s.Jobs.JobListingVersion(r.Context())
	if err != nil {
		return false, fmt.Errorf("search jobs: %w", err)
	}
	tag := listingETag(version, r.URL.RawQuery, actor)
	if !noneMatch(r.Header, tag) {
		return false, nil
	}
	s.cacheHeaders(w.Header(), actor != nil, tag)
	w.WriteHeader(http.StatusNotModified)
	return true, nil
}
