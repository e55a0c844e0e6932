"""What one placement cycle hands to the next (stored as JSON, one row per pool:
:class:`workflows.models.PoolCycleState`), and
the one place that decides what of it still stands (:meth:`CycleState.carried`).

A complete walk leaves the queue it saw (a fingerprint of its group ids), the capacity epoch and the
pool's keys version: while all three are unchanged, no gang waits on a stopped walk (``cursor``) and
no queued gang has crossed a time the walk named (``wake_at``), its decisions stand and the next cycle
does not walk (idle). Otherwise the next walk carries on from what is still true:

- ``cursor``: where a walk ran out of its time budget; the next starts there, ordering the queue by the
  fair-share usage the stopped walk saw (``usage``), so a team's place does not move under the cursor;
- ``proofs``: signatures proven unschedulable, valid while the capacity epoch they were made at
  (``proofs_epoch``) is current;
- ``blocked_since``: when each gang waiting before it evicts (the pool's minimum runtime) first did not
  fit within its quota; kept for the gangs still queued.

An undecided gang or a verdict that is no proof (``Decision.retry``) leaves no epoch: the next cycle
walks again."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from workflows.scheduling.cycle.values import CycleInput, Decision


def fingerprint(pks: Sequence[int]) -> list[int]:
    """Which gangs are queued: count, sum, sum of squares and maximum of their ids (equal fingerprints
    mean an unchanged queue for any change that adds or removes gangs short of a contrived collision of
    all four). :func:`~workflows.scheduling.cycle.read.queue_fingerprint` computes the same in SQL."""
    return [len(pks), sum(pks), sum(i * i for i in pks), max(pks, default=0)]


class Carried(NamedTuple):
    """What a cycle that walks takes from the state the previous one left."""

    cursor: list[Any] | None  # resume here (None: from the start of the queue)
    usage: dict[int | None, float] | None  # the fair-share usage to order by when resuming (None: read it)
    proofs: dict[str, int]  # signature -> capacity epoch, all of the current epoch
    blocked_since: dict[int, float]  # group id -> since when it waits before evicting


@dataclass(frozen=True, slots=True)
class CycleState:
    """The state between two cycles of one pool (see the module docstring)."""

    fingerprint: tuple[int, ...] | None = None  # the queue the last walk left
    epoch: int | None = None  # capacity epoch its decisions stand at (None: walk again)
    keys_version: int | None = None
    cursor: list[Any] | None = None
    usage: tuple[tuple[int | None, float], ...] | None = None
    wake_at: datetime | None = None
    proofs: Mapping[str, int] = field(default_factory=dict)
    proofs_epoch: int | None = None
    blocked_since: Mapping[int, float] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> CycleState:
        data = data or {}
        wake, usage, fp = data.get("wake_at"), data.get("usage"), data.get("fingerprint")
        return cls(
            fingerprint=tuple(fp) if fp is not None else None, epoch=data.get("epoch"),
            keys_version=data.get("keys_version"), cursor=data.get("cursor"),
            usage=tuple((team, value) for team, value in usage) if usage is not None else None,
            wake_at=datetime.fromisoformat(wake) if wake else None,
            proofs=dict(data.get("proofs") or {}), proofs_epoch=data.get("proofs_epoch"),
            blocked_since={int(pk): float(at) for pk, at in (data.get("blocked_since") or {}).items()},
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "cursor": self.cursor, "fingerprint": list(self.fingerprint) if self.fingerprint is not None else None,
            "epoch": self.epoch, "keys_version": self.keys_version,
            "wake_at": self.wake_at.isoformat() if self.wake_at is not None else None,
            "proofs": dict(self.proofs), "proofs_epoch": self.proofs_epoch,
            "usage": [[team, value] for team, value in self.usage] if self.usage is not None else None,
            "blocked_since": {str(pk): at for pk, at in self.blocked_since.items()},
        }

    def carried(self, *, fingerprint: Sequence[int], capacity_epoch: int, keys_version: int,
                now: datetime) -> Carried | None:
        """What of this state a cycle that starts at ``now`` on this queue, capacity epoch and keys may
        use; None when the last walk's decisions still stand (the cycle is idle)."""
        if (not self.cursor and self.fingerprint == tuple(fingerprint) and self.epoch == capacity_epoch
                and self.keys_version == keys_version and (self.wake_at is None or now < self.wake_at)):
            return None
        return Carried(
            cursor=self.cursor,
            usage={team: value for team, value in self.usage} if self.cursor and self.usage is not None else None,
            proofs=dict(self.proofs) if self.proofs_epoch == capacity_epoch else {},
            blocked_since=dict(self.blocked_since),
        )

    @classmethod
    def after(cls, cycle: CycleInput, decision: Decision, *, gone: set[int]) -> CycleState:
        """What a walk of ``cycle`` that decided ``decision`` leaves for the next cycle. ``gone``: the
        gangs it placed or failed (the rest stays queued; rows committed by others meanwhile make the
        next fingerprint differ, which only costs that cycle a walk). An undecided gang is retried by
        the next cycle: no idle skip after one, nor after a verdict that is no proof."""
        return cls(
            fingerprint=tuple(fingerprint([g.pk for g in cycle.queue if g.pk not in gone])),
            epoch=None if decision.undecided or decision.retry else cycle.capacity_epoch,
            keys_version=cycle.keys_version, cursor=decision.cursor,
            usage=None if decision.cursor is None or cycle.usage is None else tuple(cycle.usage.items()),
            wake_at=datetime.fromisoformat(decision.wake_at) if decision.wake_at else None,
            proofs=dict(decision.proofs), proofs_epoch=cycle.capacity_epoch,
            blocked_since=dict(decision.blocked_since),
        )
