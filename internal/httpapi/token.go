package httpapi

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
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

// claims are the JWT claims: sub is the user id, role the user's role, and
// pwd_at the account's last password reset when the token was issued.
type claims struct {
	Role jobboard.Role `json:"role"`
	// PasswordChangedAt is jobboard.User.PasswordChangedAt in whole
	// microseconds since the Unix epoch, as the database keeps it; absent
	// (zero) when the password was never reset. An integer, so that it is
	// exact: a JWT NumericDate is a floating-point number of seconds, which
	// loses microseconds.
	PasswordChangedAt int64 `json:"pwd_at,omitempty"`
	jwt.RegisteredClaims
}

// passwordChangedClaim is the pwd_at claim of a password change time.
func passwordChangedClaim(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// passwordChangedAt reads a pwd_at claim back.
func passwordChangedAt(claim int64) time.Time {
	if claim == 0 {
		return time.Time{}
	}
	return time.UnixMicro(claim).UTC()
}

// TokenKeys are the keys that sign and verify bearer tokens at one moment.
// Each token names its key in the JWT header's kid (a MAC of the key under
// a fixed label, so the key itself is not revealed), which lets a rotation
// keep the tokens signed before it valid for a while.
type TokenKeys struct {
	// Current signs new tokens, and verifies them.
	Current []byte
	// Previous, the key before the last rotation, still verifies tokens
	// until PreviousUntil, then no more. Nil: none.
	Previous      []byte
	PreviousUntil time.Time
}

// TokenKeySource returns the token keys. refresh asks for a fresh lookup:
// the server sets it when a token names a key it does not know (a key that
// another instance already rotated to). A source may ignore it, e.g. to
// bound its lookups.
type TokenKeySource func(ctx context.Context, refresh bool) (TokenKeys, error)

// staticKey is the TokenKeySource of a fixed key (Config.TokenKey).
func staticKey(key []byte) TokenKeySource {
	return func(context.Context, bool) (TokenKeys, error) { return TokenKeys{Current: key}, nil }
}

// tokenIssuer issues and verifies bearer tokens.
type tokenIssuer struct {
	keys TokenKeySource
	ttl  time.Duration
	now  func() time.Time
}

// errNoTokenKey: the server was configured without a signing key.
var errNoTokenKey = errors.New("no token signing key configured")

// keyIDLabel is the message whose HMAC under a key is the key's id.
const keyIDLabel = "jobboard token key id"

// keyID names key in a token header without revealing it.
func keyID(key []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(keyIDLabel))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil)[:12])
}

// issue returns a token for u signed with the current key, and its expiry
// time. The token carries u.PasswordChangedAt: a later password reset ends
// it. Errors: the key source's, or errNoTokenKey.
func (t tokenIssuer) issue(ctx context.Context, u jobboard.User) (string, time.Time, error) {
	keys, err := t.keys(ctx, false)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("token keys: %w", err)
	}
	if len(keys.Current) == 0 {
		return "", time.Time{}, errNoTokenKey
	}
	now := t.now()
	exp := now.Add(t.ttl)
	c := claims{
		Role:              u.Role,
		PasswordChangedAt: passwordChangedClaim(u.PasswordChangedAt),
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    issuerClaim,
			Audience:  jwt.ClaimStrings{audienceClaim},
			Subject:   strconv.FormatInt(u.ID, 10),
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, c)
	tok.Header["kid"] = keyID(keys.Current)
	signed, err := tok.SignedString(keys.Current)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign token for user %d: %w", u.ID, err)
	}
	return signed, exp, nil
}

// keySourceError is a failure of the TokenKeySource: the server's fault,
// not the token's.
type keySourceError struct{ err error }

func (e *keySourceError) Error() string { return "token keys: " + e.err.Error() }
func (e *keySourceError) Unwrap() error { return e.err }

// Why a token's key was not found.
var (
	errUnknownKey = errors.New("token signed with an unknown key")
	errRetiredKey = errors.New("token signed with a retired key")
)

// key returns the key that verifies a token whose header names kid: the
// current key, or the previous one until PreviousUntil. A token without kid
// (issued before keys had ids) is verified with the current key. An unknown
// kid makes it ask the source once more with refresh set.
func (t tokenIssuer) key(ctx context.Context, kid string) ([]byte, error) {
	for _, refresh := range []bool{false, true} {
		keys, err := t.keys(ctx, refresh)
		if err != nil {
			return nil, &keySourceError{err}
		}
		if len(keys.Current) == 0 {
			return nil, errNoTokenKey
		}
		switch {
		case kid == "" || kid == keyID(keys.Current):
			return keys.Current, nil
		case len(keys.Previous) > 0 && kid == keyID(keys.Previous):
			if !t.now().Before(keys.PreviousUntil) {
				return nil, errRetiredKey
			}
			return keys.Previous, nil
		}
	}
	return nil, errUnknownKey
}

// tokenError is a bearer token that was presented but is not valid. It
// matches jobboard.ErrUnauthenticated; the 401 then says error="invalid_token".
type tokenError struct{ cause error }

func (e *tokenError) Error() string        { return "invalid bearer token: " + e.cause.Error() }
func (e *tokenError) Unwrap() error        { return e.cause }
func (e *tokenError) Is(target error) bool { return target == jobboard.ErrUnauthenticated }

