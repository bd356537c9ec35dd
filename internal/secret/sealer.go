package secret

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// The environment variables of the webhook sealing key.
const (
	// EnvWebhookSealingKey is the key itself, for local runs: at least
	// MinSealingKeyLen bytes of text.
	EnvWebhookSealingKey = "WEBHOOK_SEALING_KEY"
	// EnvWebhookSealingKeyARN names a secret whose string is the key.
	EnvWebhookSealingKeyARN = "WEBHOOK_SEALING_KEY_SECRET_ARN"
)

// MinSealingKeyLen is the shortest sealing key accepted, in bytes of its
// text: template.yaml generates 64 random letters and digits.
const MinSealingKeyLen = 32

// ErrUnsealable is matched by every Open error: the sealed bytes were
// changed, belong to another context, or were sealed under a key the
// Sealer does not have.
var ErrUnsealable = errors.New("sealed secret cannot be opened")

// sealVersion is the first byte of what Seal returns.
const sealVersion = 1

// keyIDLen is how many bytes of a key's fingerprint a sealed secret names
// its key by.
const keyIDLen = 8

// Sealer protects webhook signing secrets at rest with AES-256-GCM: the
// database stores only what Seal returns, and the key lives in Secrets
// Manager (or the environment), not in the database. A sealed secret names
// its key by fingerprint, so that after the key is rotated the previous
// one still opens what it sealed. It implements jobboard.SecretSealer and
// is safe for concurrent use.
//
// Sealed form: version (1) ‖ key id (8) ‖ nonce (12) ‖ ciphertext ‖ tag,
// with the context as additional data.
type Sealer struct {
	current sealingKey
	// previous opens what the key before the last rotation sealed.
	previous *sealingKey
}

type sealingKey struct {
	id   []byte
	aead cipher.AEAD
}

// NewSealer returns a sealer whose key is derived from current; previous,
// when not nil, opens secrets sealed before a rotation. Errors: a key
// shorter than MinSealingKeyLen.
func NewSealer(current, previous []byte) (*Sealer, error) {
	cur, err := newSealingKey(current)
	if err != nil {
		return nil, err
	}
	s := &Sealer{current: cur}
	if previous != nil {
		prev, err := newSealingKey(previous)
		if err != nil {
			return nil, fmt.Errorf("previous key: %w", err)
		}
		s.previous = &prev
	}
	return s, nil
}

// newSealingKey derives the AES-256 key from the key's text with HKDF
// (SHA-256), so that any text of enough entropy serves.
func newSealingKey(material []byte) (sealingKey, error) {
	if len(material) < MinSealingKeyLen {
		return sealingKey{}, fmt.Errorf("webhook sealing key of %d bytes; at least %d are required: %w",
			len(material), MinSealingKeyLen, ErrMalformed)
	}
	key, err := hkdf.Key(sha256.New, material, nil, "jobboard webhook signing secrets", 32)
	if err != nil {
		return sealingKey{}, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return sealingKey{}, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return sealingKey{}, err
	}
	fp := sha256.Sum256(append([]byte("jobboard sealing key id\x00"), key...))
	return sealingKey{id: fp[:keyIDLen], aead: aead}, nil
}

// Seal encrypts secret under the current key, bound to context. It never
// fails (the error is there for jobboard.SecretSealer).
func (s *Sealer) Seal(secret []byte, context string) ([]byte, error) {
	k := s.current
	out := make([]byte, 0, 1+keyIDLen+k.aead.NonceSize()+len(secret)+k.aead.Overhead())
	out = append(out, sealVersion)
	out = append(out, k.id...)
	nonce := make([]byte, k.aead.NonceSize())
	_, _ = rand.Read(nonce) // never fails (crypto/rand panics on a broken source)
	out = append(out, nonce...)
	return k.aead.Seal(out, nonce, secret, []byte(context)), nil
}

// Open decrypts what Seal returned, under the key it names. Errors:
// ErrUnsealable.
func (s *Sealer) Open(sealed []byte, context string) ([]byte, error) {
	if len(sealed) < 1+keyIDLen || sealed[0] != sealVersion {
		return nil, fmt.Errorf("%w: not a sealed secret", ErrUnsealable)
	}
	id := sealed[1 : 1+keyIDLen]
	var k *sealingKey
	switch {
	case string(id) == string(s.current.id):
		k = &s.current
	case s.previous != nil && string(id) == string(s.previous.id):
		k = s.previous
	default:
		return nil, fmt.Errorf("%w: sealed under a key this function does not have", ErrUnsealable)
	}
	rest := sealed[1+keyIDLen:]
	if len(rest) < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, fmt.Errorf("%w: too short", ErrUnsealable)
	}
	nonce, ct := rest[:k.aead.NonceSize()], rest[k.aead.NonceSize():]
	plain, err := k.aead.Open(nil, nonce, ct, []byte(context))
	if err != nil {
		return nil, fmt.Errorf("%w: changed, or sealed for another place", ErrUnsealable)
	}
	return plain, nil
}

// WebhookSealer returns the sealer of webhook signing secrets under the key
// k names (see LoadWebhookSealingKey): its value (WEBHOOK_SEALING_KEY), or
// the AWSCURRENT version of its secret (WEBHOOK_SEALING_KEY_SECRET_ARN)
// with its AWSPREVIOUS version for opening (both
// looked up once, here: a rotation of the key reaches a sandbox at its next
// cold start). Errors wrap ErrNotConfigured when neither is set,
// ErrMalformed for a short key, or the Secrets Manager call's error.
func WebhookSealer(ctx context.Context, k Key, newClient func() (Getter, error)) (*Sealer, error) {
	if k.Value != "" {
		return NewSealer([]byte(k.Value), nil)
	}
	arn := k.ARN
	if arn == "" {
		return nil, fmt.Errorf("webhook sealing key: set %s or %s: %w", EnvWebhookSealingKey, EnvWebhookSealingKeyARN, ErrNotConfigured)
	}
	cur, err := fetch(ctx, newClient, arn, stageCurrent)
	if err != nil {
		return nil, err
	}
	prev, err := fetch(ctx, newClient, arn, stagePrevious)
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
		return NewSealer(cur.value, nil)
	case err != nil:
		return nil, err
	case prev.id == cur.id:
		return NewSealer(cur.value, nil)
	}
	return NewSealer(cur.value, prev.value)
}
