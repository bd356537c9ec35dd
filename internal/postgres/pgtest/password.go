package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jobboard/jobboard/internal/dev/localhost"
)

// NewPasswordServer starts a throwaway PostgreSQL cluster that checks
// passwords (scram-sha-256 for every connection; the shared test server
// trusts 127.0.0.1, so a password change there proves nothing), stopped and
// removed when tb ends. It returns the URL of its superuser postgres. The
// binaries come from pg_config --bindir, /usr/lib/postgresql/*/bin or PATH;
// as root, the cluster runs as the postgres user (PostgreSQL refuses root),
// as .ci/with-postgres.sh does. It takes about a second.
func NewPasswordServer(tb testing.TB) string {
	tb.Helper()
	bindir := postgresBindir(tb)
	dir, err := os.MkdirTemp("", "jobboard-pgpass-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	var asPostgres []string
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatalf("running as root, and no postgres user to run the cluster as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			tb.Fatal(err)
		}
		asPostgres = []string{"runuser", "-u", "postgres", "--"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(name string, args ...string) {
		tb.Helper()
		argv := append(append(append([]string{}, asPostgres...), filepath.Join(bindir, name)), args...)
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			tb.Fatalf("%s: %v\n%s", name, err, out)
		}
	}
	const password = "superuser-password"
	pwfile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o644); err != nil {
		tb.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	run("initdb", "-D", data, "-U", "postgres", "--auth=scram-sha-256", "--pwfile="+pwfile, "--no-sync")
	ports, err := localhost.FreePorts(ctx, 1)
	if err != nil {
		tb.Fatal(err)
	}
	port := ports[0]
	run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-o",
		fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories=%s -c fsync=off", port, dir), "start")
	tb.Cleanup(func() {
		argv := append(append(append([]string{}, asPostgres...), filepath.Join(bindir, "pg_ctl")), "-D", data, "-m", "immediate", "stop")
		_ = exec.CommandContext(context.Background(), argv[0], argv[1:]...).Run()
	})
	u := url.URL{
		Scheme: "postgres", User: url.UserPassword("postgres", password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), Path: "/postgres", RawQuery: "sslmode=disable",
	}
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		tb.Fatalf("connect to the password cluster: %v", err)
	}
	_ = conn.Close(ctx)
	return u.String()
}

// postgresBindir finds the PostgreSQL server binaries.
func postgresBindir(tb testing.TB) string {
	tb.Helper()
	if out, err := exec.CommandContext(context.Background(), "pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	tb.Fatal("no PostgreSQL binaries (initdb) found: install PostgreSQL")
	return ""
}