// verify checks a token's signature (HS256 only, with the key its kid
// names, see key), issuer, audience, expiry and claims, and returns the
// actor it names. Errors: *tokenError, or *keySourceError when the keys
// cannot be had.
func (t tokenIssuer) verify(ctx context.Context, token string) (jobboard.Actor, error) {
	parser := jwt.NewParser(
		jwt.WithValidMethods([]string{tokenAlgorithm}),
		jwt.WithIssuer(issuerClaim),
		jwt.WithAudience(audienceClaim),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithTimeFunc(t.now),
	)
	var c claims
	keyfunc := func(tok *jwt.Token) (any, error) {
		kid, _ := tok.Header["kid"].(string)
		return t.key(ctx, kid)
	}
	if _, err := parser.ParseWithClaims(token, &c, keyfunc); err != nil {
		var sourceErr *keySourceError
		if errors.As(err, &sourceErr) {
			return jobboard.Actor{}, sourceErr
		}
		return jobboard.Actor{}, &tokenError{err}
	}
	id, err := strconv.ParseInt(c.Subject, 10, 64)
	if err != nil || id <= 0 {
		return jobboard.Actor{}, &tokenError{fmt.Errorf("bad subject %q", c.Subject)}
	}
	if !c.Role.Valid() {
		return jobboard.Actor{}, &tokenError{fmt.Errorf("bad role %q", c.Role)}
	}
	return jobboard.Actor{UserID: id, Role: c.Role, PasswordChangedAt: passwordChangedAt(c.PasswordChangedAt)}, nil
}

// access says who may call a route, and so what authenticate checks
// before the route's handler runs. Every route states its access in the
// route table (routes.go): a route that acts for an account is signedIn,
// and its session is checked there, once, for every request, before
// anything else the route does (an idempotent replay included), so that
// no handler can forget it.
type access int

const (
	// public: anyone; the Authorization header is not read (registration,
	// login, the links' tokens, health). Its handler has no actor.
	public access = iota
	// optionalSignIn: anyone, but a request that sends a bearer token has
	// it checked whole, as on a signedIn route (401 when the token or its
	// session is not valid, so that a client with an ended session learns
	// of it), and the handler sees its actor: the public reads, which show
	// a member what the company keeps from others.
	optionalSignIn
	// signedIn: the route acts for an account: a valid bearer token whose
	// session is live is required (401 otherwise).
	signedIn
)

// signedInKey keys the signed-in account of a request in its context.
const signedInKey ctxKey = 1

// signedInAs is what authenticate found: the actor of the token, and the
// account as it is now (read to check the session).
type signedInAs struct {
	actor jobboard.Actor
	user  jobboard.User
}

// authenticate is the sign-in check of the route table: for a route that
// is not public it reads the bearer token, when there is one, checks it
// (signature, expiry, claims), then checks that its session is live: the
// account still exists and its password has not been reset since the
// session was issued (jobboard.User.SessionLive), with a read of the
// account's row. A signedIn route without a token answers 401, and so
// does any route whose token or session is not valid
// (error="invalid_token"). The handler then finds the actor with
// s.actor or s.optionalActor.
func (s *server) authenticate(acc access, h apiFunc) apiFunc {
	if acc == public {
		return h
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		a, found, err := s.bearer(r)
		switch {
		case err != nil:
			return err
		case !found && acc == signedIn:
			return jobboard.ErrUnauthenticated
		case !found:
			return h(w, r)
		}
		u, err := s.Users.UserByID(r.Context(), a.UserID)
		if errors.Is(err, jobboard.ErrNotFound) {
			return &tokenError{fmt.Errorf("the account of user %d no longer exists", a.UserID)}
		}
		if err != nil {
			return fmt.Errorf("session of user %d: %w", a.UserID, err)
		}
		if err := u.SessionLive(a); err != nil {
			return fmt.Errorf("user %d: %w", a.UserID, err)
		}
		return h(w, r.WithContext(context.WithValue(r.Context(), signedInKey, signedInAs{actor: a, user: u})))
	}
}

// bearer reads and verifies the request's bearer token: found is false
// when there is no Authorization header. Errors: *tokenError when it is
// not a valid bearer token, *requestError when the header is not text
// (invalid UTF-8, control characters), the key source's.
func (s *server) bearer(r *http.Request) (a jobboard.Actor, found bool, err error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return jobboard.Actor{}, false, nil
	}
	if p := headerProblem(h); p != "" {
		return jobboard.Actor{}, false, badRequest("Authorization", p)
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return jobboard.Actor{}, false, &tokenError{errors.New("authorization is not a bearer token")}
	}
	if a, err = s.tokens.verify(r.Context(), strings.TrimSpace(token)); err != nil {
		return jobboard.Actor{}, false, err
	}
	return a, true, nil
}

// signedInOf returns what authenticate found for r, if anything.
func signedInOf(r *http.Request) (signedInAs, bool) {
	in, ok := r.Context().Value(signedInKey).(signedInAs)
	return in, ok
}

// actor returns the signed-in actor of r, whose session authenticate
// checked. Errors: jobboard.ErrUnauthenticated when there is none (a
// public route's handler never has one).
func (s *server) actor(r *http.Request) (jobboard.Actor, error) {
	in, ok := signedInOf(r)
	if !ok {
		return jobboard.Actor{}, jobboard.ErrUnauthenticated
	}
	return in.actor, nil
}

// optionalActor is actor for the optionalSignIn routes: false for an
// anonymous request.
func (s *server) optionalActor(r *http.Request) (jobboard.Actor, bool) {
	in, ok := signedInOf(r)
	return in.actor, ok
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
