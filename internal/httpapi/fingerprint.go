package httpapi

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strings"
	"sync"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// A request fingerprint, as stored with the answer to an Idempotency-Key
// request, is
//
//	version (1 byte) ‖ key id (8 bytes) ‖ HMAC-SHA256(key, request) (32 bytes)
//
// The key is derived from the token signing key (the server secret: JWT_SECRET,
// or the Secrets Manager secret JWT_SECRET_ARN names) and rotates with it.
// So a database read alone (a backup, a snapshot, an SQL bug) can neither
// recompute a fingerprint nor test a guess of a request body against one:
// the unkeyed SHA-256 stored before let anyone with the table check guesses
// at SHA-256 speed. The key id names which key made it, so that a retry
// after a rotation is checked with the key its first request was.
const (
	fingerprintVersion  = 1
	fingerprintKeyIDLen = 8
	fingerprintLen      = 1 + fingerprintKeyIDLen + sha256.Size
	// The labels under which the fingerprint key and its id are derived:
	// HMAC-SHA256(token key, label) and HMAC-SHA256(fingerprint key,
	// label). Neither is a value any token shows: a token's kid is the
	// HMAC of the token key under its own label.
	fingerprintKeyLabel   = "jobboard idempotency fingerprint key v1"
	fingerprintKeyIDLabel = "jobboard idempotency fingerprint key id"
)

// legacyFingerprintLen is the length of the fingerprints stored before they
// were keyed: SHA-256 of the request. They are still recognised, so that a
// retry of a request answered just before the upgrade is replayed; the
// last of them expires jobboard.IdempotencyKeyTTL after the upgrade.
const legacyFingerprintLen = sha256.Size

// errUnknownFingerprintKey: a stored fingerprint names a key that is
// neither the current nor the previous one (rotated twice within a key's
// lifetime), so whether a retry repeats its request cannot be told.
var errUnknownFingerprintKey = errors.New("stored fingerprint made with a retired key")

// fingerprinter makes and checks request fingerprints. It is safe for
// concurrent use.
type fingerprinter struct {
	keys TokenKeySource

	mu      sync.Mutex
	derived [2]*fingerprintKey // the last two token keys seen, derived
}

// fingerprintKey is the key derived from one token key.
type fingerprintKey struct {
	tokenKey []byte
	key      []byte
	id       [fingerprintKeyIDLen]byte
}

func newFingerprinter(keys TokenKeySource) *fingerprinter {
	return &fingerprinter{keys: keys}
}

// derive returns the fingerprint key of tokenKey, from the cache of the last
// two when it is there: a request needs one HMAC, not three.
func (f *fingerprinter) derive(tokenKey []byte) *fingerprintKey {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.derived {
		if d != nil && bytes.Equal(d.tokenKey, tokenKey) {
			return d
		}
	}
	d := &fingerprintKey{tokenKey: bytes.Clone(tokenKey), key: mac(tokenKey, fingerprintKeyLabel)}
	copy(d.id[:], mac(d.key, fingerprintKeyIDLabel))
	f.derived[0], f.derived[1] = d, f.derived[0]
	return d
}

func mac(key []byte, label string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// writeRequest writes what a retry must repeat into h: the prefix (the
// scope, whose key it is), method, path, query, If-Match (a conditional
// change differs from an unconditional one) and the body, byte for byte,
// each part but the body ended by a NUL.
func writeRequest(h hash.Hash, r *http.Request, body []byte, prefix ...string) {
	for _, part := range append(prefix, r.Method, r.URL.Path, r.URL.RawQuery, strings.Join(r.Header.Values("If-Match"), ",")) {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(body)
}

// sum returns the fingerprint of a request under the current key. Errors:
// those of the key source, errNoTokenKey.
func (f *fingerprinter) sum(ctx context.Context, scope string, r *http.Request, body []byte) ([]byte, error) {
	keys, err := f.keys(ctx, false)
	if err != nil {
		return nil, fmt.Errorf("fingerprint key: %w", err)
	}
	if len(keys.Current) == 0 {
		return nil, errNoTokenKey
	}
	return f.sumWith(f.derive(keys.Current), scope, r, body), nil
}

func (f *fingerprinter) sumWith(k *fingerprintKey, scope string, r *http.Request, body []byte) []byte {
	m := hmac.New(sha256.New, k.key)
	writeRequest(m, r, body, scope)
	out := make([]byte, 0, fingerprintLen)
	out = append(out, fingerprintVersion)
	out = append(out, k.id[:]...)
	return m.Sum(out)
}

// matches reports whether stored, a fingerprint kept with an answer, is
// this request's: recomputed with the key stored names, the current or
// (through a rotation) the previous one, and compared in constant time.
// Errors: errUnknownFingerprintKey, those of the key source.
func (f *fingerprinter) matches(ctx context.Context, stored []byte, scope string, r *http.Request, body []byte) (bool, error) {
	if len(stored) == legacyFingerprintLen {
		return hmac.Equal(stored, legacyFingerprint(r, body)), nil
	}
	if len(stored) != fingerprintLen || stored[0] != fingerprintVersion {
		return false, fmt.Errorf("stored fingerprint of %d bytes: %w", len(stored), errUnknownFingerprintKey)
	}
	keys, err := f.keys(ctx, false)
	if err != nil {
		return false, fmt.Errorf("fingerprint key: %w", err)
	}
	for _, tokenKey := range [][]byte{keys.Current, keys.Previous} {
		if len(tokenKey) == 0 {
			continue
		}
		if k := f.derive(tokenKey); bytes.Equal(k.id[:], stored[1:1+fingerprintKeyIDLen]) {
			return hmac.Equal(stored, f.sumWith(k, scope, r, body)), nil
		}
	}
	return false, errUnknownFingerprintKey
}

// legacyFingerprint is the unkeyed fingerprint of the stored answers that
// predate keyed ones: SHA-256 of method, path, query and If-Match, each
// ended by a NUL, and the body.
func legacyFingerprint(r *http.Request, body []byte) []byte {
	h := sha256.New()
	writeRequest(h, r, body)
	return h.Sum(nil)
}

// addressTagKeyLabel is the label under which the key of addressTag is
// derived from the token key: HMAC-SHA256(token key, label).
const addressTagKeyLabel = "jobboard address log tag key v1"

// addressTag names an email address in a log line, so that the lines of
// one address can be found together, without the line telling the address
// to whoever reads the logs: the first 8 bytes of an HMAC-SHA256 of the
// normalised address, in hex, under a key derived from the token key. An
// unkeyed hash would not do: a dictionary of addresses reverses it. The
// tag changes when the token key rotates. "" when the key cannot be had
// (the line is still written).
func (s *server) addressTag(ctx context.Context, email string) string {
	keys, err := s.tokens.keys(ctx, false)
	if err != nil || len(keys.Current) == 0 {
		return ""
	}
	m := hmac.New(sha256.New, mac(keys.Current, addressTagKeyLabel))
	m.Write([]byte(jobboard.NormalizeEmail(email)))
	return hex.EncodeToString(m.Sum(nil)[:8])
}
