#!/usr/bin/env bash
# `make test`: throwaway PostgreSQL and Redis on free loopback ports, the whole pytest suite against
# them, then both stopped. Installs the Debian packages it needs when missing and running as root.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=$PWD/.venv/bin/python
source scripts/services.sh
services_start || exit 1
export DJANGO_SETTINGS_MODULE=osmo.settings.test

echo "==> linting (ruff)"
$PWD/.venv/bin/ruff check . || exit 1

echo "==> checking the architecture contracts (import-linter)"
$PWD/.venv/bin/lint-imports --no-cache || exit 1

echo "==> type checking (mypy)"
$PWD/.venv/bin/mypy || exit 1

echo "==> checking the OpenAPI schema"
$PY manage.py spectacular --validate --fail-on-warn --file "$SERVICES_DIR/schema.yaml" || exit 1

echo "==> running the test suite"
# pytest-xdist workers (OSMO_TEST_WORKERS, default 2; 0 runs in this process): the tests wait on servers
# and workers for much of their time, so two share this kind's two cores. Tests that use machine-wide
# things run on one worker (tests/conftest.py, MACHINE_WIDE); each worker has its own database, Redis
# database and data folder (osmo/settings/test.py).
workers=${OSMO_TEST_WORKERS:-2}
parallel=()
if [ "$workers" != 0 ] && [[ " $* " != *" -n "* ]] && [[ " $* " != *"no:xdist"* ]]; then
  parallel=(-n "$workers" --dist loadgroup)
fi
$PY -m pytest "${parallel[@]}" "$@"
rc=$?
if [ $rc -eq 5 ]; then echo "pytest collected no tests: that is a failure" >&2; rc=1; fi
exit $rc
