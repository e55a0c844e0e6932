"""Natural order of names: digit runs compare by value, so ``shard2`` sorts before ``shard10`` and
``node-9`` before ``node-10``. Pure: stdlib only.

The one implementation for every place that lists names to people: document errors by path
(:mod:`parsing.errors`), the status pages (tasks, pools, nodes, domains) and the CLI's tables. It
lives in ``parsing`` because that package sits at the bottom of the import layers and the CLI may
import it (``pyproject.toml``, ``[tool.importlinter]``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import TypeVar

_DIGITS = re.compile(r"(\d+)")

NaturalKey = tuple[tuple[int, int | str], ...]
T = TypeVar("T")


def natural_key(text: object) -> NaturalKey:
    """Sort key that orders digit runs by value: ``shard2`` < ``shard10``, ``[2]`` < ``[10]``.

    Non-strings are compared by their ``str``; ``None`` sorts as the empty string.
    """
    value = "" if text is None else str(text)
    # re.split with one group: the digit runs are the odd parts.
    return tuple(
        (0, int(part)) if index % 2 else (1, part) for index, part in enumerate(_DIGITS.split(value)) if part
    )


def natural_sorted(items: Iterable[T], *, key: Callable[[T], object] | None = None) -> list[T]:
    """``items`` in natural order of ``key(item)`` (of the item itself without ``key``)."""
    if key is None:
        return sorted(items, key=natural_key)
    by = key
    return sorted(items, key=lambda item: natural_key(by(item)))
