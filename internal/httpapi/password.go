package httpapi

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// PasswordParams are the argon2id cost parameters of new password hashes.
// Stored hashes carry their own parameters, so changing these affects only
// hashes made afterwards.
type PasswordParams struct {
	MemoryKiB uint32
	Time      uint32
	Threads   uint8
}

// DefaultPasswordParams follow OWASP's argon2id recommendation (19 MiB,
// 2 passes, 1 thread): about 20 ms per hash on one core.
var DefaultPasswordParams = PasswordParams{MemoryKiB: 19456, Time: 2, Threads: 1}

// Argon2id output sizes, in bytes.
const (
	saltLen = 16
	keyLen  = 32
)

// Bounds accepted when reading a stored hash, so that a corrupt or planted
// row cannot make one login allocate more than 64 MiB or run for seconds,
// or panic inside argon2. They are well above DefaultPasswordParams (19 MiB,
// 2 passes, 1 lane), leaving room to raise the cost of new hashes.
const (
	maxMemoryKiB = 64 << 10 // 64 MiB
	maxTime      = 10
	maxThreads   = 4
)

var errMalformedHash = errors.New("malformed argon2id hash")

// passwordHasher hashes and verifies passwords.
type passwordHasher struct {
	params PasswordParams
}

func newPasswordHasher(p PasswordParams) passwordHasher {
	return passwordHasher{params: p}
}

// hash returns the PHC string of password:
// $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash> (unpadded standard base64).
func (h passwordHasher) hash(password string) string {
	salt := make([]byte, saltLen)
	_, _ = rand.Read(salt) // crypto/rand.Read never fails
	key := argon2.IDKey([]byte(password), salt, h.params.Time, h.params.MemoryKiB, h.params.Threads, keyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version,
		h.params.MemoryKiB, h.params.Time, h.params.Threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// verify reports whether password matches the PHC string encoded, comparing
// in constant time. Errors: a malformed or out-of-bounds hash.
func (h passwordHasher) verify(password, encoded string) (bool, error) {
	p, salt, want, err := parseHash(encoded)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(password), salt, p.Time, p.MemoryKiB, p.Threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// burn spends the time of one verification, for unknown emails, so that the
// answer takes as long as for a wrong password. It derives a key with the
// current parameters rather than verifying a stored dummy hash, so that
// nothing is hashed at start-up (a Lambda cold start would pay for it).
func (h passwordHasher) burn(password string) {
	var salt [saltLen]byte
	_ = argon2.IDKey([]byte(password), salt[:], h.params.Time, h.params.MemoryKiB, h.params.Threads, keyLen)
}

func parseHash(encoded string) (PasswordParams, []byte, []byte, error) {
	var p PasswordParams
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, nil, nil, errMalformedHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return p, nil, nil, fmt.Errorf("%w: version %q", errMalformedHash, parts[2])
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.MemoryKiB, &p.Time, &p.Threads); err != nil {
		return p, nil, nil, fmt.Errorf("%w: parameters %q", errMalformedHash, parts[3])
	}
	if p.Time < 1 || p.Time > maxTime || p.Threads < 1 || p.Threads > maxThreads || p.MemoryKiB < 8*uint32(p.Threads) || p.MemoryKiB > maxMemoryKiB {
		return p, nil, nil, fmt.Errorf("%w: parameters out of bounds %q", errMalformedHash, parts[3])
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < 8 {
		return p, nil, nil, fmt.Errorf("%w: salt", errMalformedHash)
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < 16 || len(key) > 64 {
		return p, nil, nil, fmt.Errorf("%w: key", errMalformedHash)
	}
	return p, salt, key, nil
}
