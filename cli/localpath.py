"""``files[].localpath`` (docs/spec.md, "Files"): the CLI reads each such file, relative to the spec
file's directory, and sends it inline as ``contents``; the service never reads the client's disk.

Works on the text, line by line, because a spec may be a Jinja template that is not YAML before the
service renders it (OSMO's cookbook puts ``localpath`` inside ``{% for %}`` loops). A line
``<indent>[- ]localpath: <file>`` becomes ``contents:`` with a block scalar holding the file, at an
explicit indentation. The file's own ``{{``, ``{%`` and ``{#`` are written as Jinja expressions that
print them (``{{ '{{' }}``), so the service's rendering gives the file back byte for byte; OSMO's
run-time tokens in the file (``{{host:master}}``) come out as written and are checked like any other.
"""

from __future__ import annotations

import re
from pathlib import Path

from cli.errors import EXIT_USAGE, CliError

_LOCALPATH = re.compile(r"^(?P<lead>[ \t]*(?:-[ \t]+)?)localpath:[ \t]*(?P<value>[^#\n]*?)[ \t]*(?:#.*)?$")
INDENT = 2
_MARKER = re.compile(r"\{[{%#]")


def escape_template(text: str) -> str:
    """``text`` with each Jinja marker replaced by an expression that prints it."""
    return _MARKER.sub(lambda match: "{{ '" + match.group(0) + "' }}", text)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _block(lead: str, contents: str) -> list[str]:
    """The ``contents:`` lines for a file whose key line starts with ``lead``."""
    key_column = len(lead.expandtabs())
    if not contents:
        return [f'{lead}contents: ""']
    chomp = "+" if contents.endswith("\n\n") else ("" if contents.endswith("\n") else "-")
    pad = " " * (key_column + INDENT)
    body = contents[:-1] if contents.endswith("\n") else contents
    lines = [f"{lead}contents: |{INDENT}{chomp}"]
    lines += [f"{pad}{escape_template(line)}" if line else "" for line in body.split("\n")]
    return lines


def inline_localpaths(text: str, base: Path, label: str) -> str:
    """``text`` with every ``localpath:`` line replaced by the file's ``contents`` (read relative to
    ``base``). Raises :class:`CliError` naming the spec line when a file cannot be read."""
    return inline_localpaths_traced(text, base, label)[0]


def inline_localpaths_traced(text: str, base: Path, label: str) -> tuple[str, list[int]]:
    """:func:`inline_localpaths`, and for each line of the result the line of ``text`` it comes from
    (1-based), so that a line the service names in what was sent is said in the user's file."""
    if "localpath:" not in text:
        return text, list(range(1, text.count("\n") + 2))
    out: list[str] = []
    origins: list[int] = []
    for number, line in enumerate(text.split("\n"), start=1):
        match = _LOCALPATH.match(line)
        if match is None:
            out.append(line)
            origins.append(number)
            continue
        name = _unquote(match.group("value"))
        path = base / name
        where = f"{label} line {number}: localpath {name!r}"
        if not name or path.is_dir():
            raise CliError(f"{where} must name a file (directories are not uploaded; use inputs with a url)",
                           exit_code=EXIT_USAGE)
        try:
            contents = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise CliError(f"{where}: cannot read {path}: {reason}", exit_code=EXIT_USAGE) from exc
        block = _block(match.group("lead"), contents)
        out.extend(block)
        origins.extend([number] * len(block))
    return "\n".join(out), origins
