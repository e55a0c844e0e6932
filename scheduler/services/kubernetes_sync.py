"""The Kubernetes node sync (docs/design.md §7): the cluster's Node objects as the pool's nodes, written
through the inventory import's :func:`~scheduler.services.inventory.nodes_apply` (rows that differ only,
nodes the cluster no longer lists cordoned), other tenants' pods counted as used capacity, and the
nodes of refused or lost pods followed one by one. Reads page through the API with ``continue`` tokens,
starting again when a token goes stale.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from scheduler.inventory import (
    INVENTORY_RESOURCES,
    NodeSpec,
    foreign_usage,
    kubernetes_node_to_spec,
    node_list_arguments,
    node_list_page,
    node_pod_list_arguments,
    node_ready,
    pod_list_arguments,
)
from scheduler.models import Node, Pool
from scheduler.services.inventory import DryRunRollback, ImportReport, Progress, import_finish, nodes_apply
from scheduler.services.reservations import pool_capacity_changed

logger = logging.getLogger(__name__)

# A stale ``continue`` token (the apiserver compacted the list's resource version) is answered 410 Gone;
# A stale ``continue`` token (the apiserver compacted the list's resource version) is answered 410 Gone;
# the listing starts again from the first page, at most this many times.
LIST_RESTARTS = 3
#: (connect, read) seconds of every call the syncs make: a cluster that accepts connections and never
#: answers costs its own backend's sync this long per call, never more (docs/design.md §6, "Backends").
SYNC_REQUEST_TIMEOUT = (5.0, 30.0)


def _fold_pages(call: Callable[..., Any], arguments: Callable[[str | None], dict[str, Any]],
                fold: Callable[[list[Mapping[str, Any]]], None], restart: Callable[[], None]) -> int:
    """Hand every page of a paginated Kubernetes list (``metadata.continue``) to ``fold``, one page in
    memory at a time; on 410 Gone for a continued page, ``restart()`` (forget what was folded) and list
    again from the first page. Returns the number of requests made."""
    from kubernetes.client.exceptions import ApiException

    requests = 0
    restarts = 0
    while True:
        token: str | None = None
        try:
            while True:
                requests += 1
                page = node_list_page(call(**arguments(token), _request_timeout=SYNC_REQUEST_TIMEOUT).data)
                fold(page.items)
                token = page.continue_token
                if not token:
                    return requests
        except ApiException as exc:
            if exc.status != 410 or token is None or restarts >= LIST_RESTARTS:
                raise
            restarts += 1
            restart()
            logger.info("kubernetes.list_restarted", extra={"requests": requests, "restarts": restarts})


def _list_pages(call: Callable[..., Any], arguments: Callable[[str | None], dict[str, Any]]
                ) -> tuple[list[Mapping[str, Any]], int]:
    """Every item of a paginated Kubernetes list (:func:`_fold_pages`), and the number of requests made."""
    items: list[Mapping[str, Any]] = []
    requests = _fold_pages(call, arguments, items.extend, items.clear)
    return items, requests


def kubernetes_nodes_list(
    core_v1: Any, *, label_selector: str | None, page_size: int = 500
) -> tuple[list[Mapping[str, Any]], int]:
    """All nodes matching ``label_selector``, following ``metadata.continue`` pages (restarted on 410
    Gone). Returns the raw JSON items and the number of requests made. ``core_v1`` is a
    ``kubernetes.client.CoreV1Api``."""
    return _list_pages(core_v1.list_node, lambda token: node_list_arguments(
        label_selector=label_selector, page_size=page_size, continue_token=token))


def kubernetes_pods_list(core_v1: Any, *, page_size: int = 500) -> tuple[list[Mapping[str, Any]], int]:
    """Every non-terminal pod of every namespace (one paginated listing, ``ceil(pods / page_size)``
    requests however many nodes the pools have), and the number of requests made."""
    return _list_pages(core_v1.list_pod_for_all_namespaces,
                       lambda token: pod_list_arguments(page_size=page_size, continue_token=token))


def kubernetes_foreign_usage(
    core_v1: Any, *, nodes: Sequence[str], managed_by_label: str, managed_by: str, page_size: int = 500
) -> tuple[dict[str, dict[str, int]], int, int]:
    """The requests of the other pods on ``nodes`` summed per node (:func:`scheduler.inventory.foreign_usage`;
    only nodes some such pod is on), page by page of one listing of every namespace's non-terminal pods
    (one page in memory at a time). Returns the usage, the pods counted and the requests made."""
    usage: dict[str, dict[str, int]] = {}
    counted = 0
    members = frozenset(nodes)

    def fold(items: list[Mapping[str, Any]]) -> None:
        nonlocal counted
        page, page_counted = foreign_usage(items, nodes=members, managed_by_label=managed_by_label,
                                           managed_by=managed_by, sparse=True)
        counted += page_counted
        for name, amounts in page.items():
            total = usage.setdefault(name, dict.fromkeys(amounts, 0))
            for kind, amount in amounts.items():
                total[kind] += amount

    def restart() -> None:
        nonlocal counted
        usage.clear()
        counted = 0

    requests = _fold_pages(core_v1.list_pod_for_all_namespaces,
                           lambda token: pod_list_arguments(page_size=page_size, continue_token=token), fold, restart)
    return usage, counted, requests


def pool_follow_kubernetes(
    *, pool: Pool, core_v1: Any, managed_by_label: str, managed_by: str, tolerated_taints: Iterable[str] = (),
    node_conditions: Iterable[str] = (),
    page_size: int = 500,
) -> ImportReport:
    """The periodic sync of a Kubernetes pool (docs/kubernetes.md, "What the cluster says"): its nodes
    (``k8s_node_selector``; readiness and taints), and the requests of every other pod on them as the
    nodes' external usage. Records on the pool when it ran and what changed (``k8s_synced_at``,
    ``k8s_sync``). Raises the client's errors (the caller counts them)."""
    started = time.monotonic()
    nodes, node_requests = kubernetes_nodes_list(core_v1, label_selector=pool.k8s_node_selector or None,
                                                 page_size=page_size)
    names = [str((item.get("metadata") or {}).get("name")) for item in nodes]
    usage, foreign, pod_requests_made = kubernetes_foreign_usage(
        core_v1, nodes=names, managed_by_label=managed_by_label, managed_by=managed_by, page_size=page_size)
    report = pool_sync_from_kubernetes(pool=pool, items=nodes, tolerated_taints=tolerated_taints, usage=usage,
                                       node_conditions=node_conditions)
    report.foreign_pods = foreign
    report.requests = node_requests + pod_requests_made
    report.seconds = round(time.monotonic() - started, 3)
    Pool.objects.filter(pk=pool.pk).update(k8s_synced_at=timezone.now(), k8s_sync=report.sync_record())
    return report


