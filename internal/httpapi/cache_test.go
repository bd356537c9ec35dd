package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
)

const publicCache = "public, max-age=42, stale-while-revalidate=7"

// newCachingAPI is an API whose public answers say publicCache.
func newCachingAPI(t *testing.T) *api {
	return newAPI(t, func(c *httpapi.Config) {
		c.PublicMaxAge, c.StaleWhileRevalidate = 42*time.Second, 7*time.Second
	})
}

func ifNoneMatch(tags string) reqOption { return header("If-None-Match", tags) }

// wantCacheable fails unless r is a 200 with an entity tag and the given
// Cache-Control, varying by Authorization; it returns the tag.
func wantCacheable(tb testing.TB, r response, cacheControl string) string {
	tb.Helper()
	want(tb, r, http.StatusOK)
	tag := r.Header.Get("ETag")
	if !strings.HasPrefix(tag, `"`) || !strings.HasSuffix(tag, `"`) || len(tag) < 3 {
		tb.Fatalf("ETag %q", tag)
	}
	if got := r.Header.Get("Cache-Control"); got != cacheControl {
		tb.Fatalf("Cache-Control %q, want %q", got, cacheControl)
	}
	if !strings.Contains(strings.Join(r.Header.Values("Vary"), ","), "Authorization") {
		tb.Fatalf("Vary %q lacks Authorization", r.Header.Values("Vary"))
	}
	return tag
}

// wantNotModified fails unless r is an empty 304 with the tag.
func wantNotModified(tb testing.TB, r response, tag, cacheControl string) {
	tb.Helper()
	want(tb, r, http.StatusNotModified)
	if len(r.Body) != 0 || r.Header.Get("ETag") != tag || r.Header.Get("Cache-Control") != cacheControl {
		tb.Fatalf("304: body %q, ETag %q (want %q), Cache-Control %q", r.Body, r.Header.Get("ETag"), tag, r.Header.Get("Cache-Control"))
	}
}

// A job: 304 while unchanged; a patch, or closing it, gives a 200 with a
// new tag. A member sees the closed job, privately.
func TestJobConditionalGet(t *testing.T) {
	t.Parallel()
	a := newCachingAPI(t)
	w := a.world()
	path := fmt.Sprintf("/v1/jobs/%d", w.job.ID)
	tag := wantCacheable(t, a.do("GET", path, nil), publicCache)
	wantNotModified(t, a.do("GET", path, nil, ifNoneMatch(tag)), tag, publicCache)
	wantNotModified(t, a.do("GET", path, nil, ifNoneMatch(`"nope", W/`+tag)), tag, publicCache)
	wantNotModified(t, a.do("GET", path, nil, ifNoneMatch(`*`)), tag, publicCache)
	wantCacheable(t, a.do("GET", path, nil, ifNoneMatch(`"other"`)), publicCache)
	wantCacheable(t, a.do("GET", path, nil, ifNoneMatch(`malformed`)), publicCache)

	want(t, a.do("PATCH", path, map[string]any{"title": "Renamed"}, as(w.employer)), http.StatusOK)
	r := a.do("GET", path, nil, ifNoneMatch(tag))
	patched := wantCacheable(t, r, publicCache)
	if patched == tag || decodeAs[jobboard.Job](t, r).Title != "Renamed" {
		t.Fatalf("after a patch: tag %s (was %s), body %s", patched, tag, r.Body)
	}

	want(t, a.do("PATCH", path, map[string]any{"status": "closed"}, as(w.employer)), http.StatusOK)
	wantProblem(t, a.do("GET", path, nil, ifNoneMatch(patched)), http.StatusNotFound, "not-found")
	r = a.do("GET", path, nil, as(w.employer), ifNoneMatch(patched))
	closed := wantCacheable(t, r, "private, no-cache")
	if closed == patched || decodeAs[jobboard.Job](t, r).Status != jobboard.JobClosed {
		t.Fatalf("closed job: tag %s, body %s", closed, r.Body)
	}
	wantNotModified(t, a.do("GET", path, nil, as(w.employer), ifNoneMatch(closed)), closed, "private, no-cache")
}

