package httpapi_test

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/jobboard/jobboard/internal/jobboard"
)

type session struct {
	User      jobboard.User `json:"user"`
	Token     string        `json:"token"`
	TokenType string        `json:"token_type"`
	ExpiresAt time.Time     `json:"expires_at"`
}

func TestRegisterLoginMe(t *testing.T) {
	t.Parallel()
	a := newAPI(t)

	r := a.do("POST", "/v1/auth/register", map[string]any{
		"email": "  Ada@Example.COM ", "password": "correct horse battery", "name": " Ada ", "role": "candidate"})
	want(t, r, http.StatusCreated)
	reg := decodeAs[session](t, r)
	if reg.User.Email != "ada@example.com" || reg.User.Name != "Ada" || reg.User.Role != jobboard.RoleCandidate || reg.User.ID <= 0 {
		t.Fatalf("registered user %+v", reg.User)
	}
	if reg.Token == "" || reg.TokenType != "Bearer" || r.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("session %+v, Cache-Control %q", reg, r.Header.Get("Cache-Control"))
	}
	if d := time.Until(reg.ExpiresAt); d < 59*time.Minute || d > 61*time.Minute {
		t.Fatalf("token expires in %v, want about an hour", d)
	}

	// The token is an HS256 JWT naming the user and role.
	var c struct {
		Role string `json:"role"`
		jwt.RegisteredClaims
	}
	tok, err := jwt.ParseWithClaims(reg.Token, &c, func(*jwt.Token) (any, error) { return testKey, nil })
	if err != nil || tok.Method.Alg() != "HS256" || c.Subject != strconv.FormatInt(reg.User.ID, 10) || c.Role != "candidate" || c.IssuedAt == nil {
		t.Fatalf("token %v: alg %v claims %+v", err, tok.Method.Alg(), c)
	}

	// The same address in another case is taken.
	r = a.do("POST", "/v1/auth/register", map[string]any{
		"email": "ADA@example.com", "password": "another password", "name": "Ada Two", "role": "employer"})
	wantProblem(t, r, http.StatusConflict, "email-taken")

	r = a.do("POST", "/v1/auth/login", map[string]any{"email": "ada@EXAMPLE.com", "password": "correct horse battery"})
	want(t, r, http.StatusOK)
	login := decodeAs[session](t, r)
	if login.User != reg.User {
		t.Fatalf("login user %+v, want %+v", login.User, reg.User)
	}

	r = a.do("GET", "/v1/me", nil, bearer(login.Token))
	want(t, r, http.StatusOK)
	if me := decodeAs[jobboard.User](t, r); me != reg.User {
		t.Fatalf("me %+v, want %+v", me, reg.User)
	}
}

// A wrong password and an unknown email get the same answer.
func TestLoginFailuresLookAlike(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	u := a.register(jobboard.RoleCandidate)

	wrongPassword := a.do("POST", "/v1/auth/login", map[string]any{"email": u.Email, "password": "not the password"})
	unknownEmail := a.do("POST", "/v1/auth/login", map[string]any{"email": "nobody@example.com", "password": "not the password"})
	for _, r := range []response{wrongPassword, unknownEmail} {
		p := wantProblem(t, r, http.StatusUnauthorized, "invalid-credentials")
		if !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Fatalf("WWW-Authenticate %q", r.Header.Get("WWW-Authenticate"))
		}
		_ = p
	}
	p1, p2 := wrongPassword.problem(t), unknownEmail.problem(t)
	p1.RequestID, p2.RequestID = "", ""
	if p1.Type != p2.Type || p1.Title != p2.Title || p1.Detail != p2.Detail || p1.Status != p2.Status {
		t.Fatalf("answers differ:\n%+v\n%+v", p1, p2)
	}
	if wrongPassword.Header.Get("WWW-Authenticate") != unknownEmail.Header.Get("WWW-Authenticate") {
		t.Fatal("WWW-Authenticate differs")
	}
}