NODE_READY, NODE_NOT_READY, NODE_GONE = "ready", "not_ready", "gone"


def _node_pod_arguments(token: str | None, *, node: str, page_size: int) -> dict[str, Any]:
    return node_pod_list_arguments(node=node, page_size=page_size, continue_token=token)


def nodes_follow_kubernetes(
    *, pool: Pool, core_v1: Any, names: Iterable[str], managed_by_label: str, managed_by: str,
    tolerated_taints: Iterable[str] = (), page_size: int = 500, node_conditions: Iterable[str] = (),
) -> dict[str, str]:
    """Read a few of the pool's nodes again, now (docs/kubernetes.md §10: a pod the cluster refused or
    lost): each node object (readiness, cordon, taints) and the other pods bound to it (one
    ``spec.nodeName`` field-selected listing each), and write the node's row: schedulable or not, and
    its external usage. A node the API no longer has (404) is cordoned, as the periodic sync does.
    Moves the pool's epochs on when a row changed. Returns each node's state: :data:`NODE_READY`,
    :data:`NODE_NOT_READY` or :data:`NODE_GONE`. Raises the client's errors but 404."""
    from kubernetes.client.exceptions import ApiException

    states: dict[str, str] = {}
    changed = False
    for name in sorted(set(names)):
        row = Node.objects.filter(pool=pool, name=name).first()
        try:
            answer = core_v1.read_node(name, _preload_content=False, _request_timeout=SYNC_REQUEST_TIMEOUT)
            item = json.loads(answer.data)
        except ApiException as exc:
            if exc.status != 404:
                raise
            states[name] = NODE_GONE
            if row is not None and row.schedulable:
                Node.objects.filter(pk=row.pk).update(schedulable=False, updated_at=timezone.now())
                changed = True
            continue
        states[name] = NODE_READY if node_ready(item) else NODE_NOT_READY
        spec, _reason = kubernetes_node_to_spec(item, tolerated_taints=tolerated_taints,
                                                node_conditions=node_conditions)
        if row is None or spec is None:
            continue
        pods, _requests = _list_pages(core_v1.list_pod_for_all_namespaces, functools.partial(
            _node_pod_arguments, node=name, page_size=page_size))
        usage, _counted = foreign_usage(pods, nodes=[name], managed_by_label=managed_by_label, managed_by=managed_by)
        values = {"schedulable": spec.schedulable}
        for _name, kind, capacity, used in INVENTORY_RESOURCES:
            values[used] = min(int(usage[name].get(kind, 0)), getattr(row, capacity))
        if any(getattr(row, field) != value for field, value in values.items()):
            Node.objects.filter(pk=row.pk).update(**values, updated_at=timezone.now())
            changed = True
    logger.info("pool.nodes_followed", extra={"pool": pool.name, "nodes": states, "changed": changed})
    if changed:
        pool_capacity_changed(pool.pk)
    return states


