package secret_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/smithy-go"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/jobboard/jobboard/internal/awsenv"
	"github.com/jobboard/jobboard/internal/secret"
)

// fakeSecretsManager speaks the Secrets Manager wire protocol (AWS JSON 1.1)
// for GetSecretValue, so the tests run the real SDK client end to end:
// signing, serialisation, error decoding.
type fakeSecretsManager struct {
	strings  map[string]string // SecretId → SecretString (AWSCURRENT)
	binaries map[string][]byte // SecretId → SecretBinary (AWSCURRENT)
	// previous holds the AWSPREVIOUS SecretString of some secrets.
	previous map[string]string

	mu       sync.Mutex
	requests []string // SecretIds asked for, with ":STAGE" for a stage other than AWSCURRENT
}

// rotate makes value the AWSCURRENT string of id and the old one its
// AWSPREVIOUS, as PutSecretValue does.
func (f *fakeSecretsManager) rotate(id, value string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.previous == nil {
		f.previous = map[string]string{}
	}
	f.previous[id] = f.strings[id]
	f.strings[id] = value
}

func (f *fakeSecretsManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "secretsmanager.GetSecretValue" ||
		!strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		http.Error(w, "unexpected request", http.StatusBadRequest)
		return
	}
	var in struct{ SecretId, VersionStage string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	asked := in.SecretId
	if in.VersionStage != "" && in.VersionStage != "AWSCURRENT" {
		asked += ":" + in.VersionStage
	}
	f.requests = append(f.requests, asked)

	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	out := map[string]any{"ARN": in.SecretId, "Name": "n", "VersionId": "v-" + in.SecretId + "-" + f.strings[in.SecretId], "CreatedDate": 1.7e9}
	if s, ok := f.previous[in.SecretId]; ok && in.VersionStage == "AWSPREVIOUS" {
		out["SecretString"] = s
		out["VersionId"] = "v-" + in.SecretId + "-" + s
	} else if s, ok := f.strings[in.SecretId]; ok && in.VersionStage != "AWSPREVIOUS" {
		out["SecretString"] = s
	} else if b, ok := f.binaries[in.SecretId]; ok && in.VersionStage != "AWSPREVIOUS" {
		out["SecretBinary"] = b // encoding/json writes base64, as the protocol does
	} else {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{
			"__type":  "ResourceNotFoundException",
			"message": "Secrets Manager can't find the specified secret.",
		})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (f *fakeSecretsManager) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.requests...)
}

// newClientFor returns a newClient function for a real SDK client talking to
// srv, and counts its calls.
func newClientFor(srv *httptest.Server, calls *int) func() (secret.Getter, error) {
	return func() (secret.Getter, error) {
		*calls++
		return secretsmanager.New(secretsmanager.Options{
			Region:       "us-east-1",
			BaseEndpoint: aws.String(srv.URL),
			Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
			HTTPClient:   srv.Client(),
		}), nil
	}
}

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// noClient fails the test if the secret would be fetched.
func noClient(t *testing.T) func() (secret.Getter, error) {
	return func() (secret.Getter, error) {
		t.Error("newClient called although the value is in the environment")
		return nil, errors.New("no client")
	}
}

const (
	dbARN  = "arn:aws:secretsmanager:us-east-1:111111111111:secret:db-AbCdEf"
	jwtARN = "arn:aws:secretsmanager:us-east-1:111111111111:secret:jwt-AbCdEf"
)

// databaseURL is secret.Database without the credentials.
func databaseURL(ctx context.Context, getenv func(string) string, newClient func() (secret.Getter, error)) (string, error) {
	u, _, err := secret.Database(ctx, secret.LoadDatabase(getenv), newClient)
	return u, err
}

func TestDatabaseURLPrefersTheEnvironment(t *testing.T) {
	t.Parallel()
	want := "postgres://u:p@localhost:5432/db?sslmode=disable"
	got, err := databaseURL(context.Background(), env(map[string]string{
		secret.EnvDatabaseURL: want, secret.EnvDatabaseSecretARN: dbARN,
	}), noClient(t))
	if err != nil || got != want {
		t.Errorf("DatabaseURL = %q, %v; want %q", got, err, want)
	}
}

