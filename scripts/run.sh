#!/usr/bin/env bash
# `make run`: the service on its embedded default, in the foreground. Ctrl-C stops every process started here.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-osmo.settings.local}
HOST=${OSMO_HOST:-127.0.0.1}
PORT=${OSMO_PORT:-8000}
status=0

# A port already taken would only show as a runserver error among the worker's logs, and the script
# used to exit 0: check first, say how to pick another port, and fail.
if ! $PY -c "import socket, sys; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], int(sys.argv[2])))" "$HOST" "$PORT" 2>/dev/null; then
  echo "error: $HOST:$PORT is already in use (another make run?). Pick another port: OSMO_PORT=8001 make run" >&2
  exit 1
fi

# The local pool's tasks (docs/runtime.md): their folders, and the address their runtime reaches the barrier at.
DATA=${OSMO_DATA_DIR:-var}
case "$DATA" in /*) ;; *) DATA="$PWD/$DATA" ;; esac
export OSMO_LOCAL_DIR=${OSMO_LOCAL_DIR:-$DATA/local-pods}
export OSMO_RUNTIME_SERVICE_URL=${OSMO_RUNTIME_SERVICE_URL:-http://$HOST:$PORT}
# The local pool's sandbox (docs/runtime.md, "What a task can and cannot do"): bubblewrap, pasta (passt)
# for each workflow's network, libseccomp for its system call filter. Installed here when missing, as root.
need=()
command -v bwrap >/dev/null || need+=(bubblewrap)
[ "${OSMO_LOCAL_NETWORK:-workflow}" = workflow ] && ! command -v pasta >/dev/null && need+=(passt)
ls /usr/lib/*/libseccomp.so.2 >/dev/null 2>&1 || need+=(libseccomp2)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "==> installing ${need[*]} (Debian packages) for the local pool's sandbox"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null; } \
      || echo "warning: could not install ${need[*]}: the local pool's tasks will fail" >&2
  else
    echo "warning: ${need[*]} not installed: the local pool's tasks will fail (apt-get install ${need[*]})" >&2
  fi
fi

echo "==> migrating the database"
$PY manage.py migrate --no-input -v0
# Credentials stored before the secret key was generated per installation open with the fixed key's
# derived key (decrypt only): seal them with this installation's key (docs/operations.md "Secrets").
$PY manage.py credentials_rotate
echo "==> loading the demo pools and the admin user"
$PY manage.py osmo_bootstrap

pids=()
cleanup() {
  # Ignore further signals (and a closed pipe, e.g. `make run | tee log` after Ctrl-C killed tee),
  # so nothing interrupts the cleanup itself.
  trap '' INT TERM HUP PIPE
  trap - EXIT
  { echo; echo "==> stopping web, worker and beat"; } 2>/dev/null || true
  for pid in "${pids[@]}"; do kill -TERM "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 1 50); do
    alive=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.2
  done
  for pid in "${pids[@]}"; do kill -KILL "-$pid" 2>/dev/null || true; done
  exit "$status"
}
trap cleanup INT TERM HUP EXIT

# A quiet console (docs/operations.md, "Logs"): no start-up banners (-q; uvicorn's at warning level,
# its errors on stderr), routine Celery lines at DEBUG (osmo.logs). As root,
# Celery's seven-line SecurityWarning is said in one line instead.
if [ "$(id -u)" = 0 ]; then
  echo "==> note: the worker runs as root (Celery advises against it outside a throwaway machine)"
  export PYTHONWARNINGS="ignore:You're running the worker with superuser privileges"
fi
# Each process gets its own process group (setsid) so that stopping it also stops its children.
setsid .venv/bin/celery -A osmo -q worker -Q scheduler,dispatch,default -c 2 -l INFO \
  --without-mingle --without-gossip -n "worker@%h" &
pids+=($!)
setsid .venv/bin/celery -A osmo -q beat -l INFO -s "${OSMO_DATA_DIR:-var}/celerybeat-schedule" &
pids+=($!)
# uvicorn serves osmo.asgi: the API and pages as before, and the websockets of `osmo workflow exec` and
# `port-forward` (docs/operations.md, "Web server"). A restart closes open sessions with code 1012; the CLI
# opens them again.
setsid .venv/bin/uvicorn osmo.asgi:application --host "$HOST" --port "$PORT" --log-level warning --no-access-log \
  --timeout-graceful-shutdown 5 &
pids+=($!)

echo "==> serving on http://$HOST:$PORT/  (Ctrl-C to stop)"
wait -n "${pids[@]}" || true
status=1  # Ctrl-C never gets here (the trap exits 0); a process that stopped on its own is a failure
echo "==> a process exited; stopping the rest" 2>/dev/null || true
