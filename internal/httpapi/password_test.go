package httpapi

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestPasswordHashes(t *testing.T) {
	t.Parallel()
	h := newPasswordHasher(PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1})
	encoded := h.hash("correct horse battery")
	phc := regexp.MustCompile(`^\$argon2id\$v=19\$m=64,t=1,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)
	if !phc.MatchString(encoded) {
		t.Fatalf("hash %q is not a PHC argon2id string", encoded)
	}
	if again := h.hash("correct horse battery"); again == encoded {
		t.Fatal("two hashes of one password are equal: the salt is not random")
	}
	for _, tt := range []struct {
		password string
		want     bool
	}{{"correct horse battery", true}, {"correct horse batterY", false}, {"", false}} {
		ok, err := h.verify(tt.password, encoded)
		if err != nil || ok != tt.want {
			t.Fatalf("verify(%q) = %v, %v; want %v", tt.password, ok, err, tt.want)
		}
	}

	// A hash keeps its own parameters: one made with the production
	// defaults verifies under a hasher configured otherwise.
	strong := newPasswordHasher(DefaultPasswordParams).hash("pw")
	if !strings.Contains(strong, "$m=19456,t=2,p=1$") {
		t.Fatalf("default parameters: %q", strong)
	}
	if ok, err := h.verify("pw", strong); err != nil || !ok {
		t.Fatalf("verify under other parameters: %v, %v", ok, err)
	}
}

func TestPasswordHashesRefuseMalformed(t *testing.T) {
	t.Parallel()
	h := newPasswordHasher(PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1})
	good := strings.Split(h.hash("pw"), "$")
	with := func(i int, v string) string {
		parts := append([]string(nil), good...)
		parts[i] = v
		return strings.Join(parts, "$")
	}
	for _, encoded := range []string{
		"",
		"plain-text-password",
		"$argon2i$" + strings.Join(good[2:], "$"),
		with(2, "v=16"),
		with(3, "m=64,t=0,p=1"),
		with(3, "m=64,t=1,p=0"),
		with(3, "m=4,t=1,p=1"),
		with(3, "m=99999999,t=1,p=1"),
		with(3, "garbage"),
		with(4, "!!"),
		with(5, "AAAA"),
		h.hash("pw") + "$extra",
	} {
		if ok, err := h.verify("pw", encoded); ok || !errors.Is(err, errMalformedHash) {
			t.Errorf("verify against %q = %v, %v; want errMalformedHash", encoded, ok, err)
		}
	}
}

// Stored hashes may not ask for more than the API would ever use: at most
// 64 MiB, 10 passes and 4 lanes, so that one bad row cannot make a login
// allocate a gigabyte or run for seconds.
func TestPasswordHashParameterBounds(t *testing.T) {
	t.Parallel()
	h := newPasswordHasher(PasswordParams{MemoryKiB: 64, Time: 1, Threads: 1})
	good := strings.Split(h.hash("pw"), "$")
	with := func(params string) string {
		parts := append([]string(nil), good...)
		parts[3] = params
		return strings.Join(parts, "$")
	}
	for _, params := range []string{"m=65537,t=1,p=1", "m=1048576,t=1,p=1", "m=64,t=11,p=1", "m=64,t=100,p=1", "m=64,t=1,p=5"} {
		if _, _, _, err := parseHash(with(params)); !errors.Is(err, errMalformedHash) {
			t.Errorf("parseHash with %s: %v; want errMalformedHash", params, err)
		}
	}
	for _, params := range []string{"m=65536,t=10,p=4", "m=19456,t=2,p=1", "m=32,t=1,p=4"} {
		if _, _, _, err := parseHash(with(params)); err != nil {
			t.Errorf("parseHash with %s: %v; want it accepted", params, err)
		}
	}
}
