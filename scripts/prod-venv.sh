#!/usr/bin/env bash
# A virtualenv made from requirements.txt alone, as the Dockerfile installs the service's image (no
# requirements-dev.txt, no `-e .`), for tests/ops/test_production_venv.py. Prints its path.
# Cached outside the clone, keyed by requirements.txt's hash and the Python version, so a re-run (or
# CI's fresh clone on the same machine) costs nothing; OSMO_PROD_VENV_CACHE changes where (default /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
CACHE=${OSMO_PROD_VENV_CACHE:-/tmp/osmo-prod-venv}
key=$( { cat requirements.txt; $PYTHON -c 'import sys; print(sys.version)'; } | sha256sum | cut -c1-16)
venv="$CACHE/$key"
mkdir -p "$CACHE"
# Two runs at once (worktrees, CI beside a developer) build it once: the second waits for the first.
exec 9>"$CACHE/.lock"
flock 9
# The marker is written last: a build that failed half-way is made again, never reused.
if [ ! -f "$venv/.complete" ]; then
  echo "==> building the production virtualenv from requirements.txt alone: $venv" >&2
  rm -rf "$venv"
  $PYTHON -m venv "$venv"
  # This machine's pip configuration names index folders that may not exist: pip warns once per package.
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check -q -r requirements.txt 2>&1 \
      | { grep -v "^WARNING: Location" || true; } >&2 \
      || ! "$venv/bin/python" -m pip check >&2; then
    rm -rf "$venv"
    exit 1
  fi
  touch "$venv/.complete"
fi
echo "$venv"
