"""Values a process keeps between requests or cycles, with one rule for what is dropped.

Several reads of the hot paths give the same answer as long as some version of the pool stays the
same (its inventory epoch and keys version, the version of its node rows, docs/design.md §8): the
facts a submission is validated against, the idle pool a gang is checked on, the node rows a cycle
solves on, the domain tree a page draws. Each is kept here, in a :class:`ProcessCache`: at most
``size`` entries, the least recently used one dropped first (``cachetools.LRUCache``), safe across a
server's threads.

An entry may carry a ``version``: :meth:`ProcessCache.get` answers only when the version asked for is
the one stored. Keyed by the pool with the pool's version beside it, a cache keeps one entry per pool
and a new version replaces the old one in place (big values, such as a pool's 20,000 nodes, are never
kept twice for one pool); keyed by the version itself, it keeps several.

Not Django's cache framework: its local-memory backend pickles every value on the way in and out,
while these values are large (a pool's nodes, an aggregated index) or hold a lock, and are shared as
they are.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ProcessCache(Generic[K, V]):
    """At most ``size`` values by key, each with the version it was computed for (see the module)."""

    def __init__(self, name: str, *, size: int) -> None:
        self.name = name
        self._entries: LRUCache[K, tuple[Hashable, V]] = LRUCache(maxsize=size)
        self._lock = threading.Lock()

    def get(self, key: K, version: Hashable = None) -> V | None:
        """The value kept for ``key`` if it was computed for ``version``, else None."""
        with self._lock:
            entry = self._entries.get(key)
        if entry is None or entry[0] != version:
            return None
        return entry[1]

    def put(self, key: K, value: V, version: Hashable = None) -> None:
        """Keep ``value`` for ``key`` as of ``version`` (replacing what ``key`` held)."""
        with self._lock:
            self._entries[key] = (version, value)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"<ProcessCache {self.name}: {len(self)}/{self._entries.maxsize}>"