def pool_sync_from_kubernetes(
    *,
    pool: Pool,
    items: Sequence[Mapping[str, Any]],
    prune: bool = False,
    dry_run: bool = False,
    tolerated_taints: Iterable[str] = (),
    node_conditions: Iterable[str] = (),
    progress: Progress | None = None,
    usage: Mapping[str, Mapping[str, int]] | None = None,
) -> ImportReport:
    """Upsert the pool's nodes from Kubernetes node objects (see
    :func:`scheduler.inventory.kubernetes_node_to_spec`).

    Labels and capacity follow the cluster; external usage (``used_*``) is ``usage`` (per node name and
    resource kind, clamped to the capacity: :func:`pool_follow_kubernetes`), or, without it, kept,
    clamped to the new capacity. Nodes of the pool that the cluster no longer lists are cordoned (never deleted while
    tasks hold reservations on them); with ``prune`` those without active reservations are deleted.
    """
    report = ImportReport(pool=pool.name)
    specs: list[NodeSpec] = []
    position: dict[str, int] = {}  # node name -> its index in ``items``
    for index, item in enumerate(items):
        spec, reason = kubernetes_node_to_spec(item, tolerated_taints=tolerated_taints,
                                               node_conditions=node_conditions)
        if spec is None or spec.name in position:
            report.skipped.append({"path": f"items[{index}]", "message": reason or "duplicate node name"})
            continue
        position[spec.name] = index
        if usage is not None:
            held = usage.get(spec.name) or {}
            spec = replace(spec, **{used: min(int(held.get(kind, 0)), getattr(spec, capacity))
                                    for _name, kind, capacity, used in INVENTORY_RESOURCES})
        specs.append(spec)
    # A machine belongs to one pool: overlapping node selectors must not book its GPUs twice. Node names
    # are a cluster's, so only the pools of the same backend can hold the same machine.
    same_cluster = Q(pool__backend_ref=pool.backend_ref_id) if pool.backend_ref_id else Q(pool__backend=pool.backend)
    elsewhere = dict(Node.objects.filter(same_cluster, name__in=list(position)).exclude(pool=pool)
                     .values_list("name", "pool__name"))
    if elsewhere:
        for spec in specs:
            if spec.name in elsewhere:
                report.skipped.append({
                    "path": f"items[{position[spec.name]}]",
                    "message": f"node {spec.name} already belongs to pool {elsewhere[spec.name]}; not synced into "
                    f"pool {pool.name} (do the two pools' node selectors overlap?)",
                })
        logger.warning("pool.sync_overlap", extra={"pool": pool.name, "nodes": sorted(elsewhere)[:20],
                                                   "other_pools": sorted(set(elsewhere.values()))})
        specs = [spec for spec in specs if spec.name not in elsewhere]
    try:
        with transaction.atomic():
            locked = Pool.objects.select_for_update().get(pk=pool.pk)
            nodes_apply(
                pool=locked,
                nodes=specs,
                report=report,
                missing="prune" if prune else "cordon",
                progress=progress,
                keep_used=usage is None,
            )
            report.keys_version = locked.keys_version
            import_finish(report, dry_run)
            if report.changed:
                pool_capacity_changed(locked.pk)
    except DryRunRollback:
        pass
    logger.info("pool.synced_from_kubernetes", extra=report.as_dict())
    return report
