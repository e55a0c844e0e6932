"""Printing for the commands: lines, and JSON as the API gave it."""

from __future__ import annotations

import json
from typing import Any

import typer


def echo_lines(lines: list[str], *, err: bool = False) -> None:
    for line in lines:
        typer.echo(line, err=err)


def echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))
