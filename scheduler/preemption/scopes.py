"""Where an irreducible victim set can lie (docs/design.md §9, step 3 of
:mod:`scheduler.preemption.search`): when one required constraint holds every task of the preemptor,
every placement lies in one domain of its finest such key, so the search runs per domain, on that
domain's machines, with the candidates holding capacity there. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.placement import GangRequest, Vec
from scheduler.preemption.feasibility import ZERO, Feasibility, add, vec


@dataclass(slots=True)
class Scope:
    """Where a placement can lie: its machines, the candidates holding capacity there (``mask``), the
    capacity the preemptor needs beyond what is free there (``missing``), and what each candidate of
    ``mask`` frees there (``release``, by candidate; the others free nothing there). ``pool``: the
    feasibility questions asked of these machines only (built when the scope is first searched)."""

    machines: frozenset[str]
    mask: int
    missing: Vec
    release: dict[int, Vec]
    pool: Feasibility | None = None
    # Built on the first bound (``_Search.presort``): per resource, the candidates of ``mask``
    # largest release first, and by work per unit released (the cheapest first).
    largest: list[list[tuple[int, int]]] | None = None
    cheapest: list[list[tuple[float, int, int]]] | None = None
    borrowing: int = 0  # the borrowing candidates of ``mask``


def domain_level(preemptor: GangRequest, keys: tuple[str, ...]) -> int | None:
    """The finest level at which one required constraint holds every task of the preemptor (a chain of
    single required children from the root), or None when there is none."""
    tree = preemptor.tree
    if tree.tasks:
        return None
    found = None
    children = tree.children
    while len(children) == 1 and children[0].required and children[0].key in keys:
        node = children[0]
        found = keys.index(node.key)
        if node.tasks:
            break
        children = node.children
    return found


def scopes_build(pool: Feasibility, usable: frozenset[str]) -> list[Scope]:
    """The scopes of a search: one per domain of the level that holds the whole preemptor (an
    irreducible victim set lies in the domain its placement uses), else the whole pool."""
    demand = ZERO
    for task in pool.preemptor.tasks:
        demand = add(demand, vec(task.resources))
    level = domain_level(pool.preemptor, pool.snapshot.keys)
    regions: dict[tuple[str | None, ...], set[str]] = {}
    for node in pool.snapshot.nodes:
        if node.name in usable:
            regions.setdefault(() if level is None else node.labels[: level + 1], set()).add(node.name)
    region_of: dict[str, int] = {}
    paths = sorted(regions, key=lambda path: tuple(str(x) for x in path))
    for r, path in enumerate(paths):
        for name in regions[path]:
            region_of[name] = r
    frees: list[Vec] = [ZERO] * len(paths)
    for node in pool.snapshot.nodes:
        at = region_of.get(node.name)
        if at is not None:
            frees[at] = add(frees[at], tuple(max(0, x) for x in vec(node.free)))  # type: ignore[arg-type]
    releases: list[dict[int, Vec]] = [{} for _ in paths]
    for i, per_node in pool.held.items():
        for name, v in per_node.items():
            at = region_of.get(name)
            if at is not None:
                have = releases[at].get(i)
                releases[at][i] = v if have is None else add(have, v)
    scopes = []
    for r in range(len(paths)):
        release = {i: v for i, v in releases[r].items() if v != ZERO}
        mask = borrowing = 0
        for i in release:
            mask |= 1 << i
            if pool.candidates[i].borrowing:
                borrowing |= 1 << i
        missing = tuple(d - f for d, f in zip(demand, frees[r], strict=True))
        scopes.append(Scope(frozenset(regions[paths[r]]), mask, missing, release,  # type: ignore[arg-type]
                            borrowing=borrowing))
    if len(scopes) == 1 and level is None:
        scopes[0].pool = pool  # the whole pool: its own questions
    return scopes
