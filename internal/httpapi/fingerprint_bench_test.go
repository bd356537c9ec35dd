package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// BenchmarkFingerprint: the keyed fingerprint of an Idempotency-Key
// request (HMAC-SHA256 under the key derived from the token key, the key
// source asked and the derivation found in its cache, as every keyed
// request does) against the unkeyed SHA-256 it replaced, over the same
// request, timed alternately in batches so that both meet the same machine
// ("x-sha256": the keyed one's time over the unkeyed one's; ns/op is the
// pair's). Bodies: a company (~60 bytes), a job (~1 KB), and the largest
// body the API reads (1 MiB).
func BenchmarkFingerprint(b *testing.B) {
	ctx := context.Background()
	f := newFingerprinter(staticKey([]byte("benchmark-token-signing-key-32by")))
	for _, size := range []struct {
		name string
		body string
	}{
		{"company", `{"name":"Acme Robotics","website":"https://acme.example"}`},
		{"job", `{"title":"Senior Go Engineer","description":"` + strings.Repeat("Build and run services in Go. ", 32) + `","employment_type":"full_time"}`},
		{"1MiB", `{"description":"` + strings.Repeat("x", maxBodyBytes-20) + `"}`},
	} {
		b.Run(size.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPost, "/v1/companies", nil)
			body := []byte(size.body)
			const batch = 32
			var unkeyed, keyed time.Duration
			for b.Loop() {
				start := time.Now()
				for range batch {
					legacyFingerprint(r, body)
				}
				mid := time.Now()
				for range batch {
					if _, err := f.sum(ctx, "user:1", r, body); err != nil {
						b.Fatal(err)
					}
				}
				unkeyed += mid.Sub(start)
				keyed += time.Since(mid)
			}
			b.ReportMetric(float64(unkeyed.Nanoseconds())/float64(b.N*batch), "sha256-ns")
			b.ReportMetric(float64(keyed.Nanoseconds())/float64(b.N*batch), "hmac-ns")
			b.ReportMetric(float64(keyed)/float64(unkeyed), "x-sha256")
		})
	}
}
