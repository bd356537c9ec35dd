package database_test

import (
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
