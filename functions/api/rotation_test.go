package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jobboard/jobboard/functions/api/settings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/function/database"
	"github.com/jobboard/jobboard/internal/httpapi"
	"github.com/jobboard/jobboard/internal/postgres/pgtest"
	"github.com/jobboard/jobboard/internal/postgres/schema"
	"github.com/jobboard/jobboard/internal/secret"
	"github.com/jobboard/jobboard/internal/secret/secrettest"
)

const databaseSecretARN = "arn:aws:secretsmanager:us-east-1:111111111111:secret:jobboard-db-AbCdEf"

// rdsSecret is the secret RDS keeps for a database user.
func rdsSecret(server *url.URL, user, password string) string {
	return fmt.Sprintf(`{"engine":"postgres","username":%q,"password":%q,"host":%q,"port":%s,"dbname":"jobboard","sslmode":"disable"}`,
		user, password, server.Hostname(), server.Port())
}

// A warm API sandbox outlives a rotation of the database password: on a
// cluster that checks passwords, the password changes in the database and in
// the secret; a new connection made with the old one is refused (the one
// request that needed it answers 503), and the next request looks the secret
// up again and connects, without a restart. After the secret's lifetime
// (secret.DefaultMaxAge) a rotation costs no failed request at all.
func TestRotatedDatabasePasswordReachesAWarmSandbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	adminURL := pgtest.NewPasswordServer(t)
	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, stmt := range []string{
		// The delivery function's role, which the app's user (without
		// CREATEROLE) cannot make: an administrator makes it before the
		// first migration (docs/deploying.md).
		`CREATE ROLE jobboard_webhooks NOLOGIN`,
		`CREATE ROLE jobboard_app LOGIN PASSWORD 'one'`,
		`CREATE DATABASE jobboard OWNER jobboard_app`,
	} {
		if _, err := admin.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	server, _ := url.Parse(adminURL)
	appURL := fmt.Sprintf("postgres://jobboard_app:one@%s/jobboard?sslmode=disable", server.Host)
	if err := schema.Migrate(ctx, appURL); err != nil {
		t.Fatal(err)
	}

	sm := secrettest.New(t)
	sm.Put(databaseSecretARN, rdsSecret(server, "jobboard_app", "one"), time.Now())
	getenv := env(map[string]string{"DATABASE_SECRET_ARN": databaseSecretARN, "JWT_SECRET": strings.Repeat("k", 32)})
	s, err := settings.Load(getenv)
	if err != nil {
		t.Fatal(err)
	}
	src, err := database.Find(ctx, s.DB, sm.NewClient())
	if err != nil {
		t.Fatal(err)
	}
	keys, err := loadTokenKeys(ctx, s.Lambda, s.JWTKey, sm.NewClient(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	clk := &struct{ now time.Time }{time.Now()}
	src.Credentials.Now = func() time.Time { return clk.now }
	// Lambda's pool; every connection handed out is pinged, so the
	// connections the test terminates are replaced at once (in Lambda, idle
	// connections close after a minute and a frozen sandbox's are dropped).
	alwaysPing := func(c *pgxpool.Config) {
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return true }
	}
	h := openHandler(t, s, src, keys, lambdaPool, alwaysPing)
	ready := func() int {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code
	}
	rotate := func(password string) {
		t.Helper()
		if _, err := admin.Exec(ctx, "ALTER ROLE jobboard_app PASSWORD '"+password+"'"); err != nil {
			t.Fatal(err)
		}
		sm.Put(databaseSecretARN, rdsSecret(server, "jobboard_app", password), clk.now)
		// The sandbox's open connections would go on working; end them so
		// that the next request needs a new one.
		if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'jobboard_app'`); err != nil {
			t.Fatal(err)
		}
	}
	lookups := func() int { return strings.Count(strings.Join(sm.Asked(), " "), databaseSecretARN) }

	if code := ready(); code != http.StatusOK {
		t.Fatalf("before the rotation: /readyz %d", code)
	}
	if n := lookups(); n != 1 {
		t.Fatalf("%d lookups of the database secret at start; want 1", n)
	}

	// Single-user rotation, within the secret's lifetime.
	rotate("two")
	clk.now = clk.now.Add(secret.DefaultMinInterval)
	if code := ready(); code != http.StatusServiceUnavailable {
		t.Fatalf("first request after the rotation: /readyz %d; want 503 (the cached password is refused)", code)
	}
	if code := ready(); code != http.StatusOK {
		t.Fatalf("next request: /readyz %d; want 200 with the new password", code)
	}
	if n := lookups(); n != 2 {
		t.Fatalf("%d lookups; want 2 (start, and after the refusal)", n)
	}
	// The password really is the new one: the old one is refused.
	if _, err := pgx.Connect(ctx, appURL); err == nil || !strings.Contains(err.Error(), "28P01") {
		t.Fatalf("connecting with the old password: %v; want SQLSTATE 28P01", err)
	}

	// After the lifetime, the next connection looks the secret up first.
	clk.now = clk.now.Add(secret.DefaultMaxAge)
	rotate("three")
	if code := ready(); code != http.StatusOK {
		t.Fatalf("first request after a rotation past the lifetime: /readyz %d; want 200", code)
	}
	if n := lookups(); n != 3 {
		t.Fatalf("%d lookups; want 3", n)
	}

	// And the API works on top: sign-up writes through the new connection.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/auth/register", strings.NewReader(
		`{"email":"after-rotation@example.com","password":"correct horse battery","name":"R","role":"candidate"}`)))
	if rec.Code != http.StatusCreated {
		t.Fatalf("register after the rotations: %d %s", rec.Code, rec.Body)
	}
}

// The token keys of a function follow the JWT secret's rotation: a token
// signed with the previous version is accepted for previousKeyWindow after
// the new version was created, then refused.
func TestJWTKeyRotationWindow(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:secretsmanager:us-east-1:111111111111:secret:jwt-AbCdEf"
	ctx := context.Background()
	sm := secrettest.New(t)
	rotatedAt := time.Now().Add(-time.Minute)
	sm.Put(arn, strings.Repeat("a", 64), rotatedAt.Add(-24*time.Hour))
	sm.Put(arn, strings.Repeat("b", 64), rotatedAt)
	getenv := withDB(map[string]string{"JWT_SECRET_ARN": arn})
	s, err := settings.Load(getenv)
	if err != nil {
		t.Fatal(err)
	}
	src, err := loadTokenKeys(ctx, s.Lambda, s.JWTKey, sm.NewClient(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := src(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if string(keys.Current) != strings.Repeat("b", 64) || string(keys.Previous) != strings.Repeat("a", 64) {
		t.Fatalf("keys %q / %q; want AWSCURRENT b… and AWSPREVIOUS a…", keys.Current, keys.Previous)
	}
	if want := rotatedAt.Add(httpapi.DefaultTokenTTL + secret.DefaultMaxAge); !keys.PreviousUntil.Equal(want.Truncate(time.Millisecond)) {
		t.Errorf("PreviousUntil %v; want %v (creation of the current version + token lifetime + secret lifetime)", keys.PreviousUntil, want)
	}
	if got := sm.Asked(); strings.Join(got, " ") != arn+" "+arn+":AWSPREVIOUS" {
		t.Errorf("asked %v", got)
	}
}

// The key of the Idempotency-Key fingerprints comes from the JWT secret and
// rotates with it: a keyed write answered before a rotation of the secret
// is replayed to its retry after the warm sandbox has picked up the new
// version (the retry checked with the previous key), and the same key with
// another request is still refused.
func TestFingerprintKeyFollowsTheJWTSecret(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:secretsmanager:us-east-1:111111111111:secret:jwt-FpFpFp"
	ctx := context.Background()
	sm := secrettest.New(t)
	clk := &struct{ now time.Time }{time.Now()}
	sm.Put(arn, strings.Repeat("a", 64), clk.now.Add(-24*time.Hour))
	src, err := secret.NewJWTKeySource(secret.Key{ARN: arn}, sm.NewClient())
	if err != nil {
		t.Fatal(err)
	}
	src.Now = func() time.Time { return clk.now }
	h := openHandler(t, settings.Settings{PasswordHashes: 1}, database.Source{URL: pgtest.NewURL(t)}, tokenKeys(src))
	do := func(method, path, token, key, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	reg := do(http.MethodPost, "/v1/auth/register", "", "", `{"email":"fp@example.com","password":"correct horse battery","name":"F","role":"employer"}`)
	var session struct {
		Token string `json:"token"`
	}
	if reg.Code != http.StatusCreated || json.Unmarshal(reg.Body.Bytes(), &session) != nil {
		t.Fatalf("register: %d %s", reg.Code, reg.Body)
	}
	const key = "rotation-spanning-key-0001"
	first := do(http.MethodPost, "/v1/companies", session.Token, key, `{"name":"Before the rotation"}`)
	if first.Code != http.StatusCreated {
		t.Fatalf("keyed write: %d %s", first.Code, first.Body)
	}

	sm.Put(arn, strings.Repeat("b", 64), clk.now)
	clk.now = clk.now.Add(secret.DefaultMaxAge + time.Second) // the sandbox looks the secret up again
	if keys, err := src.Keys(ctx, false); err != nil || string(keys.Current) != strings.Repeat("b", 64) {
		t.Fatalf("after the rotation the current key is %q (%v); want the new version", keys.Current, err)
	}
	retry := do(http.MethodPost, "/v1/companies", session.Token, key, `{"name":"Before the rotation"}`)
	if retry.Code != http.StatusCreated || retry.Header().Get("Idempotent-Replayed") != "true" || retry.Body.String() != first.Body.String() {
		t.Fatalf("retry after the rotation: %d %v %s; want the first answer replayed", retry.Code, retry.Header(), retry.Body)
	}
	if other := do(http.MethodPost, "/v1/companies", session.Token, key, `{"name":"Another"}`); other.Code != http.StatusUnprocessableEntity {
		t.Fatalf("the key with another request after the rotation: %d %s; want 422", other.Code, other.Body)
	}
}
