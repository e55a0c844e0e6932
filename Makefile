# The two commands of the README: `make run` and `make test`. Everything else is a helper.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed

.PHONY: run test venv migrate lint schema bench-pipeline bench-cycle screenshots clean

# One pip command: requirements-dev.txt starts with `-r requirements.txt` (runtime + test, lint, bench tools).
$(STAMP): requirements.txt requirements-dev.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "==> installing requirements into $(VENV)"
	$(PY) -m pip install --disable-pip-version-check -q -r requirements-dev.txt -e .
	@touch $(STAMP)

venv: $(STAMP)

## Start web + Celery worker + beat on the embedded default (SQLite, filesystem broker). Ctrl-C stops all.
run: venv
	@bash scripts/run.sh

## Start throwaway PostgreSQL and Redis, run the whole suite against them, stop them.
test: venv
	@bash scripts/test.sh $(ARGS)

migrate: venv
	$(PY) manage.py migrate

lint: venv
	$(VENV)/bin/ruff check .

schema: venv
	$(PY) manage.py spectacular --validate --fail-on-warn --file /dev/null

clean:
	rm -rf var .pytest_cache

## Benchmarks (not tests): see docs/benchmarks.md
bench-pipeline: venv
	@bash -c 'set -euo pipefail; PY=$$PWD/$(PY); OSMO_NEED_CHROMIUM=0; source scripts/services.sh; services_start; $(PY) -m bench.pipeline $(ARGS)'

bench-cycle: venv
	@bash -c 'set -euo pipefail; PY=$$PWD/$(PY); OSMO_NEED_CHROMIUM=0; source scripts/services.sh; services_start; $(PY) $(PYFLAGS) -m bench.cycle $(ARGS)'

## Re-take the screenshots under docs/screenshots/ (the browser tests, writing into docs/)
screenshots: venv
	@OSMO_UPDATE_SCREENSHOTS=1 bash scripts/test.sh tests/pages/test_browser.py tests/scheduler/test_admin_browser.py \
		tests/sessions/test_browser_task.py