func TestDatabaseURLFromRDSSecret(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		secret string
		env    map[string]string // besides DATABASE_SECRET_ARN
		want   string
	}{
		{
			name:   "every field, port as a number",
			secret: `{"engine":"postgres","username":"app","password":"p@ss:w/rd?#%&=+ é","host":"db.example.internal","port":6432,"dbname":"jobboard","dbInstanceIdentifier":"x"}`,
			want:   "postgres://app:p%40ss%3Aw%2Frd%3F%23%25&=+%20%C3%A9@db.example.internal:6432/jobboard?sslmode=require",
		},
		{
			name:   "port as a string",
			secret: `{"username":"app","password":"pw","host":"10.0.0.7","port":"5433","dbname":"jb"}`,
			want:   "postgres://app:pw@10.0.0.7:5433/jb?sslmode=require",
		},
		{
			name:   "defaults: port 5432, database postgres",
			secret: `{"username":"app","password":"pw","host":"db"}`,
			want:   "postgres://app:pw@db:5432/postgres?sslmode=require",
		},
		{
			name:   "sslmode from the secret",
			secret: `{"engine":"aurora-postgresql","username":"app","password":"pw","host":"db","sslmode":"verify-full"}`,
			want:   "postgres://app:pw@db:5432/postgres?sslmode=verify-full",
		},
		{
			name:   "IPv6 host",
			secret: `{"username":"app","password":"pw","host":"fd00::5","port":5432}`,
			want:   "postgres://app:pw@[fd00::5]:5432/postgres?sslmode=require",
		},
		{
			name:   "DATABASE_HOST: an RDS Proxy endpoint instead of the instance",
			secret: `{"username":"app","password":"pw","host":"db.abc.us-east-1.rds.amazonaws.com","port":5432,"dbname":"jb"}`,
			env:    map[string]string{secret.EnvDatabaseHost: "jb.proxy-abc.us-east-1.rds.amazonaws.com"},
			want:   "postgres://app:pw@jb.proxy-abc.us-east-1.rds.amazonaws.com:5432/jb?sslmode=require",
		},
		{
			name:   "DATABASE_HOST with an RDS-managed master secret, which has no host",
			secret: `{"username":"postgres","password":"pw"}`,
			env:    map[string]string{secret.EnvDatabaseHost: "jb.proxy-abc.us-east-1.rds.amazonaws.com"},
			want:   "postgres://postgres:pw@jb.proxy-abc.us-east-1.rds.amazonaws.com:5432/postgres?sslmode=require",
		},
		{
			name:   "DATABASE_SSLROOTCERT: verify-full against the RDS bundle",
			secret: `{"username":"app","password":"pw","host":"db"}`,
			env:    map[string]string{secret.EnvDatabaseSSLRootCert: "/var/task/rds-global-bundle.pem"},
			want:   "postgres://app:pw@db:5432/postgres?sslmode=verify-full&sslrootcert=%2Fvar%2Ftask%2Frds-global-bundle.pem",
		},
		{
			name:   "DATABASE_SSLROOTCERT=system, and the secret's own sslmode wins",
			secret: `{"username":"app","password":"pw","host":"db","sslmode":"verify-ca"}`,
			env:    map[string]string{secret.EnvDatabaseSSLRootCert: "system"},
			want:   "postgres://app:pw@db:5432/postgres?sslmode=verify-ca&sslrootcert=system",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := &fakeSecretsManager{strings: map[string]string{dbARN: tt.secret}}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			calls := 0
			vars := map[string]string{secret.EnvDatabaseSecretARN: dbARN}
			for k, v := range tt.env {
				vars[k] = v
			}
			got, err := databaseURL(context.Background(), env(vars), newClientFor(srv, &calls))
			if err != nil {
				t.Fatalf("DatabaseURL: %v", err)
			}
			// pgx accepts it (the bundle is read only when connecting).
			if _, err := pgconn.ParseConfig(strings.Replace(got, "sslrootcert=%2Fvar%2Ftask%2Frds-global-bundle.pem", "sslrootcert=system", 1)); err != nil {
				t.Errorf("pgconn.ParseConfig(%q): %v", got, err)
			}
			if got != tt.want {
				t.Errorf("DatabaseURL = %q; want %q", got, tt.want)
			}
			if asked := fake.asked(); calls != 1 || len(asked) != 1 || asked[0] != dbARN {
				t.Errorf("newClient called %d times, secrets asked %v; want 1 and [%s]", calls, asked, dbARN)
			}
			// The URL round-trips: the password comes back unchanged.
			var s struct{ Password string }
			_ = json.Unmarshal([]byte(tt.secret), &s)
			u, err := url.Parse(got)
			if err != nil {
				t.Fatalf("parse %q: %v", got, err)
			}
			if p, _ := u.User.Password(); p != s.Password {
				t.Errorf("password after parsing the URL = %q; want %q", p, s.Password)
			}
		})
	}
}