func TestRegisterAndLoginRefuseBadInput(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	a.register(jobboard.RoleEmployer)
	before := a.counts()
	long := strings.Repeat("x", 300)
	tests := []struct {
		name   string
		path   string
		body   any
		status int
		kind   string
		fields []string
	}{
		{"every field invalid", "/v1/auth/register", map[string]any{"email": "not-an-email", "password": "short", "name": "", "role": "admin"},
			422, "validation", []string{"email", "name", "password", "role"}},
		{"over-long name and email", "/v1/auth/register", map[string]any{"email": long + "@example.com", "password": "long enough pw", "name": long, "role": "candidate"},
			422, "validation", []string{"email", "name"}},
		{"over-long password", "/v1/auth/register", map[string]any{"email": "a@example.com", "password": strings.Repeat("p", 129), "name": "A", "role": "candidate"},
			422, "validation", []string{"password"}},
		{"unknown field", "/v1/auth/register", map[string]any{"email": "a@example.com", "password": "long enough pw", "name": "A", "role": "candidate", "admin": true},
			400, "bad-request", []string{"admin"}},
		{"wrong type", "/v1/auth/register", map[string]any{"email": "a@example.com", "password": 12345678, "name": "A", "role": "candidate"},
			400, "bad-request", []string{"password"}},
		{"malformed JSON", "/v1/auth/register", raw(`{"email": "a@example.com",`), 400, "bad-request", nil},
		{"not an object", "/v1/auth/register", raw(`["a@example.com"]`), 400, "bad-request", nil},
		{"trailing data", "/v1/auth/register", raw(`{"email":"a@example.com","password":"long enough pw","name":"A","role":"candidate"} {}`), 400, "bad-request", nil},
		{"empty body", "/v1/auth/register", raw(``), 400, "bad-request", nil},
		{"body too large", "/v1/auth/register", raw(`{"email":"a@example.com","password":"long enough pw","name":"` + strings.Repeat("n", 1<<20) + `","role":"candidate"}`), 413, "body-too-large", nil},
		{"login without password", "/v1/auth/login", map[string]any{"email": "a@example.com"}, 422, "validation", []string{"password"}},
		{"login unknown field", "/v1/auth/login", map[string]any{"email": "a@example.com", "password": "x", "otp": "1"}, 400, "bad-request", []string{"otp"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := a.do("POST", tt.path, tt.body)
			p := wantProblem(t, r, tt.status, tt.kind)
			if got := p.fields(); tt.fields != nil && !slices.Equal(got, tt.fields) {
				t.Fatalf("fields %v, want %v", got, tt.fields)
			}
		})
	}
	if after := a.counts(); !mapsEqual(before, after) {
		t.Fatalf("refused requests changed rows: %v → %v", before, after)
	}
}

func mapsEqual(x, y map[string]int) bool {
	if len(x) != len(y) {
		return false
	}
	for k, v := range x {
		if y[k] != v {
			return false
		}
	}
	return true
}

func TestBearerTokenChecks(t *testing.T) {
	t.Parallel()
	a := newAPI(t)
	u := a.register(jobboard.RoleCandidate)
	sign := func(method jwt.SigningMethod, key any, c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(method, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	now := time.Now()
	valid := jwt.MapClaims{"sub": strconv.FormatInt(u.ID, 10), "role": "candidate", "iss": "jobboard", "aud": "jobboard-api",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	with := func(k string, v any) jwt.MapClaims {
		c := jwt.MapClaims{}
		for key, val := range valid {
			c[key] = val
		}
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
		return c
	}
	// The control: a token made the same way with the right key works.
	want(t, a.do("GET", "/v1/me", nil, bearer(sign(jwt.SigningMethodHS256, testKey, valid))), http.StatusOK)

	tests := []struct {
		name, authorization string
		invalidToken        bool
	}{
		{"no header", "", false},
		{"basic scheme", "Basic dXNlcjpwYXNz", true},
		{"empty bearer", "Bearer ", true},
		{"garbage", "Bearer not.a.jwt", true},
		{"wrong key", "Bearer " + sign(jwt.SigningMethodHS256, []byte("another key, another key, 32byt"), valid), true},
		{"HS512 with the right key", "Bearer " + sign(jwt.SigningMethodHS512, testKey, valid), true},
		{"alg none", "Bearer " + sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid), true},
		{"expired", "Bearer " + sign(jwt.SigningMethodHS256, testKey, with("exp", now.Add(-time.Minute).Unix())), true},
		{"no expiry", "Bearer " + sign(jwt.SigningMethodHS256, testKey, with("exp", nil)), true},
		{"issued in the future", "Bearer " + sign(jwt.SigningMethodHS256, testKey, with("iat", now.Add(time.Hour).Unix())), true},
		{"wrong audience", "Bearer " + sign(jwt.SigningMethodHS256, testKey, with("aud", "someone-else")), true},
		{"wrong issuer", "Bearer " + sign(jwt.SigningMethodHS256, testKey, with("iss", "someone-else")), true},
		{"bad subject", "Bearer " + sign(jwt.SigningMethodHS256, testKey, with("sub", "admin")), true},
		{"bad role", "Bearer " + sign(jwt.SigningMethodHS256, testKey, with("role", "admin")), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []reqOption
			if tt.authorization != "" {
				opts = append(opts, header("Authorization", tt.authorization))
			}
			r := a.do("GET", "/v1/me", nil, opts...)
			wantProblem(t, r, http.StatusUnauthorized, "unauthenticated")
			challenge := r.Header.Get("WWW-Authenticate")
			if !strings.HasPrefix(challenge, `Bearer realm="jobboard"`) || strings.Contains(challenge, "invalid_token") != tt.invalidToken {
				t.Fatalf("WWW-Authenticate %q", challenge)
			}
		})
	}
	// On an endpoint open to anonymous callers, a bad token still answers
	// 401, so that a client learns its token expired.
	wantProblem(t, a.do("GET", "/v1/jobs", nil, bearer("not.a.jwt")), http.StatusUnauthorized, "unauthenticated")
}
