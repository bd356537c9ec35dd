package secret_test

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/jobboard/jobboard/internal/secret"
)

const webhookKeyARN = "arn:aws:secretsmanager:us-east-1:111111111111:secret:webhook-key-AbCdEf"

func TestSealerRoundTrip(t *testing.T) {
	t.Parallel()
	s, err := secret.NewSealer([]byte(strings.Repeat("k", 40)), nil)
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("whsec_c2VjcmV0IHNlY3JldCBzZWNyZXQgc2VjcmV0IQ==")
	a, _ := s.Seal(plain, "company 1")
	b, _ := s.Seal(plain, "company 1")
	if bytes.Equal(a, b) || bytes.Contains(a, plain) || bytes.Contains(a, []byte("c2VjcmV0")) {
		t.Fatalf("sealed forms reveal or repeat the secret: %x %x", a, b)
	}
	got, err := s.Open(a, "company 1")
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	// Another context, a flipped bit, a truncation, garbage: refused.
	flipped := append([]byte(nil), a...)
	flipped[len(flipped)-1] ^= 1
	for name, c := range map[string]struct {
		sealed []byte
		ctx    string
	}{
		"other company": {a, "company 2"}, "flipped": {flipped, "company 1"},
		"truncated": {a[:20], "company 1"}, "empty": {nil, "company 1"}, "plain": {plain, "company 1"},
	} {
		if _, err := s.Open(c.sealed, c.ctx); !errors.Is(err, secret.ErrUnsealable) {
			t.Errorf("%s: %v, want ErrUnsealable", name, err)
		}
	}
	if _, err := secret.NewSealer([]byte("short"), nil); !errors.Is(err, secret.ErrMalformed) {
		t.Errorf("short key: %v", err)
	}
}

// After the key is rotated, the previous key opens what it sealed; a
// sealer without it cannot.
func TestSealerKeyRotation(t *testing.T) {
	t.Parallel()
	one, two := []byte(strings.Repeat("1", 64)), []byte(strings.Repeat("2", 64))
	old, _ := secret.NewSealer(one, nil)
	sealedOld, _ := old.Seal([]byte("s"), "c")
	rotated, _ := secret.NewSealer(two, one)
	if got, err := rotated.Open(sealedOld, "c"); err != nil || string(got) != "s" {
		t.Fatalf("previous key: %q, %v", got, err)
	}
	sealedNew, _ := rotated.Seal([]byte("t"), "c")
	if _, err := old.Open(sealedNew, "c"); !errors.Is(err, secret.ErrUnsealable) {
		t.Errorf("the old sealer opened a secret sealed with the new key: %v", err)
	}
	fresh, _ := secret.NewSealer(two, nil)
	if _, err := fresh.Open(sealedOld, "c"); !errors.Is(err, secret.ErrUnsealable) {
		t.Errorf("opened without the previous key: %v", err)
	}
}

func TestWebhookSealerSources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if _, err := secret.WebhookSealer(ctx, secret.LoadWebhookSealingKey(env(nil)), noClient(t)); !errors.Is(err, secret.ErrNotConfigured) {
		t.Errorf("nothing set: %v", err)
	}
	local, err := secret.WebhookSealer(ctx, secret.LoadWebhookSealingKey(env(map[string]string{secret.EnvWebhookSealingKey: strings.Repeat("x", 32)})), noClient(t))
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := local.Seal([]byte("s"), "c")

	one, two := strings.Repeat("1", 64), strings.Repeat("2", 64)
	fake := &fakeSecretsManager{strings: map[string]string{webhookKeyARN: one}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	calls := 0
	fromARN := env(map[string]string{secret.EnvWebhookSealingKeyARN: webhookKeyARN})
	first, err := secret.WebhookSealer(ctx, secret.LoadWebhookSealingKey(fromARN), newClientFor(srv, &calls))
	if err != nil {
		t.Fatalf("never rotated: %v", err)
	}
	sealedOne, _ := first.Seal([]byte("s"), "c")
	fake.rotate(webhookKeyARN, two)
	second, err := secret.WebhookSealer(ctx, secret.LoadWebhookSealingKey(fromARN), newClientFor(srv, &calls))
	if err != nil {
		t.Fatalf("rotated: %v", err)
	}
	if got, err := second.Open(sealedOne, "c"); err != nil || string(got) != "s" {
		t.Errorf("after the rotation: %q, %v", got, err)
	}
	if _, err := second.Open(sealed, "c"); err == nil {
		t.Error("a sealer of another key opened the local one's secret")
	}
}
