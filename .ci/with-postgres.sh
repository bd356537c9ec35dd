#!/usr/bin/env bash
# with-postgres.sh CMD...: runs CMD with DATABASE_URL naming a reachable
# PostgreSQL server. In order of preference:
#   1. DATABASE_URL, when it is set;
#   2. the server on 127.0.0.1:5432, when one answers there;
#   3. a throwaway cluster made with initdb in a temporary folder (as the
#      postgres user when running as root), stopped and removed on exit.
set -euo pipefail

reachable() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

if [ -n "${DATABASE_URL:-}" ]; then
  exec "$@"
fi
# PG_PROBE_PORT exists so the throwaway path can be exercised on a machine
# that does run a server on 5432.
if reachable 127.0.0.1 "${PG_PROBE_PORT:-5432}"; then
  export DATABASE_URL="postgres://postgres@127.0.0.1:${PG_PROBE_PORT:-5432}/postgres?sslmode=disable"
  exec "$@"
fi

bindir=$(pg_config --bindir 2>/dev/null || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "with-postgres: installing PostgreSQL" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
    bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  else
    echo "with-postgres: no server on 127.0.0.1:5432 and no initdb found" >&2
    exit 1
  fi
fi

dir=$(mktemp -d /tmp/jobboard-pg.XXXXXX)
port=${PGTEMP_PORT:-55432}
while reachable 127.0.0.1 "$port"; do port=$((port + 1)); done
as_pg=()
if [ "$(id -u)" = 0 ]; then
  chown postgres "$dir"
  as_pg=(runuser -u postgres --)
fi
stop() {
  "${as_pg[@]}" "$bindir/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT TERM
"${as_pg[@]}" "$bindir/initdb" -D "$dir/data" -U postgres --auth=trust >/dev/null
"${as_pg[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
  -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir -c fsync=off -c max_connections=200" start >/dev/null
echo "with-postgres: started a throwaway cluster on 127.0.0.1:$port" >&2
export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
"$@"
