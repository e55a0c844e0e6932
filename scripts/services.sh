#!/usr/bin/env bash
# Throwaway PostgreSQL and Redis on free loopback ports, for `make test` and `make bench-pipeline`.
# Source it: it installs missing Debian packages (as root), starts both servers, exports
# DATABASE_URL and REDIS_URL, and stops both on EXIT.
PY=${PY:-$PWD/.venv/bin/python}

services_install() {
  local need=()
  command -v redis-server >/dev/null || need+=(redis-server)
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
  # kubectl renders the Kustomize overlays of deploy/kubernetes/ (tests/deploy).
  command -v kubectl >/dev/null || need+=(kubernetes-client)
  [ "${OSMO_NEED_CHROMIUM:-1}" = 1 ] && ! command -v chromium >/dev/null && need+=(chromium)
  command -v bwrap >/dev/null || need+=(bubblewrap)  # the local backend's sandbox (docs/runtime.md)
  command -v pasta >/dev/null || need+=(passt)  # its network per workflow
  ls /usr/lib/*/libseccomp.so.2 >/dev/null 2>&1 || need+=(libseccomp2)  # its system call filter
  command -v nc >/dev/null || need+=(netcat-openbsd)  # the local group-communication tutorial's nc
  command -v rsync >/dev/null || need+=(rsync)  # osmo workflow rsync: incremental copies into local tasks
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "Missing ${need[*]}: install them (Debian packages) or run as root." >&2
    return 1
  fi
  echo "==> installing ${need[*]} from Debian packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

services_start() {
  services_install || return 1
  PGBIN=$(dirname "$(ls -d /usr/lib/postgresql/*/bin/initdb | sort -V | tail -1)")
  free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
  SERVICES_DIR=$(mktemp -d /tmp/osmo-services.XXXXXX)
  chmod 755 "$SERVICES_DIR"
  local pgport redisport
  pgport=$(free_port)
  redisport=$(free_port)
  AS_PG=()
  if [ "$(id -u)" = 0 ]; then AS_PG=(runuser -u postgres --); chown postgres "$SERVICES_DIR"; fi
  trap services_stop EXIT

  echo "==> starting PostgreSQL on 127.0.0.1:$pgport"
  "${AS_PG[@]}" "$PGBIN/initdb" -D "$SERVICES_DIR/pg" -U postgres -A trust --no-sync -E UTF8 \
    >"$SERVICES_DIR/initdb.log" 2>&1 || { cat "$SERVICES_DIR/initdb.log"; return 1; }
  "${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$SERVICES_DIR/pg" -l "$SERVICES_DIR/pg.log" -w -t 60 -o \
    "-c listen_addresses=127.0.0.1 -p $pgport -k $SERVICES_DIR -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
    start >/dev/null || { cat "$SERVICES_DIR/pg.log"; return 1; }
  "$PGBIN/createdb" -h 127.0.0.1 -p "$pgport" -U postgres osmo || return 1
  echo "==> starting Redis on 127.0.0.1:$redisport"
  redis-server --bind 127.0.0.1 --port "$redisport" --save "" --appendonly no --daemonize yes \
    --pidfile "$SERVICES_DIR/redis.pid" --dir "$SERVICES_DIR" --logfile "$SERVICES_DIR/redis.log" || return 1
  for _ in $(seq 1 50); do redis-cli -p "$redisport" ping >/dev/null 2>&1 && break; sleep 0.1; done

  export DATABASE_URL="postgres://postgres@127.0.0.1:$pgport/osmo"
  export REDIS_URL="redis://127.0.0.1:$redisport/0"
  export OSMO_DATA_DIR="$SERVICES_DIR/data"
}

services_stop() {
  [ -n "${SERVICES_DIR:-}" ] || return 0
  "${AS_PG[@]}" "$PGBIN/pg_ctl" -D "$SERVICES_DIR/pg" -m immediate stop >/dev/null 2>&1 || true
  [ -f "$SERVICES_DIR/redis.pid" ] && kill "$(cat "$SERVICES_DIR/redis.pid")" 2>/dev/null || true
  sleep 0.3
  rm -rf "$SERVICES_DIR"
  SERVICES_DIR=
}
