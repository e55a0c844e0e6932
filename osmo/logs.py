"""Log formats: ``LOG_FORMAT=plain`` (default) or ``json`` (docs/operations.md, "Logs").

Both carry a record's ``extra`` fields, which is how the scheduler names what a line is about
(``logger.info("placement.cycle", extra={"pool": ..., "placed": ...})``): the JSON formatter
(python-json-logger) writes them as fields of the object, the plain one as ``key=value`` after the
message. Imports nothing from Django, so gunicorn's configuration can use it too.
"""

from __future__ import annotations

import logging
import time
from typing import Any

FORMATS = ("plain", "json")
_FIELDS = "%(asctime)s %(levelname)s %(name)s %(message)s"
# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD_ATTRIBUTES = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def formatter_config(name: str) -> dict[str, Any]:
    """The ``logging.config.dictConfig`` entry of the formatter called ``name``."""
    if name == "json":
        return {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": _FIELDS,
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }
    if name == "plain":
        return {"()": "osmo.logs.PlainFormatter", "format": _FIELDS}
    raise ValueError(f"LOG_FORMAT must be one of {', '.join(FORMATS)}, not {name!r}")


def record_extras(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in vars(record).items()
            if key not in _STANDARD_ATTRIBUTES and not key.startswith("_")}


def _plain_extras(record: logging.LogRecord) -> dict[str, Any]:
    extras = record_extras(record)
    if record.name.startswith("celery."):
        extras.pop("data", None)  # Celery's copy of the task fields its message already says
    elif record.name == "django.server":
        for repeated in ("request", "server_time"):  # runserver's socket object and the time again
            extras.pop(repeated, None)
    return extras


class PlainFormatter(logging.Formatter):
    """One text line per record: time, level, logger, message, then the extras as ``key=value``
    (values with spaces quoted), before any traceback."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        line = super().formatMessage(record)
        extras = _plain_extras(record)
        if not extras:
            return line
        pairs = " ".join(f"{key}={_plain(value)}" for key, value in sorted(extras.items()))
        return f"{line} {pairs}"


def _plain(value: Any) -> str:
    text = str(value)
    return repr(text) if not text or any(char.isspace() for char in text) else text


# Celery tasks that run every tick whether or not there is work: their lines say nothing new. What
# they do that matters has lines of its own (``placement.cycle`` when a gang is placed or refused,
# ``pod.reconciled``), and their failures are logged as errors, which are never lowered.
# Their names are checked against the registered tasks (tests/ops/test_task_names.py): a renamed task
# would otherwise come back to the console every second.
ROUTINE_TASKS = frozenset({"workflows.tick", "workflows.tick_watch", "workflows.placement_cycle_run",
                           "workflows.pods_sync", "workflows.kubernetes_sync", "scheduler.worker_heartbeat"})


class CeleryRoutineFilter(logging.Filter):
    """Lowers Celery's routine INFO lines to DEBUG (docs/operations.md, "Logs"): a task received
    (its success or failure is the one line about it), a routine task succeeded, beat sending a
    routine task. Lowered lines are dropped unless their logger is enabled for DEBUG
    (``LOG_LEVEL=DEBUG``). Celery passes the task's fields as the record's ``data`` too; the
    message already says them, so it is removed from the plain format's view (JSON keeps it)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.INFO and self._routine(record):
            record.levelno, record.levelname = logging.DEBUG, logging.getLevelName(logging.DEBUG)
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True

    @staticmethod
    def _routine(record: logging.LogRecord) -> bool:
        if record.name == "celery.worker.strategy":
            return True
        data = getattr(record, "data", None)
        name = data.get("name") if isinstance(data, dict) else None
        if name is None and isinstance(record.args, tuple) and len(record.args) == 2:
            name = record.args[1]  # celery.beat: "Sending due task %s (%s)", entry name, task name
        return name in ROUTINE_TASKS


class OutageLog:
    """Logs that a dependency could not be reached, as ``event`` with the error, at most every
    ``every`` seconds per process: a Redis outage touches every request, one line says it."""

    def __init__(self, logger: logging.Logger, event: str, every: float = 10.0) -> None:
        self.logger, self.event, self.every = logger, event, every
        self.last = float("-inf")

    def __call__(self, exc: Exception) -> None:
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            self.logger.warning(self.event, extra={"error": f"{exc.__class__.__name__}: {exc}"[:300]})
