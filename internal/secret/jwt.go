package secret

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
)

// JWTKeys are the token signing keys at one moment.
type JWTKeys struct {
	// Current signs new tokens: the secret's AWSCURRENT version.
	Current []byte
	// CurrentSince is when Current became a version of the secret (its
	// CreatedDate); zero for a key from the environment.
	CurrentSince time.Time
	// Previous is the AWSPREVIOUS version, the key before the last
	// rotation, or nil when there is none. It still verifies tokens signed
	// before the rotation, during a window the API decides.
	Previous []byte
}

// JWTKeySource gives the JWT signing keys: JWT_SECRET when it is set (one
// key, never looked up again), else the AWSCURRENT and AWSPREVIOUS versions
// of the secret named by JWT_SECRET_ARN, looked up again after MaxAge and
// when a caller asks for a refresh (a token names a key it does not know).
// It is safe for concurrent use.
type JWTKeySource struct {
	// MaxAge, MinInterval and Now are DefaultMaxAge, DefaultMinInterval
	// and time.Now; tests change them before the first Keys call.
	MaxAge      time.Duration
	MinInterval time.Duration
	Now         func() time.Time

	arn       string
	newClient func() (Getter, error)

	mu      sync.Mutex
	keys    JWTKeys
	fetched time.Time
}

// NewJWTKeySource returns the source of the key k names (see LoadJWTKey):
// its value, or its secret. It fetches nothing: the first Keys call does.
// newClient is called only when a secret must be fetched. Errors wrap
// ErrNotConfigured when k names none.
func NewJWTKeySource(k Key, newClient func() (Getter, error)) (*JWTKeySource, error) {
	src := &JWTKeySource{MaxAge: DefaultMaxAge, MinInterval: DefaultMinInterval, Now: time.Now, newClient: newClient}
	if k.Value != "" {
		src.keys = JWTKeys{Current: []byte(k.Value)}
		return src, nil
	}
	src.arn = k.ARN
	if src.arn == "" {
		return nil, fmt.Errorf("JWT signing key: set %s or %s: %w", EnvJWTSecret, EnvJWTSecretARN, ErrNotConfigured)
	}
	return src, nil
}

// Keys returns the signing keys: those looked up last, or fresh ones when
// they are older than MaxAge, or when refresh is set and the last lookup is
// at least MinInterval old. When a later lookup fails, the keys looked up
// before are returned. Errors (first lookup only, or every lookup while none
// succeeded): ErrMalformed when a version is shorter than MinJWTKeyLen, or
// the error of newClient or of the Secrets Manager call.
func (s *JWTKeySource) Keys(ctx context.Context, refresh bool) (JWTKeys, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.arn == "" {
		return s.keys, nil
	}
	now := s.Now()
	age := now.Sub(s.fetched)
	if s.keys.Current != nil && age < s.MaxAge && (!refresh || age < s.MinInterval) {
		return s.keys, nil
	}
	s.fetched = now
	keys, err := s.lookup(ctx)
	if err != nil {
		if s.keys.Current != nil {
			return s.keys, nil
		}
		return JWTKeys{}, err
	}
	s.keys = keys
	return keys, nil
}

// lookup fetches AWSCURRENT and AWSPREVIOUS. A secret that was never
// rotated has no AWSPREVIOUS version: Secrets Manager answers
// ResourceNotFoundException, which means "no previous key".
func (s *JWTKeySource) lookup(ctx context.Context) (JWTKeys, error) {
	cur, err := fetch(ctx, s.newClient, s.arn, stageCurrent)
	if err != nil {
		return JWTKeys{}, err
	}
	if len(cur.value) < MinJWTKeyLen {
		return JWTKeys{}, fmt.Errorf("secret %s: JWT key shorter than %d bytes: %w", s.arn, MinJWTKeyLen, ErrMalformed)
	}
	keys := JWTKeys{Current: cur.value, CurrentSince: cur.created}
	prev, err := fetch(ctx, s.newClient, s.arn, stagePrevious)
	var notFound *types.ResourceNotFoundException
	switch {
	case errors.As(err, &notFound):
	case err != nil:
		return JWTKeys{}, err
	case len(prev.value) >= MinJWTKeyLen && prev.id != cur.id:
		keys.Previous = prev.value
	}
	return keys, nil
}
