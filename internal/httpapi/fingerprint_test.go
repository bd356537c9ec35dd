package httpapi_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/jobboard"
)

// rotate makes key current and the current one previous, for a day, as
// a rotation of the secret does.
func (k *rotatingKeys) rotate(key string) {
	k.mu.Lock()
	cur := k.keys.Current
	k.mu.Unlock()
	k.set(httpapi.TokenKeys{Current: []byte(key), Previous: cur, PreviousUntil: time.Now().Add(24 * time.Hour)})
}

func hmacOf(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// The fingerprint stored with a keyed answer is an HMAC under a key
// derived from the server's token key, as docs/security.md writes it:
// nothing in the database (nor the request) recomputes it, not the unkeyed
// SHA-256 stored before, nor the same under another key. A rotation of the
// server key keeps the keys in flight working: their retries are checked
// with the previous key, while new requests use the new one; only after a
// second rotation is the first key's answer past checking, and then the
// retry is refused (422), never run twice.
func TestFingerprintIsKeyedAndSurvivesRotation(t *testing.T) {
	t.Parallel()
	const k1, k2, k3 = "first-server-key-of-32-bytes-0001", "second-server-key-of-32-bytes-002", "third-server-key-of-32-bytes-0003"
	keys := &rotatingKeys{}
	keys.rotate(k1)
	a := newAPI(t, func(c *httpapi.Config) { c.TokenKey, c.TokenKeys = nil, keys.source })
	employer := a.register(jobboard.RoleEmployer)
	key := newKey()
	body := `{"name":"Fingerprinted"}`
	first := a.do("POST", "/v1/companies", raw(body), as(employer), withKey(key))
	want(t, first, http.StatusCreated)

	var stored []byte
	if err := a.db.Pool.QueryRow(context.Background(), "SELECT fingerprint FROM idempotency_keys WHERE key = $1", key).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	scope := "user:" + strconv.FormatInt(employer.ID, 10)
	request := []byte(strings.Join([]string{scope, "POST", "/v1/companies", "", ""}, "\x00") + "\x00" + body)
	unkeyed := sha256.Sum256(request[len(scope)+1:])
	if len(stored) != 41 || stored[0] != 1 || bytes.Contains(stored, unkeyed[:]) {
		t.Fatalf("stored fingerprint %x: want version 1, key id, HMAC; not the unkeyed SHA-256", stored)
	}
	derive := func(tokenKey string) (key, id []byte) {
		key = hmacOf([]byte(tokenKey), []byte("jobboard idempotency fingerprint key v1"))
		return key, hmacOf(key, []byte("jobboard idempotency fingerprint key id"))[:8]
	}
	fpKey, id := derive(k1)
	if !bytes.Equal(stored[1:9], id) || !bytes.Equal(stored[9:], hmacOf(fpKey, request)) {
		t.Fatalf("stored fingerprint %x is not HMAC-SHA256 under the key derived from the server key", stored)
	}
	otherKey, _ := derive(k2)
	if bytes.Equal(stored[9:], hmacOf(otherKey, request)) {
		t.Fatal("another server key makes the same fingerprint")
	}

	// Rotated once: the retry is recognised with the previous key.
	keys.rotate(k2)
	retry := a.do("POST", "/v1/companies", raw(body), as(employer), withKey(key))
	wantReplay(t, first, retry)
	wantProblem(t, a.do("POST", "/v1/companies", raw(`{"name":"Another"}`), as(employer), withKey(key)),
		http.StatusUnprocessableEntity, "idempotency-key-reused")
	// New keyed requests are fingerprinted with the new key, and replayed.
	key2 := newKey()
	second := a.do("POST", "/v1/companies", raw(`{"name":"After the rotation"}`), as(employer), withKey(key2))
	want(t, second, http.StatusCreated)
	if err := a.db.Pool.QueryRow(context.Background(), "SELECT fingerprint FROM idempotency_keys WHERE key = $1", key2).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if _, id2 := derive(k2); !bytes.Equal(stored[1:9], id2) {
		t.Fatalf("a request after the rotation was fingerprinted with key id %x, want the new key's %x", stored[1:9], id2)
	}
	wantReplay(t, second, a.do("POST", "/v1/companies", raw(`{"name":"After the rotation"}`), as(employer), withKey(key2)))

	// Rotated twice: the first key is gone, so its answer cannot be
	// checked against a retry; the retry is refused and runs nothing.
	keys.rotate(k3)
	relogin := a.do("POST", "/v1/auth/login", map[string]any{"email": employer.Email, "password": "correct horse battery"})
	want(t, relogin, http.StatusOK)
	var session struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(relogin.Body, &session); err != nil {
		t.Fatal(err)
	}
	before := a.counts()
	wantProblem(t, a.do("POST", "/v1/companies", raw(body), bearer(session.Token), withKey(key)),
		http.StatusUnprocessableEntity, "idempotency-key-reused")
	if after := a.counts(); !mapsEqual(before, after) {
		t.Fatalf("a refused retry wrote: %v → %v", before, after)
	}
}
