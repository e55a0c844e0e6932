"""The reasons the walk gives queued gangs besides the solver's (docs/design.md §6), and
:class:`Reason`, a reason shared by the gangs given it. No database here."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from scheduler.placement import ReasonCode
from scheduler.results import reason_digest

BEHIND_STARVING: dict[str, Any] = {
    "status": "waiting",
    "code": ReasonCode.BEHIND_STARVING_GROUP.value,
    "message": ("waiting: an older gang that does not fit yet goes first (the machines kept for it are not "
                "available to this one)"),
}


def behind_hold(where: str, free_by: float, has_timeout: bool) -> Reason:
    """The reason of a gang kept off the machines held for the starving gang ahead of it (EASY backfill,
    docs/design.md §6): only gangs whose exec_timeout ends by the time they are free may use them."""
    at = datetime.fromtimestamp(free_by, tz=UTC)
    why = "its exec_timeout ends later" if has_timeout else "it has no exec_timeout"
    return Reason({
        **BEHIND_STARVING, "holding": {"where": where, "free_by": at.isoformat()},
        "message": (f"waiting: an older gang that does not fit yet goes first; {where} is kept for it (free by "
                    f"{at:%H:%M} UTC), only gangs that end by then may use it, and {why}")})


def behind_keep(where: str, until: float | None, has_timeout: bool) -> Reason:
    """The reason of a LOW gang kept off the machines a HIGH or NORMAL gang waits for before it evicts
    LOW work there (docs/design.md §9, waiting before evicting): only gangs whose exec_timeout ends by
    then may use them. ``until`` None: the gang waits for them to free, evicting nothing there (the
    eviction window), and no gang may use them."""
    if until is None:
        return Reason({
            **BEHIND_STARVING, "keeping": {"where": where, "until": None},
            "message": (f"waiting: {where} is kept for a higher-priority gang that waits for it to free without "
                        "evicting the LOW work there (the pool's minimum runtime)")})
    at = datetime.fromtimestamp(until, tz=UTC)
    why = "its exec_timeout ends later" if has_timeout else "it has no exec_timeout"
    return Reason({
        **BEHIND_STARVING, "keeping": {"where": where, "until": at.isoformat()},
        "message": (f"waiting: {where} is kept for a higher-priority gang that evicts the LOW work there at "
                    f"{at:%H:%M} UTC unless it frees sooner (the pool's minimum runtime); only gangs that end by "
                    f"then may use it, and {why}")})


class Reason:
    """A verdict's reason (a few KB of JSON), shared by every gang given it in one walk: its digest and
    its "not even on the idle pool" variant are made once (``json.dumps`` of a reason is ~10 us, and
    a release makes every queued gang's reason be compared again)."""

    __slots__ = ("body", "_digest", "_never_idle")

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self._digest: str | None = None
        self._never_idle: Reason | None = None

    @property
    def code(self) -> str:
        return str(self.body.get("code", ""))[:40]

    def digest(self) -> str:
        if self._digest is None:
            self._digest = reason_digest(self.body)
        return self._digest

    def preemptible_at(self, when: float, where: list[str]) -> Reason:
        """The verdict, saying when the LOW gangs in the gang's way become preemptible (they have run
        less than the pool's minimum runtime; docs/design.md §9)."""
        at = datetime.fromtimestamp(when, tz=UTC)
        them = "a LOW gang" if len(where) == 1 else "LOW gangs"
        verb = "becomes" if len(where) == 1 else "become"
        return Reason({
            **self.body, "preemptible_at": at.isoformat(),
            "message": (f"{self.body.get('message', '')}; {them} on {', '.join(where)} {verb} preemptible at "
                        f"{at:%H:%M} UTC (the pool's minimum runtime)")})

    def evicts_at(self, until: float, where: str) -> Reason:
        """The verdict of a gang that could start by evicting LOW work but waits first (the pool's
        minimum runtime, docs/design.md §9): which machines it keeps from LOW work meanwhile and when
        it evicts the LOW work there if they have not freed by then."""
        at = datetime.fromtimestamp(until, tz=UTC)
        return Reason({
            **self.body, "keeping": {"where": where, "until": at.isoformat()},
            "message": (f"{self.body.get('message', '')}; keeping {where} from LOW work, and evicting the LOW work "
                        f"there at {at:%H:%M} UTC if it has not freed by then (the pool's minimum runtime)")})

    def keeps(self, where: str, window: float | None) -> Reason:
        """The verdict of a gang that found no LOW work to evict and waits, keeping its placement without
        LOW work from LOW gangs (the pool's minimum runtime, docs/design.md §9): ``window``, NORMAL
        work's bound in seconds on how long a LOW gang may have run to be evicted (None: HIGH work)."""
        why = ("" if window is None else f"NORMAL work evicts only LOW work that has run at most {window / 60:g} "
               "min (twice the pool's minimum runtime), so ")
        return Reason({
            **self.body, "keeping": {"where": where, "until": None},
            "message": (f"{self.body.get('message', '')}; {why}keeping {where} from LOW work until it frees "
                        "(the pool's minimum runtime)")})

    def holding(self, where: str, free_by: float, bounded: bool) -> Reason:
        """The starving gang's verdict, saying which machines are kept for it and by when they are free
        (the hold by expected end, docs/design.md §6): "at the latest" when every gang on them ends by
        its exec_timeout, "expected" when some end is estimated."""
        at = datetime.fromtimestamp(free_by, tz=UTC)
        when = "at the latest" if bounded else "expected (a gang there has no exec_timeout: estimated)"
        return Reason({
            **self.body, "holding": {"where": where, "free_by": at.isoformat(), "bounded": bounded},
            "message": f"{self.body.get('message', '')}; holding {where}, free by {at:%H:%M} UTC {when}"})

    def never_idle(self) -> Reason:
        """The verdict, saying the gang does not fit the idle pool either (one per shared verdict, so
        that gangs sharing one still share its digest and its write)."""
        if self._never_idle is None:
            self._never_idle = Reason({
                **self.body, "fits_empty_pool": False,
                "message": f"{self.body.get('message', '')} (it does not fit even when the pool is idle)"})
        return self._never_idle


def keys_changed_reason(
    constraint_tree: dict[str, Any], pool_keys: list[list[str]], pool_name: str, key_labels: list[tuple[str, str]]
) -> dict[str, Any] | None:
    """A queued group whose tree uses a key that was removed, relabelled, or keys whose order changed
    since submission is not placed under the new semantics: it waits with this reason."""
    keys = [key for key, _label in key_labels]
    position = {key: index for index, key in enumerate(keys)}
    label_now = dict(key_labels)
    label_then = {key: label for key, label in pool_keys or []}
    missing: set[str] = set()
    relabelled: set[str] = set()
    reordered = False

    def walk(node: dict[str, Any], parent_index: int) -> None:
        nonlocal reordered
        key = node["key"]
        if key not in position:
            missing.add(key)
        else:
            if position[key] <= parent_index:
                reordered = True
            if key in label_then and label_then[key] != label_now[key]:
                relabelled.add(key)
        for child in node.get("children", []):
            walk(child, position.get(key, parent_index))

    for child in (constraint_tree or {}).get("children", []):
        walk(child, -1)
    if not (missing or relabelled or reordered):
        return None
    what = []
    if missing:
        what.append(f"removed key(s) {', '.join(sorted(missing))}")
    if relabelled:
        what.append(f"key(s) {', '.join(sorted(relabelled))} now read another node label")
    if reordered:
        what.append("a changed key order")
    return {
        "status": "unschedulable",
        "code": ReasonCode.POOL_KEYS_CHANGED.value,
        "missing_keys": sorted(missing),
        "relabelled_keys": sorted(relabelled),
        "reordered": reordered,
        "pool_keys": keys,
        "message": f"pool {pool_name} topology keys changed since submission ({'; '.join(what)}); this group's "
        "constraint tree no longer means the same thing. Cancel and resubmit it.",
    }
