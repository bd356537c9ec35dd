package secret_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/jobboard/jobboard/internal/secret"
)

func TestJWTKeySourceFromTheEnvironment(t *testing.T) {
	t.Parallel()
	src, err := secret.NewJWTKeySource(secret.LoadJWTKey(env(map[string]string{secret.EnvJWTSecret: "dev", secret.EnvJWTSecretARN: jwtARN})), noClient(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, refresh := range []bool{false, true} {
		keys, err := src.Keys(context.Background(), refresh)
		if err != nil || string(keys.Current) != "dev" || keys.Previous != nil {
			t.Errorf("Keys(refresh=%v) = %+v, %v; want the environment's key alone", refresh, keys, err)
		}
	}
	if _, err := secret.NewJWTKeySource(secret.LoadJWTKey(env(nil)), noClient(t)); !errors.Is(err, secret.ErrNotConfigured) {
		t.Errorf("nothing set: %v; want ErrNotConfigured", err)
	}
}

// The source reads AWSCURRENT and AWSPREVIOUS, keeps them MaxAge, and looks
// them up again on a refresh no more than once per MinInterval.
func TestJWTKeySourceFollowsARotation(t *testing.T) {
	t.Parallel()
	one, two := strings.Repeat("1", 64), strings.Repeat("2", 64)
	fake := &fakeSecretsManager{strings: map[string]string{jwtARN: one}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	calls := 0
	src, err := secret.NewJWTKeySource(secret.LoadJWTKey(env(map[string]string{secret.EnvJWTSecretARN: jwtARN})), newClientFor(srv, &calls))
	if err != nil {
		t.Fatal(err)
	}
	clk := &fakeClock{now: time.Now()}
	src.Now = clk.Now
	ctx := context.Background()

	// Never rotated: Secrets Manager has no AWSPREVIOUS (ResourceNotFound).
	keys, err := src.Keys(ctx, false)
	if err != nil || string(keys.Current) != one || keys.Previous != nil || keys.CurrentSince.IsZero() {
		t.Fatalf("Keys = %+v, %v; want the current key only, with its creation date", keys, err)
	}
	fake.rotate(jwtARN, two)
	if keys, _ := src.Keys(ctx, false); string(keys.Current) != one {
		t.Fatal("looked up again before MaxAge without a refresh")
	}
	if keys, _ := src.Keys(ctx, true); string(keys.Current) != one {
		t.Fatal("a refresh right after a lookup looked up again (MinInterval)")
	}
	clk.advance(secret.DefaultMinInterval)
	keys, err = src.Keys(ctx, true)
	if err != nil || string(keys.Current) != two || string(keys.Previous) != one {
		t.Fatalf("after the rotation: %+v, %v; want current %q, previous %q", keys, err, two, one)
	}
	want := []string{jwtARN, jwtARN + ":AWSPREVIOUS", jwtARN, jwtARN + ":AWSPREVIOUS"}
	if got := fake.asked(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("asked %v; want %v", got, want)
	}

	// Secrets Manager unreachable: the keys looked up last stay in use.
	srv.Close()
	clk.advance(secret.DefaultMaxAge)
	keys, err = src.Keys(ctx, false)
	if err != nil || string(keys.Current) != two {
		t.Errorf("with Secrets Manager down: %+v, %v; want the last keys", keys, err)
	}
}

func TestJWTKeySourceFailures(t *testing.T) {
	t.Parallel()
	fake := &fakeSecretsManager{
		strings:  map[string]string{"short": "only-31-bytes-long-key-is-short"},
		binaries: map[string][]byte{"binary": []byte(strings.Repeat("\x01", 40))},
	}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	keysOf := func(arn string) (secret.JWTKeys, error) {
		calls := 0
		src, err := secret.NewJWTKeySource(secret.LoadJWTKey(env(map[string]string{secret.EnvJWTSecretARN: arn})), newClientFor(srv, &calls))
		if err != nil {
			t.Fatal(err)
		}
		return src.Keys(context.Background(), false)
	}
	if keys, err := keysOf("binary"); err != nil || string(keys.Current) != strings.Repeat("\x01", 40) {
		t.Errorf("binary secret: %+v, %v; want its bytes", keys, err)
	}
	keys, err := keysOf("short")
	if keys.Current != nil || !errors.Is(err, secret.ErrMalformed) || strings.Contains(err.Error(), "only-31") {
		t.Errorf("short key: %+v, %v; want ErrMalformed without the value", keys, err)
	}
	_, err = keysOf("missing")
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ResourceNotFoundException" {
		t.Errorf("unknown secret: %v; want ResourceNotFoundException", err)
	}
}
