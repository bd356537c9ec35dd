package database_test

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobboard/jobboard/internal/function/database"
)

// Pool bounds the pool and names its sessions, unless the URL names them.
func TestPoolNamesSessionsUnlessTheURLDoes(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"postgres://u@127.0.0.1/db":                         "jobboard-worker",
		"postgres://u@127.0.0.1/db?application_name=chosen": "chosen",
	} {
		c, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		database.Pool(2, "jobboard-worker")(c)
		if c.MaxConns != 2 || c.ConnConfig.RuntimeParams["application_name"] != want {
			t.Errorf("%s: MaxConns %d, application_name %q; want 2, %q", url, c.MaxConns, c.ConnConfig.RuntimeParams["application_name"], want)
		}
	}
}

// LoadSettings reads every variable it may use, whatever their values, and
// a function's own login stands in for DATABASE_SECRET_ARN; DATABASE_URL
// still names the database (local runs, see secret.Database).
func TestLoadSettings(t *testing.T) {
	t.Parallel()
	const own, shared = "arn:aws:secretsmanager:eu-west-1:1:secret:own", "arn:aws:secretsmanager:eu-west-1:1:secret:shared"
	for _, tt := range []struct {
		env     map[string]string
		wantARN string
		wantErr string
	}{
		{map[string]string{}, "", "DATABASE_URL or DATABASE_SECRET_ARN is not set"},
		{map[string]string{"DATABASE_SECRET_ARN": shared}, shared, ""},
		{map[string]string{"DATABASE_SECRET_ARN": shared, "OWN_LOGIN_ARN": own}, own, ""},
		{map[string]string{"OWN_LOGIN_ARN": own, "DATABASE_QUERY_EXEC_MODE": "prepared"}, own, "DATABASE_QUERY_EXEC_MODE"},
	} {
		read := map[string]bool{}
		s, err := database.LoadSettings(func(k string) string { read[k] = true; return tt.env[k] }, "OWN_LOGIN_ARN")
		if s.SecretARN != tt.wantARN || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("%v: secret %q, %v; want %q, error %q", tt.env, s.SecretARN, err, tt.wantARN, tt.wantErr)
		}
		want := []string{"DATABASE_URL", "DATABASE_SECRET_ARN", "DATABASE_HOST", "DATABASE_SSLROOTCERT", "OWN_LOGIN_ARN", "DATABASE_QUERY_EXEC_MODE"}
		for _, k := range want {
			if !read[k] {
				t.Errorf("%v: %s not read", tt.env, k)
			}
		}
		if len(read) != len(want) {
			t.Errorf("%v: read %v; want %v", tt.env, read, want)
		}
	}
}
