"""OSMO's options that take several values (argparse ``nargs='+'``), read as Click's repeated options.

OSMO's CLI documents ``osmo workflow submit spec.yaml --set a=1 b=2`` and ``osmo workflow list --status
RUNNING PENDING``; Click options take one value each. :func:`option_values_spread` rewrites the
arguments before Click parses them: each further word after such an option's value that the option
accepts gets the option again (``--set a=1 --set b=2``). Another option, a word the option does not
accept, or ``--`` ends the run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from typer.core import TyperCommand

TEMPLATE_OPTIONS = ("--set", "--set-string", "--set-env")
STATUS_OPTIONS = ("--status", "-s")
# OSMO's `workflow list --tags a b --priority LOW HIGH --pool a b --user u v`
LIST_OPTIONS = (*STATUS_OPTIONS, "--tags", "--priority", "--pool", "-p", "--user", "-u")
TAG_OPTIONS = ("--workflow", "-w", "--add", "-a", "--remove", "-r")


def is_assignment(arg: str) -> bool:
    """A ``NAME=VALUE`` word (a spec file, which may follow the values, has no ``=``)."""
    return "=" in arg


def is_value(arg: str) -> bool:
    """Any word that is not an option (for commands without positional arguments)."""
    return not arg.startswith("-")


def option_values_spread(args: list[str], options: tuple[str, ...],
                         accepts: Callable[[str], bool] = is_assignment) -> list[str]:
    """``args`` with the option repeated before each further value of one of ``options``."""
    spread: list[str] = []
    current: str | None = None
    pending = False
    long_forms = tuple(f"{option}=" for option in options if option.startswith("--"))
    for index, arg in enumerate(args):
        if arg == "--":
            spread.extend(args[index:])
            break
        if pending:
            spread.append(arg)
            pending = False
        elif arg in options:
            spread.append(arg)
            current, pending = arg, True
        elif long_forms and arg.startswith(long_forms):
            spread.append(arg)
            current = arg.partition("=")[0]
        elif current and not arg.startswith("-") and accepts(arg):
            spread.extend((current, arg))
        else:
            spread.append(arg)
            current = None
    return spread


def template_values_spread(args: list[str]) -> list[str]:
    """``--set a=1 b=2`` (and ``--set-string``, ``--set-env``) as ``--set a=1 --set b=2``."""
    return option_values_spread(args, TEMPLATE_OPTIONS)


class TemplateValuesCommand(TyperCommand):
    """``submit`` and ``validate``: ``--set a=1 b=2`` read as ``--set a=1 --set b=2`` (OSMO's CLI)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, template_values_spread(args))


class StatusValuesCommand(TyperCommand):
    """``list``: ``--status RUNNING PENDING`` read as ``--status RUNNING --status PENDING`` (OSMO's CLI)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, option_values_spread(args, LIST_OPTIONS, is_value))


class TagValuesCommand(TyperCommand):
    """``tag``: ``--workflow a b --add x y`` read with each option repeated (OSMO's CLI)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, option_values_spread(args, TAG_OPTIONS, is_value))
