"""Named values the search's modules pass between them (the domain phase, the packing and the CP-SAT
adapter). Pure: stdlib only. Ids are indices: a task index (tree order), a shape index, a domain id of
the :class:`~scheduler.placement.index.DomainIndex`.
"""

from __future__ import annotations

from typing import NamedTuple

from scheduler.placement.types import Vec

#: Builds a record without its NamedTuple constructor's Python-level call (which is
#: ``tuple.__new__(cls, (fields...))`` itself): the packing makes one per task placed, so
#: ``record(Seat, (machine, domain))`` there keeps the solver as fast as plain tuples did.
record = tuple.__new__

#: A machine class of the index: (free capacity, special name or ""); machines of one class in one
#: domain are interchangeable (see :mod:`scheduler.placement.index`).
ClassKey = tuple[Vec, str]


class Slot(NamedTuple):
    """One task in a packing sequence: the packing puts ``task`` (of ``shape``) on a machine under its
    bound ``domain``. A ``bundle`` is the tasks of one tree node in one bound domain (a relaxed
    preferred node's bundle is packed into the fewest domains of its own level)."""

    task: int
    shape: int
    domain: int
    bundle: int


class Seat(NamedTuple):
    """Where the packing put one task: the machine's name and its finest domain."""

    machine: str
    domain: int


NO_SEAT = Seat("", -1)


class Component(NamedTuple):
    """A packed component: its task indices and, position by position, where each one sits."""

    tasks: list[int]
    seats: list[Seat]


class Move(NamedTuple):
    """One machine taken by a task of ``shape`` (undone by
    :meth:`~scheduler.placement.machines.Machines.unplace`): the class the machine left (``before``) and
    the one it joined (``after``; None when it fits no shape any more)."""

    domain: int
    before: ClassKey
    after: ClassKey | None
    machine: str
    shape: int
