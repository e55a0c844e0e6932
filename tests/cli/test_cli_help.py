"""``osmo ... -h`` shows every option's help as written (docs/cli.md: "`osmo -h`, `osmo workflow submit -h`
etc. list every option"). Typer renders help through Rich, whose markup takes ``[word]`` for a style
tag and drops it: a help text that quotes ``[task]`` lost the words."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import typer
from typer.testing import CliRunner

from cli.main import app

BRACKETED = re.compile(r"\[[^\]\s]+\]")


def commands(group: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every command under ``group`` with its words (Typer's own copy of Click: groups have ``commands``)."""
    for name, command in sorted(group.commands.items()):
        yield (*path, name), command
        if hasattr(command, "commands"):
            yield from commands(command, (*path, name))


def test_every_bracketed_word_of_an_option_help_is_shown():
    # given every command of the CLI and the help of its options
    root = typer.main.get_command(app)
    runner = CliRunner()
    missing = []
    checked = 0
    for path, command in commands(root):
        quoted = {word for param in command.params for word in BRACKETED.findall(getattr(param, "help", None) or "")}
        if not quoted:
            continue
        # when its help is printed
        shown = runner.invoke(app, [*path, "-h"], env={"COLUMNS": "400"}, terminal_width=400)
        assert shown.exit_code == 0, shown.output
        # then every bracketed word of the source is there
        checked += 1
        missing += [f"osmo {' '.join(path)}: {word}" for word in sorted(quoted) if word not in shown.stdout]
    assert checked, "no option help quotes a bracketed word: the test checks nothing"
    assert missing == []
