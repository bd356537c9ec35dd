package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

// DefaultTokenTTL is how long a bearer token is valid unless Config says
// otherwise. Short, since tokens cannot be revoked.
const DefaultTokenTTL = time.Hour

// Token claims this API sets and requires.
const (
	issuerClaim    = "jobboard"
	audienceClaim  = "jobboard-api"
	tokenAlgorithm = "HS256"
)

// claims are the JWT claims: sub is the user id, role the user's role.
type claims struct {
	Role jobboard.Role `json:"role"`
	jwt.RegisteredClaims
}

// tokenIssuer issues and verifies bearer tokens.
type tokenIssuer struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// errNoTokenKey: the server was configured without a signing key.
var errNoTokenKey = errors.New("no token signing key configured")

// issue returns a signed token for u and its expiry time.
func (t tokenIssuer) issue(u jobboard.User) (string, time.Time, error) {
	if len(t.key) == 0 {
		return "", time.Time{}, errNoTokenKey
	}
	now := t.now()
	exp := now.Add(t.ttl)
	c := claims{
		Role: u.Role,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuerClaim,
			Audience:  jwt.ClaimStrings{audienceClaim},
			Subject:   strconv.FormatInt(u.ID, 10),
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
	}
	signed, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(t.key)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token for user %d: %w", u.ID, err)
	}
	return signed, exp, nil
}

// tokenError is a bearer token that was presented but is not valid. It
// matches jobboard.ErrUnauthenticated; the 401 then says error="invalid_token".
type tokenError struct{ cause error }

func (e *tokenError) Error() string        { return "invalid bearer token: " + e.cause.Error() }
func (e *tokenError) Unwrap() error        { return e.cause }
func (e *tokenError) Is(target error) bool { return target == jobboard.ErrUnauthenticated }

// verify checks a token's signature (HS256 only), issuer, audience, expiry
// and claims, and returns the actor it names. Errors: *tokenError.
func (t tokenIssuer) verify(token string) (jobboard.Actor, error) {
	if len(t.key) == 0 {
		return jobboard.Actor{}, &tokenError{errNoTokenKey}
	}
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{tokenAlgorithm}),
		jwt.WithIssuer(issuerClaim),
		jwt.WithAudience(audienceClaim),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(t.now),
	)
	var c claims
	if _, err := parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return t.key, nil }); err != nil {
		return jobboard.Actor{}, &tokenError{err}
	}
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || id <= 0 {
		return jobboard.Actor{}, &tokenError{fmt.Errorf("bad subject %q", c.Subject)}
	}
	if !c.Role.Valid() {
		return jobboard.Actor{}, &tokenError{fmt.Errorf("bad role %q", c.Role)}
	}
	return jobboard.Actor{UserID: id, Role: c.Role}, nil
}

// actor returns the signed-in actor of r. Errors: jobboard.ErrUnauthenticated
// when there is no Authorization header, *tokenError when it is not a valid
// bearer token.
func (s *server) actor(r *http.Request) (jobboard.Actor, error) {
	a, ok, err := s.optionalActor(r)
	if err != nil {
		return jobboard.Actor{}, err
	}
	if !ok {
		return jobboard.Actor{}, jobboard.ErrUnauthenticated
	}
	return a, nil
}

// optionalActor is actor for endpoints open to anonymous callers: no
// Authorization header means anonymous (false), but a header with a bad token
// is still an error, so that a client with an expired token learns of it.
// A header that is not text (invalid UTF-8, control characters) is a
// *requestError.
func (s *server) optionalActor(r *http.Request) (jobboard.Actor, bool, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return jobboard.Actor{}, false, nil
	}
	if p := headerProblem(h); p != "" {
		return jobboard.Actor{}, false, badRequest("Authorization", p)
	}
	scheme, token, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return jobboard.Actor{}, false, &tokenError{errors.New("authorization is not a bearer token")}
	}
	a, err := s.tokens.verify(strings.TrimSpace(token))
	if err != nil {
		return jobboard.Actor{}, false, err
	}
	return a, true, nil
}

// requireRole returns the signed-in actor when it has the role.
// Errors: as actor, and jobboard.ErrForbidden for another role.
func (s *server) requireRole(r *http.Request, role jobboard.Role) (jobboard.Actor, error) {
	a, err := s.actor(r)
	if err != nil {
		return a, err
	}
	if a.Role != role {
		return a, fmt.Errorf("%s endpoint called by a %s: %w", role, a.Role, jobboard.ErrForbidden)
	}
	return a, nil
}
