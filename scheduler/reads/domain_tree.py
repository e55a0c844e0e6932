"""The values of a pool's domain tree (docs/pages.md): a domain with its GPU totals, its children and,
for the finest domains, its machines. Built by :mod:`scheduler.reads.domains` (read afresh) and
:mod:`scheduler.reads.domain_totals` (kept between reads); no database here."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

DomainPath = tuple[str | None, ...]


@dataclass(frozen=True, slots=True)
class DomainMachine:
    """One machine (node) of a finest domain, with its GPUs."""

    pk: int
    name: str
    schedulable: bool
    gpu: int
    gpu_used: int  # external usage (Node.used_gpu)
    gpu_reserved: int  # active reservations of this service's tasks
    gpu_free: int  # gpu - used - reserved; negative only when over-committed

    @property
    def gpu_in_use(self) -> int:
        return self.gpu_used + self.gpu_reserved


@dataclass(frozen=True, slots=True)
class Domain:
    """One domain of the hierarchy (or the pool itself at the root: key ``pool``, path ``()``)."""

    key: str
    value: str  # the label value; the pool's name at the root; "(no <key>)" for machines missing the label
    path: DomainPath
    gpu_capacity: int
    gpu_used: int
    gpu_reserved: int
    gpu_free: int
    node_count: int
    schedulable_node_count: int
    children: tuple[Domain, ...] = ()  # in natural order of value (rack2 before rack10)
    machines: tuple[DomainMachine, ...] | None = None  # finest domains only, when asked for; natural order

    @property
    def labelled(self) -> bool:
        """Whether every machine here carries the labels of this domain's path."""
        return None not in self.path

    @property
    def gpu_in_use(self) -> int:
        return self.gpu_used + self.gpu_reserved

    def child(self, value: str) -> Domain | None:
        return next((child for child in self.children if child.value == value), None)

    def walk(self) -> Iterator[Domain]:
        """This domain and every domain below it, parents first."""
        yield self
        for child in self.children:
            yield from child.walk()


@dataclass(frozen=True, slots=True)
class DomainTree:
    root: Domain
    keys: tuple[str, ...]
    unlabelled_node_count: int  # machines missing the label of at least one key
    machines_loaded: bool
    # Kept trees (scheduler.reads.domain_totals): changes whenever a node joins, leaves or moves to another
    # domain, not when only its capacity, usage or cordon changes. None: not known.
    paths_version: int | None = field(default=None, compare=False)
