package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// FuzzWebhookEndpoint: the bodies of the webhook routes. Besides the
// property of every decoder (a 4xx or storable text), a URL that the
// production policy accepts is https, on port 443, with a host that is not
// an address a webhook may not reach. Seed corpus:
// testdata/fuzz/FuzzWebhookEndpoint.
func FuzzWebhookEndpoint(f *testing.F) {
	f.Add([]byte(`{"url":"https://hooks.example.com/in","event_types":["job.closed"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		decodeFuzzed[jobboard.WebhookEndpointPatch](t, body)
		var rot secretRotation
		r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		if err := decodeJSON(httptest.NewRecorder(), r, &rot); err != nil {
			clientError(t, err)
		}
		r = httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		in, err := decodeValid[jobboard.NewWebhookEndpoint](httptest.NewRecorder(), r)
		if err != nil {
			clientError(t, err)
			return
		}
		storableText(t, in)
		if err := (jobboard.WebhookURLPolicy{}).Check(in.URL); err != nil {
			clientError(t, err)
			return
		}
		u, err := url.Parse(in.URL)
		if err != nil || u.Scheme != "https" || (u.Port() != "" && u.Port() != "443") || u.User != nil {
			t.Fatalf("the policy accepted %q", in.URL)
		}
		if a, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
			if reason, blocked := jobboard.BlockedWebhookAddr(a, false); blocked {
				t.Fatalf("the policy accepted %q: %s", in.URL, reason)
			}
		}
		for _, typ := range in.EventTypes {
			if !slices.Contains(jobboard.WebhookEventTypes, typ) {
				t.Fatalf("event type %q accepted", typ)
			}
		}
	})
}

// FuzzDeliveryLogQuery: the query string of the delivery log. Seed corpus:
// testdata/fuzz/FuzzDeliveryLogQuery.
func FuzzDeliveryLogQuery(f *testing.F) {
	f.Add("limit=5&state=pending&cursor=" + encodeCursor(42))
	f.Fuzz(func(t *testing.T, rawQuery string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.RawQuery = rawQuery
		filter, err := parseDeliveryQuery(r)
		if err != nil {
			clientError(t, err)
			return
		}
		storableText(t, filter)
		if filter.Limit < 1 || filter.Limit > jobboard.MaxPageSize || filter.After < 0 ||
			(filter.State != "" && !slices.Contains(jobboard.WebhookDeliveryStates, filter.State)) {
			t.Fatalf("%q gives %+v", rawQuery, filter)
		}
	})
}
