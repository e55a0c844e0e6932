"""Structured reasons for "unschedulable" (docs/design.md §5, "Explained").

Called only after the search proved the required-only problem infeasible. It looks for the first
culprit in this order, using the aggregated per-domain counts of :class:`~scheduler.placement.search.GangSearch`:
1. a required node whose key is not a topology key of the pool;
2. in pre-order, a required node for which no domain of its key holds its subtree's tasks
   ("the largest free gpu-clique fits 3 of 4"; the whole pool's room is added when it is short too);
3. in pre-order, a required node for which no domain holds enough copies of its identical required
   child groups ("the best zone has room for 29 of 32 gpu-clique groups");
4. the gang as a whole (the pool's usable machines cannot hold all tasks);
5. otherwise the combination (each constraint fits alone, not all together).
The reason also carries totals and the machines excluded per cause. Pure and deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scheduler.placement.plan import NO_LEVEL, TreeIndex, build_plan
from scheduler.placement.search import GangSearch
from scheduler.placement.types import RESOURCE_NAMES, ReasonCode, Unplaceable


def _label(index: GangSearch, d: int) -> list[str]:
    return list(index.path[d])


def _shape_text(index: GangSearch, shapes: set[int]) -> str:
    if len(shapes) != 1:
        return f"({len(shapes)} shapes)"
    req = index.shapes[next(iter(shapes))].req
    for name, amount in zip(RESOURCE_NAMES, req, strict=True):
        if amount:
            unit = {"cpu": "m cpu", "memory": " B memory", "storage": " B storage"}.get(name, " gpu")
            return f"of {amount}{unit}"
    return "of no resources"


def _room(index: GangSearch, d: int, need: dict[int, int]) -> int:
    return sum(min(index.cap[d][s], k) for s, k in need.items())


def explain(
    index: GangSearch, ti: TreeIndex, task_shape: Sequence[int], culprit_key: int | None = None
) -> Unplaceable:
    keys = index.keys
    ntasks = len(ti.task_names)
    requested = [0, 0, 0, 0]
    for s in task_shape:
        for r in range(4):
            requested[r] += index.shapes[s].req[r]
    stats = index.stats
    base: dict[str, Any] = {
        "totals": {
            "tasks": ntasks,
            "requested": dict(zip(RESOURCE_NAMES, requested, strict=True)),
            "free_usable": dict(zip(RESOURCE_NAMES, index.tot[0], strict=True)),
            "machines": stats.machines,
            "usable_machines": sum(stats.depth),
        },
    }

    def excluded(level: int | None) -> dict[str, int]:
        missing = sum(stats.depth[: level + 1]) if level is not None else 0
        return {
            "cordoned": stats.cordoned,
            "nodes_excluded": stats.nodes_excluded,
            "missing_label": missing,
            "too_small": stats.too_small,
        }

    def node_info(i: int) -> dict[str, Any]:
        node = ti.nodes[i]
        return {
            "path": [list(p) for p in node.path],
            "key": node.key,
            "group": node.group,
            "requirement": node.requirement,
        }

    def done(code: ReasonCode, message: str, **extra: Any) -> Unplaceable:
        reason = {"code": code, **extra, **base}
        return Unplaceable(status="unschedulable", reason=reason, message=message)

    if culprit_key is not None:
        node = ti.nodes[culprit_key]
        return done(
            ReasonCode.UNKNOWN_KEY,
            f"{node.key}={node.group} (required): {node.key!r} is not a topology key of this pool",
            node=node_info(culprit_key),
            key=node.key,
            tasks_needed=len(ti.subtree[culprit_key]),
            excluded=excluded(None),
        )

    def need_of(tasks: Sequence[int]) -> dict[int, int]:
        need: dict[int, int] = {}
        for t in tasks:
            need[task_shape[t]] = need.get(task_shape[t], 0) + 1
        return need

    def total_of(tasks: Sequence[int]) -> list[int]:
        tot = [0, 0, 0, 0]
        for t in tasks:
            req = index.shapes[task_shape[t]].req
            for r in range(4):
                tot[r] += req[r]
        return tot

    def fits_tot(d: int, total: list[int]) -> bool:
        free = index.tot[d]
        return total[0] <= free[0] and total[1] <= free[1] and total[2] <= free[2] and total[3] <= free[3]

    gang_need = need_of(range(ntasks))
    gang_room = _room(index, 0, gang_need)
    if not fits_tot(0, total_of(range(ntasks))):
        gang_room = min(gang_room, ntasks - 1)
    required_only: list[int] = [
        (level if (level := ti.level[i]) is not None else NO_LEVEL) if node.required else NO_LEVEL
        for i, node in enumerate(ti.nodes)
    ]
    plan = build_plan(ti, required_only, list(task_shape), index.shapes)
    sub_tasks: list[list[int]] = [list(step.tasks) for step in plan.steps]
    for k in range(len(plan.steps) - 1, -1, -1):
        ctx = plan.steps[k].ctx
        if ctx >= 0:
            sub_tasks[ctx].extend(sub_tasks[k])
    for k, step in enumerate(plan.steps):
        i = step.node
        node = ti.nodes[i]
        tasks = sub_tasks[k]
        need = need_of(tasks)
        total = total_of(tasks)
        key = keys[step.level]
        domains = index.at_level(step.level)
        best_d, best_room = -1, -1
        for d in domains:
            r = _room(index, d, need) if fits_tot(d, total) else min(_room(index, d, need), len(tasks) - 1)
            if r > best_room:
                best_d, best_room = d, r
        label = f"{node.key}={node.group} ({node.requirement})"
        if best_room < len(tasks):
            where = (
                f"the largest free {key} fits {max(best_room, 0)} of {len(tasks)}" if domains else f"no {key} exists"
            )
            if gang_room < ntasks:
                where += f" (the whole pool fits {gang_room} of {ntasks})"
            return done(
                ReasonCode.NO_DOMAIN,
                f"{label} needs {len(tasks)} tasks {_shape_text(index, set(need))} in one {key}; {where}",
                node=node_info(i),
                key=key,
                tasks_needed=len(tasks),
                best_domain={"path": _label(index, best_d) if best_d >= 0 else None, "fits": max(best_room, 0)},
                domains=len(domains),
                excluded=excluded(step.level),
            )
        if step.blocks:
            wanted = sum(b.count for b in step.blocks)
            best_d, best_groups = -1, -1
            for d in domains:
                got = sum(min(index.block_room(d, b), b.count) for b in step.blocks)
                if got > best_groups:
                    best_d, best_groups = d, got
            if best_groups < wanted:
                child_key = keys[step.blocks[0].level] if len({b.level for b in step.blocks}) == 1 else "child"
                return done(
                    ReasonCode.NO_ROOM_FOR_GROUPS,
                    f"{label} needs {wanted} {child_key} groups ({len(tasks)} tasks) in one {key}; "
                    f"the best {key} has room for {best_groups} of {wanted}",
                    node=node_info(i),
                    key=key,
                    tasks_needed=len(tasks),
                    groups_needed=wanted,
                    best_domain={"path": _label(index, best_d) if best_d >= 0 else None, "groups": best_groups},
                    domains=len(domains),
                    excluded=excluded(step.level),
                )
    if gang_room < ntasks:
        room = gang_room
        what = _shape_text(index, set(gang_need))
        return done(
            ReasonCode.INSUFFICIENT_CAPACITY,
            f"the gang's {ntasks} tasks {what} do not fit in the pool; its free machines fit {room} of {ntasks}",
            node=None,
            key=None,
            tasks_needed=ntasks,
            best_domain={"path": [], "fits": room},
            excluded=excluded(None),
        )

    return done(
        ReasonCode.COMBINATION,
        f"each required constraint fits on its own, but no placement meets all of them for the {ntasks} tasks together",
        node=None,
        key=None,
        tasks_needed=ntasks,
        excluded=excluded(None),
    )
