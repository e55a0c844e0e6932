"""Kubernetes Node objects as inventory node specs, and the pure half of listing them. Pure: no Django,
no Kubernetes client.

Mapping (:func:`kubernetes_node_to_spec`) of one ``/api/v1/nodes`` item (its JSON):

- name: ``metadata.name``; an item whose name is not a valid node name is unusable;
- labels: every string label of ``metadata.labels``;
- capacity: ``status.allocatable`` ``nvidia.com/gpu`` (0 when absent, capped at ``MAX_GPU``), ``cpu``,
  ``memory``, ``ephemeral-storage``; an unparsable quantity makes the item unusable;
- schedulable: false when ``spec.unschedulable`` (cordoned), when a ``NoSchedule``/``NoExecute`` taint
  is present whose key is not tolerated, or when the node's ``Ready`` condition is not ``True``
  (NotReady or Unknown: unschedulable until Ready again; a node reporting no conditions at all is
  taken as ready, as an inventory written by hand is).

Other pods (docs/kubernetes.md): :func:`pod_requests` is what one pod holds on its node (the scheduler's
rule: the larger of the containers' summed requests and the largest init container's, plus overhead);
:func:`foreign_usage` sums, per node of a pool, the pods this service did not create (not labelled
``managed_by_label``), listed across namespaces by :func:`pod_list_arguments` without terminal pods.

Listing follows ``metadata.continue`` pages: :func:`node_list_arguments` builds the arguments of one
``CoreV1Api.list_node`` call and :func:`node_list_page` reads its raw JSON response; the caller does
the I/O and loops until the page's token is ``None``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from parsing import QuantityError, parse_quantity
from scheduler.inventory.document import MAX_GPU, NODE_NAME_RE, NodeSpec
from scheduler.resources import RESOURCES

K8S_RESOURCES: tuple[tuple[str, str], ...] = tuple((r.kubernetes_name, r.kind) for r in RESOURCES)
UNSCHEDULABLE_TAINT_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def kubernetes_node_to_spec(
    item: Mapping[str, Any], *, tolerated_taints: Iterable[str] = (), node_conditions: Iterable[str] = ()
) -> tuple[NodeSpec | None, str | None]:
    """Map one ``/api/v1/nodes`` item (JSON) to a :class:`NodeSpec`: all labels, ``status.allocatable``
    as capacity, unschedulable when cordoned or tainted NoSchedule/NoExecute (taint keys in
    ``tolerated_taints`` excepted), NotReady, or with a condition of ``node_conditions`` (a backend's
    rules, e.g. ``DiskPressure``) True. Returns ``(spec, None)`` or ``(None, reason)`` for an unusable item."""
    metadata = item.get("metadata") or {}
    name = metadata.get("name")
    if not isinstance(name, str) or not re.fullmatch(NODE_NAME_RE, name) or len(name) > 253:
        return None, f"invalid node name {name!r}"
    labels = {
        key: value
        for key, value in (metadata.get("labels") or {}).items()
        if isinstance(key, str) and isinstance(value, str)
    }
    allocatable = (item.get("status") or {}).get("allocatable") or {}
    amounts: dict[str, int] = {}
    for k8s_name, kind in K8S_RESOURCES:
        raw = allocatable.get(k8s_name, 0)
        try:
            amounts[kind] = parse_quantity(raw, kind=kind)  # type: ignore[arg-type]
        except QuantityError as exc:
            return None, f"status.allocatable[{k8s_name!r}]: {exc}"
    amounts["gpu"] = min(amounts["gpu"], MAX_GPU)
    spec = item.get("spec") or {}
    tolerated = set(tolerated_taints)
    tainted = any(
        taint.get("effect") in UNSCHEDULABLE_TAINT_EFFECTS and taint.get("key") not in tolerated
        for taint in (spec.get("taints") or [])
    )
    ready = node_ready(item)
    rules = set(node_conditions)
    if rules:
        conditions = (item.get("status") or {}).get("conditions") or []
        ready = ready and not any(isinstance(c, Mapping) and c.get("type") in rules and c.get("status") == "True"
                                  for c in conditions)
    return (
        NodeSpec(
            name=name,
            labels=labels,
            **{r.capacity_field: amounts[r.kind] for r in RESOURCES},
            schedulable=not bool(spec.get("unschedulable")) and not tainted and ready,
        ),
        None,
    )


@dataclass(frozen=True, slots=True)
class NodePage:
    """One page of a node list: its raw items and the token of the next page (``None`` on the last)."""

    items: list[Mapping[str, Any]]
    continue_token: str | None


def node_list_arguments(*, label_selector: str | None, page_size: int, continue_token: str | None) -> dict[str, Any]:
    """Keyword arguments of one ``CoreV1Api.list_node`` call: ``page_size`` items, raw JSON back
    (``_preload_content=False``, read by :func:`node_list_page`), the selector and token when set."""
    arguments: dict[str, Any] = {"limit": page_size, "_preload_content": False}
    if label_selector:
        arguments["label_selector"] = label_selector
    if continue_token:
        arguments["_continue"] = continue_token
    return arguments


def node_list_page(data: str | bytes) -> NodePage:
    """Read one raw ``list_node`` response: its items and its ``metadata.continue`` token (empty -> ``None``)."""
    payload = json.loads(data)
    return NodePage(
        items=payload.get("items") or [], continue_token=(payload.get("metadata") or {}).get("continue") or None
    )


# Pods in a terminal phase hold nothing on their node (the scheduler's own rule).
NON_TERMINAL_PODS = "status.phase!=Succeeded,status.phase!=Failed"


def pod_list_arguments(*, page_size: int, continue_token: str | None) -> dict[str, Any]:
    """Keyword arguments of one ``CoreV1Api.list_pod_for_all_namespaces`` call: non-terminal pods only,
    ``page_size`` items, raw JSON back (read by :func:`node_list_page`, the same list shape)."""
    arguments: dict[str, Any] = {"limit": page_size, "field_selector": NON_TERMINAL_PODS, "_preload_content": False}
    if continue_token:
        arguments["_continue"] = continue_token
    return arguments


def node_pod_list_arguments(*, node: str, page_size: int, continue_token: str | None) -> dict[str, Any]:
    """:func:`pod_list_arguments` narrowed to the pods bound to one node (``spec.nodeName``): what
    re-reading one node's external usage lists."""
    arguments = pod_list_arguments(page_size=page_size, continue_token=continue_token)
    arguments["field_selector"] = f"spec.nodeName={node},{NON_TERMINAL_PODS}"
    return arguments


