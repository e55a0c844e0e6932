"""Checks shared by the pipeline tests: placements meet their trees; no node is ever over-committed."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from scheduler.models import Node, Pool, Reservation
from workflows.models import PoolCycleState, TaskGroup


def domain_of(node: Node, keys: list[tuple[str, str]], key: str) -> tuple[str, ...]:
    """The node's full label path down to ``key`` (domain identity, docs/design.md §4)."""
    path = []
    for name, label in keys:
        path.append(node.labels.get(label))
        if name == key:
            return tuple(path)
    raise KeyError(key)


def assert_required_constraints_hold(group: TaskGroup) -> None:
    keys = [(k.key, k.label) for k in group.workflow.pool.topology_keys.order_by("position")]
    nodes = {t.name: t.node for t in group.tasks.select_related("node")}

    def walk(node: dict) -> list[str]:
        tasks = list(node.get("tasks", []))
        for child in node.get("children", []):
            tasks += walk(child)
        if node.get("requirement") == "required":
            domains = {domain_of(nodes[t], keys, node["key"]) for t in tasks}
            assert len(domains) == 1, f"{node['path']} spans {domains}"
        return tasks

    for child in group.constraint_tree.get("children", []):
        walk(child)


def assert_never_overcommitted(pool) -> None:
    """Replay every reservation (held from created_at to released_at) per node in time order and
    check that capacity minus external usage is never exceeded in any resource at any point."""
    events: dict[int, list[tuple]] = defaultdict(list)
    for r in Reservation.objects.filter(pool=pool):
        amounts = (r.gpu, r.cpu_millis, r.memory_bytes, r.storage_bytes)
        events[r.node_id].append((r.created_at, 1, amounts))
        if r.released_at is not None:
            events[r.node_id].append((r.released_at, 0, tuple(-a for a in amounts)))
    nodes = {n.pk: n for n in Node.objects.filter(pool=pool)}
    for node_id, node_events in events.items():
        node = nodes[node_id]
        room = (node.gpu - node.used_gpu, node.cpu_millis - node.used_cpu_millis,
                node.memory_bytes - node.used_memory_bytes, node.storage_bytes - node.used_storage_bytes)
        held = [0, 0, 0, 0]
        # releases (0) sort before acquisitions (1) at the same instant
        for _at, _kind, amounts in sorted(node_events, key=lambda e: (e[0], e[1])):
            held = [h + a for h, a in zip(held, amounts, strict=True)]
            assert all(h <= cap for h, cap in zip(held, room, strict=True)), f"{node.name} over-committed: {held}"


def assert_reservations_match_tasks(pool) -> None:
    """A reservation is active exactly while its task holds capacity (INITIALIZING or RUNNING):
    a finished task with an active reservation leaks capacity; an active task without one is
    running on capacity the scheduler believes free."""
    from workflows.models import Task

    active = {"INITIALIZING", "RUNNING"}
    tasks = Task.objects.filter(workflow__pool=pool)
    released_at = dict(Reservation.objects.filter(task_id__in=tasks.values("pk")).values_list("task_id", "released_at"))
    for task in tasks:
        holding = task.pk in released_at and released_at[task.pk] is None
        assert holding == (task.status in active), f"{task}: {task.status}, reservation active={holding}"


def gang_spec(name: str, tasks: int, gpu: int, *, key: str | None = "rack", extra: str = "", env: str = "") -> str:
    """One group ``g`` of ``tasks`` tasks t0.. (t0 the lead), each ``gpu`` GPUs, one ``key`` constraint."""
    lines = [f"workflow:\n  name: {name}\n{extra}  groups:\n  - name: g\n    tasks:"]
    for index in range(tasks):
        lead = "lead: true, " if index == 0 else ""
        lines.append(f"    - {{name: t{index}, {lead}image: busybox, command: [true]{env}}}")
    topology = f", topology: [{{key: {key}}}]" if key else ""
    lines.append(f"resources:\n  default: {{gpu: {gpu}{topology}}}")
    return "\n".join(lines) + "\n"


#: Two groups: ``second`` waits for ``first``.
CHAIN_SPEC = """
workflow:
  name: chain
  groups:
  - name: first
    tasks:
    - {name: a, lead: true, image: busybox, command: [true]}
  - name: second
    tasks:
    - {name: b, lead: true, image: busybox, command: [true], inputs: [{task: a}]}
resources:
  default: {gpu: 1}
"""


def backend_use(monkeypatch, backend) -> None:
    """Make ``backend`` the one every pool's pods go through, for dispatch (creating pods) and sync
    (following them) alike."""
    from workflows.scheduling import gang_dispatch, pods

    for module in (gang_dispatch, pods):
        monkeypatch.setattr(module, "backend_for", lambda name, **kw: backend)


def cycle_cursor_set(pool: Pool, cursor: Any) -> None:
    """Make the pool's next cycle resume at ``cursor``, as after a cycle that ran out of its budget there."""
    stored = PoolCycleState.objects.filter(pool=pool).values_list("state", flat=True).first() or {}
    PoolCycleState.objects.update_or_create(pool=pool, defaults={"state": {**stored, "cursor": cursor}})