// A search page: 304 while nothing changed; a new job that belongs on it, a
// patched job and a closed job each give a 200 with a new tag.
func TestSearchConditionalGet(t *testing.T) {
	t.Parallel()
	a := newCachingAPI(t)
	w := a.world()
	const page = "/v1/jobs?q=engineer&limit=5"
	tag := wantCacheable(t, a.do("GET", page, nil), publicCache)
	wantNotModified(t, a.do("GET", page, nil, ifNoneMatch(tag)), tag, publicCache)
	// A read elsewhere changes nothing.
	want(t, a.do("GET", fmt.Sprintf("/v1/jobs/%d", w.job.ID), nil), http.StatusOK)
	wantNotModified(t, a.do("GET", page, nil, ifNoneMatch(tag)), tag, publicCache)

	titles := func(r response) []string {
		var out []string
		for _, j := range decodeAs[struct{ Items []jobboard.Job }](t, r).Items {
			out = append(out, j.Title)
		}
		return out
	}
	steps := []struct {
		name   string
		change func() jobboard.Job
		want   []string
	}{
		{"a new job on the page", func() jobboard.Job { return a.job(w.employer, w.company.ID, "Platform Engineer") },
			[]string{"Platform Engineer", "Go Engineer"}},
		{"a job patched", func() jobboard.Job {
			r := a.do("PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), map[string]any{"title": "Senior Go Engineer"}, as(w.employer))
			want(t, r, http.StatusOK)
			return decodeAs[jobboard.Job](t, r)
		}, []string{"Platform Engineer", "Senior Go Engineer"}},
		{"a job closed", func() jobboard.Job {
			r := a.do("PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), map[string]any{"status": "closed"}, as(w.employer))
			want(t, r, http.StatusOK)
			return decodeAs[jobboard.Job](t, r)
		}, []string{"Platform Engineer"}},
	}
	for _, s := range steps {
		s.change()
		r := a.do("GET", page, nil, ifNoneMatch(tag))
		next := wantCacheable(t, r, publicCache)
		if next == tag || fmt.Sprint(titles(r)) != fmt.Sprint(s.want) {
			t.Fatalf("%s: tag %s (was %s), titles %v, want %v", s.name, next, tag, titles(r), s.want)
		}
		wantNotModified(t, a.do("GET", page, nil, ifNoneMatch(next)), next, publicCache)
		tag = next
	}

	// Another query or another caller has another tag; a signed-in caller's
	// page is private.
	other := wantCacheable(t, a.do("GET", "/v1/jobs?q=engineer&limit=6", nil), publicCache)
	mine := wantCacheable(t, a.do("GET", page, nil, as(w.candidate)), "private, no-cache")
	if other == tag || mine == tag {
		t.Fatalf("tags collide: %s %s %s", tag, other, mine)
	}
	wantCacheable(t, a.do("GET", page, nil, as(w.candidate), ifNoneMatch(tag)), "private, no-cache")
	wantNotModified(t, a.do("GET", page, nil, as(w.candidate), ifNoneMatch(mine)), mine, "private, no-cache")

	// Errors carry no tag and are not cached.
	for _, r := range []response{
		a.do("GET", "/v1/jobs?limit=0", nil, ifNoneMatch(tag)),
		a.do("GET", "/v1/jobs", nil, bearer("expired"), ifNoneMatch(tag)),
	} {
		if r.Status < 400 || r.Header.Get("ETag") != "" || r.Header.Get("Cache-Control") != "no-store" {
			t.Fatalf("error answer %s with ETag %q, Cache-Control %q", r, r.Header.Get("ETag"), r.Header.Get("Cache-Control"))
		}
	}
}

// A company: 304 while unchanged, and every caller sees the same tag.
func TestCompanyConditionalGet(t *testing.T) {
	t.Parallel()
	a := newCachingAPI(t)
	w := a.world()
	path := fmt.Sprintf("/v1/companies/%d", w.company.ID)
	tag := wantCacheable(t, a.do("GET", path, nil), publicCache)
	wantNotModified(t, a.do("GET", path, nil, ifNoneMatch(tag)), tag, publicCache)
	wantNotModified(t, a.do("GET", path, nil, as(w.candidate), ifNoneMatch(tag)), tag, "private, no-cache")
	otherTag := wantCacheable(t, a.do("GET", fmt.Sprintf("/v1/companies/%d", w.otherCompany.ID), nil, ifNoneMatch(tag)), publicCache)
	if otherTag == tag {
		t.Fatal("two companies share a tag")
	}
}

// Everything that is not a public read is no-store: signed-in answers,
// writes, errors. The defaults apply when the configuration says nothing.
func TestCacheControlOfOtherAnswers(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	w := a.world()
	for _, r := range []response{
		a.do("GET", "/v1/me", nil, as(w.candidate)),
		a.do("GET", "/v1/me/applications", nil, as(w.candidate)),
		a.do("GET", fmt.Sprintf("/v1/applications/%d", w.application.ID), nil, as(w.candidate)),
		a.do("GET", fmt.Sprintf("/v1/jobs/%d/applications", w.job.ID), nil, as(w.employer)),
		a.do("POST", "/v1/companies", map[string]any{"name": "New"}, as(w.employer)),
		a.do("PATCH", fmt.Sprintf("/v1/jobs/%d", w.job.ID), map[string]any{"title": "T"}, as(w.employer)),
		a.do("GET", "/v1/jobs/999999", nil),
		a.do("GET", "/healthz", nil),
	} {
		if got := r.Header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", r, got)
		}
	}
	wantCacheable(t, a.do("GET", "/v1/jobs", nil), "public, max-age=30, stale-while-revalidate=30")
}
