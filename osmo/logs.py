"""Log formats: ``LOG_FORMAT=plain`` (default) or ``json`` (docs/operations.md, "Logs").

Both carry a record's ``extra`` fields, which is how the scheduler names what a line is about
(``logger.info("placement.cycle", extra={"pool": ..., "placed": ...})``): the JSON formatter
(python-json-logger) writes them as fields of the object, the plain one as ``key=value`` after the
message. Imports nothing from Django, so gunicorn's configuration can use it too.
"""

from __future__ import annotations

import logging
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


class PlainFormatter(logging.Formatter):
    """One text line per record: time, level, logger, message, then the extras as ``key=value``
    (values with spaces quoted), before any traceback."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        line = super().formatMessage(record)
        extras = record_extras(record)
        if not extras:
            return line
        pairs = " ".join(f"{key}={_plain(value)}" for key, value in sorted(extras.items()))
        return f"{line} {pairs}"


def _plain(value: Any) -> str:
    text = str(value)
    return repr(text) if not text or any(char.isspace() for char in text) else text
