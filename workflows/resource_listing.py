"""The nodes of the pools a user may see, with capacity, use and the workflows holding them
(``GET /api/resources/``, ``osmo resource list|info``; OSMO's resource list). Here rather than in the
scheduler app because a node's holders are workflows: a reservation names its task only.

Visibility follows the API's: the pools of :func:`scheduler.services.access.pools_visible`, and of the
workflows holding a node only those the user may see are named (:func:`workflows.visibility.workflow_owner_visible`);
the others are counted, never named."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from django.db.models import QuerySet

from osmo.errors import NotFoundError, ValidationFailedError
from osmo.types import Viewer
from scheduler.models import Node, Pool, PoolPlatform, Reservation
from scheduler.selectors import node_queryset_with_usage, node_usage_dict
from scheduler.services.access import PoolForbiddenError, pools_visible
from workflows.holders import held_by
from workflows.visibility import workflow_owner_visible

MAX_VALUES = 100


def resource_pools(*, user: Viewer, names: Sequence[str]) -> QuerySet[Pool]:
    """The pools named (every visible one when none is): 404 for a name no pool has, 403 for one the user
    may not see, each naming the pool (``details.pool``)."""
    if len(names) > MAX_VALUES or any("\x00" in name for name in names):
        raise ValidationFailedError([{"path": "pool", "message": f"at most {MAX_VALUES} pool names, no NUL"}])
    visible = pools_visible(Pool.objects.all(), user=user)
    if not names:
        return visible
    existing = set(Pool.objects.filter(name__in=names).values_list("name", flat=True))
    allowed = set(visible.filter(name__in=names).values_list("name", flat=True))
    for name in names:
        if name not in existing:
            raise NotFoundError(f"Pool {name!r} not found.", details={"pool": name})
        if name not in allowed:
            raise PoolForbiddenError(f"You have no access to pool {name!r}.", details={"pool": name})
    return visible.filter(name__in=names)


def resource_nodes(*, pools: QuerySet[Pool], platforms: Sequence[str] = (), name: str | None = None) -> QuerySet[Node]:
    """Nodes of ``pools`` (of the platforms named: nodes carrying every label of one platform's selector),
    annotated with their use, by pool and name."""
    nodes = node_queryset_with_usage().filter(pool__in=pools.values("pk")).select_related("pool")
    if name is not None:
        nodes = nodes.filter(name=name)
    if platforms:
        if len(platforms) > MAX_VALUES or any("\x00" in value for value in platforms):
            raise ValidationFailedError([{"path": "platform", "message": f"at most {MAX_VALUES} names, no NUL"}])
        selectors = list(PoolPlatform.objects.filter(pool__in=pools.values("pk"), name__in=platforms)
                         .values_list("pool_id", "node_selector"))
        if not selectors:
            raise ValidationFailedError([{"path": "platform", "message": f"no pool shown has a platform named "
                                                                         f"{', '.join(platforms)[:120]!r}"}])
        ids = [node.pk for node in Node.objects.filter(pool_id__in={pool for pool, _ in selectors}).only(
            "pk", "pool_id", "labels") if any(pool == node.pool_id and _selects(selector, node.labels)
                                               for pool, selector in selectors)]
        nodes = nodes.filter(pk__in=ids)
    return nodes.order_by("pool__name", "name", "pk")


def _selects(selector: Any, labels: Any) -> bool:
    return isinstance(selector, dict) and isinstance(labels, dict) and all(
        labels.get(key) == value for key, value in selector.items())


def node_rows(nodes: Iterable[Node], *, user: Viewer) -> list[dict[str, Any]]:
    """Each node as the API answers it: three queries (platforms, holders) whatever the number of nodes."""
    nodes = list(nodes)
    platforms: dict[int, list[tuple[str, Any]]] = defaultdict(list)
    for pool_id, platform, selector in PoolPlatform.objects.filter(
            pool_id__in={node.pool_id for node in nodes}).order_by("name").values_list("pool_id", "name",
                                                                                       "node_selector"):
        platforms[pool_id].append((platform, selector))
    holders: dict[int, dict[tuple[str, int | None, str], dict[str, int]]] = defaultdict(dict)
    held = (Reservation.objects.filter(node_id__in=[node.pk for node in nodes], released_at__isnull=True)
            .annotate(wf=held_by("workflow__workflow_id"), owner_id=held_by("workflow__submitted_by_id"),
                      owner=held_by("workflow__submitted_by__username"))
            .values_list("node_id", "wf", "owner_id", "owner", "gpu"))
    for node_id, workflow_id, owner_id, owner, gpu in held:
        entry = holders[node_id].setdefault((str(workflow_id or ""), owner_id, str(owner or "")),
                                            {"tasks": 0, "gpu": 0})
        entry["tasks"] += 1
        entry["gpu"] += gpu
    rows = []
    for node in nodes:
        shown, hidden = [], 0
        for (workflow_id, owner_id, owner), counts in sorted(holders[node.pk].items(), key=lambda item: item[0][0]):
            if workflow_owner_visible(user, owner_id):
                shown.append({"workflow_id": workflow_id, "user": owner, **counts})
            else:
                hidden += 1
        usage = node_usage_dict(node)
        rows.append({
            "node": node.name, "pool": node.pool.name,
            "platforms": [name for name, selector in platforms[node.pool_id] if _selects(selector, node.labels)],
            "resource_type": "GPU" if usage["capacity"]["gpu"] else "CPU",
            "schedulable": node.schedulable, "labels": node.labels, **usage,
            "workflows": shown, "other_workflows": hidden,
        })
    return rows


def resource_info(*, user: Viewer, name: str, pools: Sequence[str],
                  platforms: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The node ``name`` in every pool shown (``pools``, else the visible ones; of ``platforms``, when given,
    only where it is a node of one of them); 404 when none has it."""
    if "\x00" in name:
        raise NotFoundError(f"Node {name[:80]!r} not found.", details={"node": name[:80]})
    rows = node_rows(resource_nodes(pools=resource_pools(user=user, names=pools), platforms=platforms, name=name),
                     user=user)
    if not rows:
        where = f" as a node of platform {', '.join(platforms)[:80]!r}" if platforms else ""
        raise NotFoundError(f"Node {name[:80]!r} is not in any pool you can see{where}.",
                            details={"node": name[:80]})
    configs = {(pool, platform): config for pool, platform, *config in PoolPlatform.objects.filter(
        pool__name__in={row["pool"] for row in rows}).values_list(
        "pool__name", "name", "allow_host_network", "allow_privileged", "host_mounts")}
    for row in rows:
        wanted = [name for name in row["platforms"] if not platforms or name in platforms]
        row["platform_configs"] = [
            {"platform": name, "host_network": host_network, "privileged": privileged,
             "allowed_mounts": list(mounts or [])}
            for name in wanted for host_network, privileged, mounts in [configs[(row["pool"], name)]]]
    return rows


__all__ = ["node_rows", "resource_info", "resource_nodes", "resource_pools"]
