#!/usr/bin/env bash
# `make test`: throwaway PostgreSQL and Redis on free loopback ports, the whole pytest suite against
# them, then both stopped. Installs the Debian packages it needs when missing and running as root.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=$PWD/.venv/bin/python

need=()
command -v redis-server >/dev/null || need+=(redis-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
command -v chromium >/dev/null || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "==> installing ${need[*]} from Debian packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null || { echo "apt-get install failed"; exit 1; }
  else
    echo "Missing ${need[*]}: install them (Debian packages) or run as root." >&2
    exit 1
  fi
fi

PGBIN=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
WORK=$(mktemp -d /tmp/osmo-test.XXXXXX)
chmod 755 "$WORK"
PGPORT=$(free_port)
REDISPORT=$(free_port)
as_pg=()
if [ "$(id -u)" = 0 ]; then as_pg=(runuser -u postgres --); chown postgres "$WORK"; fi

stop_services() {
  "${as_pg[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -m immediate stop >/dev/null 2>&1 || true
  [ -f "$WORK/redis.pid" ] && kill "$(cat "$WORK/redis.pid")" 2>/dev/null || true
  sleep 0.3
  rm -rf "$WORK"
}
trap stop_services EXIT

echo "==> starting PostgreSQL on 127.0.0.1:$PGPORT"
"${as_pg[@]}" "$PGBIN/initdb" -D "$WORK/pg" -U postgres -A trust --no-sync -E UTF8 >"$WORK/initdb.log" 2>&1 \
  || { cat "$WORK/initdb.log"; exit 1; }
"${as_pg[@]}" "$PGBIN/pg_ctl" -D "$WORK/pg" -l "$WORK/pg.log" -w -t 60 -o \
  "-c listen_addresses=127.0.0.1 -p $PGPORT -k $WORK -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
  start >/dev/null || { cat "$WORK/pg.log"; exit 1; }
echo "==> starting Redis on 127.0.0.1:$REDISPORT"
redis-server --bind 127.0.0.1 --port "$REDISPORT" --save "" --appendonly no --daemonize yes \
  --pidfile "$WORK/redis.pid" --dir "$WORK" --logfile "$WORK/redis.log" || exit 1
for _ in $(seq 1 50); do redis-cli -p "$REDISPORT" ping >/dev/null 2>&1 && break; sleep 0.1; done

export DATABASE_URL="postgres://postgres@127.0.0.1:$PGPORT/osmo"
export REDIS_URL="redis://127.0.0.1:$REDISPORT/0"
export DJANGO_SETTINGS_MODULE=osmo.settings.test
export OSMO_DATA_DIR="$WORK/data"

echo "==> checking the OpenAPI schema"
$PY manage.py spectacular --validate --fail-on-warn --file "$WORK/schema.yaml" || exit 1

echo "==> running the test suite"
$PY -m pytest "$@"
rc=$?
if [ $rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; rc=1; fi
exit $rc
