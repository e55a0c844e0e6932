"""A spec file as the commands send it: read (or stdin), ``localpath`` files inlined, the pool it
goes to, template values from ``--set``/``--set-string``/``--set-env``, and the service's dry-run
answer with its errors located in the file (docs/cli.md)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

import typer

from cli.api import Api
from cli.config import ENV_POOL, config_read
from cli.errors import EXIT_USAGE, ApiError, CliError
from cli.localpath import inline_localpaths_traced
from parsing.errors import errors_collapse
from parsing.yamlpos import lines_of


def read_spec(file: str) -> tuple[str, str]:
    """The spec text and a name for it (``-`` reads stdin)."""
    if file == "-":
        text, label = sys.stdin.read(), "stdin"
    else:
        try:
            text, label = Path(file).read_text(encoding="utf-8"), file
        except (OSError, UnicodeDecodeError) as exc:
            raise CliError(f"cannot read {file}: {exc.strerror if isinstance(exc, OSError) else exc}",
                           exit_code=EXIT_USAGE) from exc
    if not text.strip():
        raise CliError(f"{label} is empty: expected a workflow spec (YAML)", exit_code=EXIT_USAGE)
    return text, label


def spec_to_send(text: str, file: str, label: str) -> tuple[str, list[int]]:
    """The spec as sent: ``files[].localpath`` read relative to the spec file (stdin: the current
    directory) and inlined as ``contents`` (:mod:`cli.localpath`); and the line of ``text`` each of
    its lines comes from."""
    base = Path.cwd() if file == "-" else Path(file).resolve().parent
    return inline_localpaths_traced(text, base, label)


_SPEC_POOL = re.compile(r"(?m)^[ \t]+pool:[ \t]*[^\s#]")


def submission_pool(pool: str | None, text: str) -> str | None:
    """``--pool``, else ``OSMO_POOL``; else None when the spec names its pool (``workflow.pool``: the
    service takes it), else the profile's default pool."""
    chosen = pool or os.environ.get(ENV_POOL)
    if chosen:
        return chosen
    if _SPEC_POOL.search(text):
        return None
    return pool_or_default(None)


def warnings_print(answer: dict[str, Any], label: str) -> None:
    """The service's warnings about the spec (a repeated key: the last value was kept), on stderr."""
    for warning in answer.get("warnings") or []:
        typer.echo(f"warning: {label}: {warning.get('path') or '(whole document)'}: {warning.get('message')}",
                   err=True)


def annotate_spec_errors(exc: ApiError, text: str, label: str, origins: list[int] | None = None) -> ApiError:
    """Add ``(file line N)`` to each spec error located in ``text``: the service's ``line`` (a
    template's errors: the line in what was sent, ``origins`` giving each sent line's line of
    ``text``), else the YAML's; the same message at paths that differ only in list indices (30 tasks
    without ``command``) is said once, with the count. A refusal of the ``--label`` values alone is one line
    (:func:`label_refusal`)."""
    if not exc.errors:
        return exc
    if label_refusal(exc):
        return exc
    sent_lines: dict[str, int] = {}
    for error in exc.errors:
        given: object = error.get("line")
        if isinstance(given, int) and not isinstance(given, bool):
            sent_lines[str(error.get("path"))] = given
    collapsed = errors_collapse(exc.errors)
    firsts = [paths[0] if exc.code != "pool_not_found" and paths[0] != "pool" else "" for _s, _m, paths in collapsed]
    lines = []
    for (shown, message, paths), line in zip(collapsed, lines_of(text, firsts), strict=True):
        first = paths[0]
        sent_line = sent_lines.get(first)
        if sent_line is not None and sent_line >= 1:
            line = origins[sent_line - 1] if origins is not None and sent_line <= len(origins) else sent_line
        if len(paths) > 1:
            at = f" ({label} line {line} and {len(paths) - 1} more)" if line else ""
            lines.append(f"{shown}{at}: {message} ({len(paths)} times)")
        else:
            at = f" ({label} line {line})" if line else ""
            lines.append(f"{shown or '(whole document)'}{at}: {message}")
    exc.details = lines
    count = len(exc.errors)
    exc.message = f"{exc.message.rstrip('.')} ({count} problem{'s' if count != 1 else ''})"
    return exc


def _label_path(path: object) -> bool:
    return isinstance(path, str) and (path == "labels" or path.startswith(("labels.", "labels[")))


def label_refusal(exc: ApiError) -> bool:
    """Whether ``exc`` is a 400 whose every error is at the submission's ``labels`` (a ``--label`` that is no
    Kubernetes label, or one the admin's label policy refuses); it is then made one line, ``labels.KEY: why``
    (several joined by ``; ``)."""
    if exc.status != 400 or not exc.errors or not all(_label_path(error.get("path")) for error in exc.errors):
        return False
    exc.message = "; ".join(f"{error.get('path')}: {error.get('message', '')}" for error in exc.errors)
    exc.details, exc.hint = [], None
    return True


def cast_value(text: str) -> Any:
    """``--set`` casting, as the server's: an int or a float when the text is one, else the text."""
    stripped = text.strip()
    for kind in (int, float):
        try:
            return kind(stripped)
        except ValueError:
            continue
    return text


def assignments(items: list[str] | None, *, option: str, cast: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise CliError(f"{option} expects NAME=VALUE, got {item!r}", exit_code=EXIT_USAGE)
        values[name.strip()] = cast_value(value) if cast else value
    return values


def template_fields(set_values: list[str] | None, set_strings: list[str] | None,
                    set_env: list[str] | None) -> dict[str, Any]:
    """The submission's ``set`` and ``set_env`` fields (absent when empty)."""
    fields: dict[str, Any] = {}
    values = {**assignments(set_values, option="--set", cast=True),
              **assignments(set_strings, option="--set-string", cast=False)}
    env = assignments(set_env, option="--set-env", cast=False)
    if values:
        fields["set"] = values
    if env:
        fields["set_env"] = env
    return fields


def label_fields(labels: list[str] | None) -> dict[str, Any]:
    """The submission's ``labels`` field from ``--label KEY=VALUE`` (absent when none; the server checks
    the syntax and the label policy)."""
    values = assignments(labels, option="--label", cast=False)
    return {"labels": values} if values else {}


def pool_or_default(pool: str | None) -> str:
    """``--pool``, else ``OSMO_POOL``, else the profile's default pool (``osmo profile set pool NAME``)."""
    chosen = pool or os.environ.get(ENV_POOL) or config_read().get("default_pool")
    if not chosen:
        raise CliError("no pool given", exit_code=EXIT_USAGE,
                       hint="Pass --pool NAME, or set a default: osmo profile set pool NAME (see osmo pool list).")
    return chosen


def spec_validate(api: Api, *, text: str, label: str, pool: str | None, template: dict[str, Any],
                  sent: str | None = None, origins: list[int] | None = None) -> dict[str, Any]:
    """The dry-run answer for a spec (``sent``: the text as sent, default ``text``; ``origins``: the
    line of ``text`` each of its lines comes from), its errors located in the file, its warnings printed."""
    body = {**({"pool": pool} if pool else {}), "spec": sent if sent is not None else text, "dry_run": True,
            **template}
    try:
        _status, answer = api.post("/api/workflows/", json=body)
    except ApiError as exc:
        if exc.status == 400:
            raise annotate_spec_errors(exc, text, label, origins) from None
        raise
    warnings_print(answer, label)
    return dict(answer)
