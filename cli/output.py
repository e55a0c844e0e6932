"""Printing for the commands: lines, and JSON as the API gave it."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import typer

from cli import render


def echo_lines(lines: list[str], *, err: bool = False) -> None:
    for line in lines:
        typer.echo(line, err=err)


def echo_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, ensure_ascii=False))


def echo_items(items: list[dict[str, Any]], *, as_json: bool, empty: str, headers: list[str],
               row: Callable[[dict[str, Any]], Sequence[Any]]) -> None:
    """A list answer: as JSON, else a table of ``row`` of each item, else ``empty`` (what to do next)."""
    if as_json:
        echo_json(items)
    elif not items:
        typer.echo(empty)
    else:
        echo_lines(render.table(headers, [row(item) for item in items]))