def node_ready(item: Mapping[str, Any]) -> bool:
    """Whether a ``/api/v1/nodes`` item's ``Ready`` condition is ``True`` (a node reporting no
    conditions counts as ready, as in :func:`kubernetes_node_to_spec`)."""
    conditions = (item.get("status") or {}).get("conditions") or []
    return all(c.get("status") == "True" for c in conditions if isinstance(c, Mapping) and c.get("type") == "Ready")


@functools.lru_cache(maxsize=4096)
def _request_amount(raw: str | int, kind: str) -> int:
    """One request quantity (pods repeat a few values: parsed once each; exact parsing is ~70 µs)."""
    try:
        return parse_quantity(raw, kind=kind)  # type: ignore[arg-type]
    except QuantityError:
        return 0  # the apiserver validated it; a quantity we cannot read counts as nothing


def _amounts(requests: Mapping[str, Any] | None) -> dict[str, int]:
    amounts = {kind: 0 for _name, kind in K8S_RESOURCES}
    for k8s_name, kind in K8S_RESOURCES:
        raw = (requests or {}).get(k8s_name)
        if isinstance(raw, (str, int)) and not isinstance(raw, bool):
            amounts[kind] = _request_amount(raw, kind)
    return amounts


def pod_requests(item: Mapping[str, Any]) -> dict[str, int]:
    """What one pod (JSON) holds on its node, by resource kind: max(sum of the containers' requests,
    the largest init container's request) plus ``spec.overhead``."""
    spec = item.get("spec") or {}
    total = {kind: 0 for _name, kind in K8S_RESOURCES}
    for container in spec.get("containers") or []:
        for kind, amount in _amounts((container.get("resources") or {}).get("requests")).items():
            total[kind] += amount
    for container in spec.get("initContainers") or []:
        for kind, amount in _amounts((container.get("resources") or {}).get("requests")).items():
            total[kind] = max(total[kind], amount)
    for kind, amount in _amounts(spec.get("overhead")).items():
        total[kind] += amount
    return total


def foreign_usage(
    pods: Iterable[Mapping[str, Any]], *, nodes: Iterable[str], managed_by_label: str, managed_by: str,
    sparse: bool = False,
) -> tuple[dict[str, dict[str, int]], int]:
    """Requests of the pods on ``nodes`` that this service did not create, summed per node (every node
    of ``nodes`` present, zero when nothing else runs there; with ``sparse`` only the nodes some such pod
    is on, and ``nodes`` a set), and how many such pods were counted. Pods not yet bound (no
    ``spec.nodeName``) or in a terminal phase hold nothing and are skipped."""
    members = nodes if isinstance(nodes, (set, frozenset)) else set(nodes)
    usage = {} if sparse else {name: {kind: 0 for _name, kind in K8S_RESOURCES} for name in members}
    counted = 0
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node not in members:
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if ((pod.get("metadata") or {}).get("labels") or {}).get(managed_by_label) == managed_by:
            continue
        counted += 1
        total = usage.setdefault(node, {kind: 0 for _name, kind in K8S_RESOURCES})
        for kind, amount in pod_requests(pod).items():
            total[kind] += amount
    return usage, counted


def sync_record_words(record: Mapping[str, Any] | None) -> str:
    """What a pool's last Kubernetes sync changed (``Pool.k8s_sync``), in words for the admin and the pool page."""
    if not record:
        return "never synced"
    changes = [f"{record.get(key, 0)} {word}" for key, word in (
        ("nodes_created", "created"), ("nodes_updated", "updated"), ("nodes_cordoned", "cordoned"))
        if record.get(key)]
    nodes = "nodes: " + (", ".join(changes) if changes else "no change")
    skipped = f"; {record['nodes_skipped']} skipped" if record.get("nodes_skipped") else ""
    pods = record.get("foreign_pods", 0)
    return f"{nodes}{skipped}; {pods} other pod{'s' if pods != 1 else ''} on its nodes; " \
        f"{record.get('requests', 0)} requests in {record.get('seconds', 0)} s"