func TestDatabaseURLFailures(t *testing.T) {
	t.Parallel()
	const password = "s3cr3t-value-that-must-not-leak"
	fake := &fakeSecretsManager{
		strings: map[string]string{
			"bad-json":      `{"username":"app","password":"` + password + `"`,
			"not-an-object": `"` + password + `"`,
			"no-host":       `{"username":"app","password":"` + password + `"}`,
			"no-password":   `{"username":"app","host":"db"}`,
			"bad-port":      `{"username":"app","password":"` + password + `","host":"db","port":70000}`,
			"mysql":         `{"engine":"mysql","username":"app","password":"` + password + `","host":"db"}`,
			"empty":         ``,
		},
	}
	srv := httptest.NewServer(fake)
	defer srv.Close()

	tests := []struct {
		name string
		env  map[string]string
		want error // errors.Is target; nil means "an API error"
	}{
		{"nothing set", map[string]string{}, secret.ErrNotConfigured},
		{"bad JSON", map[string]string{secret.EnvDatabaseSecretARN: "bad-json"}, secret.ErrMalformed},
		{"JSON string, not object", map[string]string{secret.EnvDatabaseSecretARN: "not-an-object"}, secret.ErrMalformed},
		{"missing host", map[string]string{secret.EnvDatabaseSecretARN: "no-host"}, secret.ErrMalformed},
		{"missing password", map[string]string{secret.EnvDatabaseSecretARN: "no-password"}, secret.ErrMalformed},
		{"port out of range", map[string]string{secret.EnvDatabaseSecretARN: "bad-port"}, secret.ErrMalformed},
		{"not PostgreSQL", map[string]string{secret.EnvDatabaseSecretARN: "mysql"}, secret.ErrMalformed},
		{"empty value", map[string]string{secret.EnvDatabaseSecretARN: "empty"}, secret.ErrMalformed},
		{"unknown secret", map[string]string{secret.EnvDatabaseSecretARN: "missing"}, nil},
	}
	for _, tt := range tests {
		calls := 0
		got, err := databaseURL(context.Background(), env(tt.env), newClientFor(srv, &calls))
		if got != "" || err == nil {
			t.Errorf("%s: DatabaseURL = %q, %v; want an error", tt.name, got, err)
			continue
		}
		if tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("%s: error %v; want %v", tt.name, err, tt.want)
		}
		if tt.want == nil {
			var apiErr smithy.APIError
			if !errors.As(err, &apiErr) || apiErr.ErrorCode() != "ResourceNotFoundException" {
				t.Errorf("%s: error %v; want the ResourceNotFoundException from Secrets Manager", tt.name, err)
			}
		}
		if strings.Contains(err.Error(), password) {
			t.Errorf("%s: error %q reveals the secret", tt.name, err)
		}
	}
}

func TestDatabaseURLClientError(t *testing.T) {
	t.Parallel()
	boom := errors.New("no credentials")
	_, err := databaseURL(context.Background(), env(map[string]string{secret.EnvDatabaseSecretARN: dbARN}),
		func() (secret.Getter, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Errorf("error %v; want it to wrap %v", err, boom)
	}
}

// NewClient builds one client however often it is called, and that client
// reaches the endpoint the standard AWS variables name.
func TestNewClientIsBuiltOnceFromTheEnvironment(t *testing.T) {
	t.Parallel()
	fake := &fakeSecretsManager{strings: map[string]string{jwtARN: strings.Repeat("z", 40)}}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	awsCfg := awsenv.Load(env(map[string]string{
		"AWS_ENDPOINT_URL_SECRETS_MANAGER": srv.URL,
		"AWS_ACCESS_KEY_ID":                "test",
		"AWS_SECRET_ACCESS_KEY":            "test",
		"AWS_REGION":                       "us-east-1",
	}))
	newClient := secret.NewClient(awsCfg)
	a, errA := newClient()
	b, errB := newClient()
	if errA != nil || errB != nil || a != b {
		t.Fatalf("NewClient gave %p (%v) then %p (%v); want one client", a, errA, b, errB)
	}
	src, err := secret.NewJWTKeySource(secret.LoadJWTKey(env(map[string]string{secret.EnvJWTSecretARN: jwtARN})), newClient)
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Keys(context.Background(), false)
	if err != nil || string(got.Current) != strings.Repeat("z", 40) {
		t.Errorf("JWT keys through NewClient = %q, %v", got.Current, err)
	}
}
