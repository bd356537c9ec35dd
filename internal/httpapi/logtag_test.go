package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/httpapi"
)

// A password reset refused for its address's bounds is logged with a tag
// of the address that a dictionary cannot reverse: keyed (two servers with
// other keys tag it otherwise), the same for the same address under one
// key, and no line carries the address, nor an unkeyed SHA-256 of it or a
// prefix of one.
func TestLoggedAddressesAreKeyedTags(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	b := newAPIOn(t, a.db, func(c *httpapi.Config) { c.TokenKey = []byte("another-signing-key-of-32-bytes!") })
	const addr = "someone@example.com"
	sum := sha256.Sum256([]byte(addr))
	bare := hex.EncodeToString(sum[:])
	tags := func(x *api) []string {
		t.Helper()
		var out []string
		for _, l := range logLines(t, x.logs) {
			line := fmt.Sprint(l)
			if strings.Contains(line, addr) || strings.Contains(line, bare[:16]) {
				t.Errorf("a log line carries the address or an unkeyed digest of it: %v", l)
			}
			if l["msg"] == "password reset not queued: the address had too many this hour" {
				tag, _ := l["email_tag"].(string)
				out = append(out, tag)
			}
		}
		return out
	}
	// The first is queued; the next ones, within the cooldown, are not.
	for range 3 {
		want(t, a.requestReset(addr), http.StatusAccepted)
	}
	want(t, b.requestReset(addr), http.StatusAccepted)
	ta, tb := tags(a), tags(b)
	if len(ta) != 2 || len(tb) != 1 {
		t.Fatalf("%d and %d lines of refused resets, want 2 and 1", len(ta), len(tb))
	}
	if len(ta[0]) != 16 || ta[0] != ta[1] {
		t.Errorf("tags %q: want the same 16 hex digits for one address", ta)
	}
	if tb[0] == ta[0] || tb[0] == "" {
		t.Errorf("another key tags the address %q, as the first (%q): the tag is not keyed", tb[0], ta[0])
	}
}
