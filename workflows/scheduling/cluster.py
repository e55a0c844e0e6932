"""What a pool's pod listing says the cluster did to its tasks (docs/kubernetes.md §10), read before a
pod sync takes its locks: the pods the cluster refused to schedule for ``OSMO_K8S_UNSCHEDULABLE_SECONDS``,
the pods it disrupted or evicted, and the pods that disappeared together with their node. The nodes of
those pods are read again at once (:func:`scheduler.services.nodes_follow_kubernetes`: readiness, cordon,
taints, other pods' usage), so the placement that follows does not put the gang back on a node that is
NotReady, gone or full. What the gangs then do is the lifecycle's (:mod:`workflows.lifecycle.cluster`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from osmo import config as osmo_config
from scheduler.choices import DispatchBackend
from scheduler.dispatch import PodBackend, PodState
from scheduler.dispatch.base import CAUSE_DISRUPTED, CAUSE_EVICTED, CAUSE_NODE_LOST, CAUSE_UNSCHEDULABLE
from scheduler.models import Pool
from scheduler.services import nodes_follow_kubernetes
from scheduler.services.kubernetes_sync import NODE_GONE, NODE_NOT_READY

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ClusterSaid:
    refused: dict[int, str] = field(default_factory=dict)  # task id -> the cluster's message
    lost: dict[int, tuple[str, str]] = field(default_factory=dict)  # task id -> (cause, message)
    deferred: set[int] = field(default_factory=set)  # missing pods whose node could not be read: next sync
    # Missing pods whose node the credentials may not read (401/403): decided now, with the refusal's words.
    refused_reads: dict[int, str] = field(default_factory=dict)

    @property
    def tasks(self) -> set[int]:
        return set(self.refused) | set(self.lost)


def cluster_read(pool: Pool, backend: PodBackend, rows: Sequence[Any], states: Mapping[str, PodState], *,
                 now: datetime) -> ClusterSaid:
    """``rows``: the pool's active dispatched tasks (``pk``, ``pod_name``, ``node_name``); ``states``:
    their pods' states by pod name. Only a Kubernetes pool's pods say such things; for the others
    nothing is read."""
    said = ClusterSaid()
    if pool.backend != DispatchBackend.KUBERNETES:
        return said
    limit = timedelta(seconds=osmo_config.kubernetes().unschedulable_seconds)
    missing: list[Any] = []
    nodes: set[str] = set()
    for row in rows:
        state = states.get(row.pod_name)
        if state is None:
            continue
        if state.cause == CAUSE_UNSCHEDULABLE and state.since is not None and now - state.since >= limit:
            said.refused[row.pk] = f"pod {row.pod_name} {_seconds(now - state.since)}: {state.message}"
        elif state.cause in (CAUSE_DISRUPTED, CAUSE_EVICTED):
            said.lost[row.pk] = (state.cause, f"pod {row.pod_name}: {state.message}")
        elif state.phase == "Missing" and row.node_name:
            missing.append(row)
        else:
            continue
        if row.node_name:
            nodes.add(row.node_name)
    if not nodes:
        return said
    from kubernetes.client.exceptions import ApiException

    from scheduler.dispatch.pod.manifest import LABEL_MANAGED_BY, MANAGED_BY
    from scheduler.services.backends import (
        api_error_words,
        backend_named,
        backend_permission_record,
        pool_tolerated_taints,
    )

    owner = backend_named(pool.backend_name)
    try:
        node_states = nodes_follow_kubernetes(
            pool=pool, core_v1=backend.core, names=nodes,  # type: ignore[attr-defined]  # the Kubernetes backend's
            managed_by_label=LABEL_MANAGED_BY, managed_by=MANAGED_BY,
            tolerated_taints=pool_tolerated_taints(pool, owner, osmo_config.kubernetes().tolerated_taints),
            node_conditions=owner.node_conditions, page_size=osmo_config.kubernetes().sync_page_size)
    except Exception as exc:  # the API refusing or unreachable: refused/lost pods still act, missing ones wait
        logger.warning("pool.nodes_follow_failed", extra={"pool": pool.name, "nodes": sorted(nodes),
                                                          "reason": str(exc)})
        if isinstance(exc, ApiException) and exc.status in (401, 403):
            # Permanent: waiting for the next sync would wait for ever. The backend says what it lacks,
            # and the missing pods are decided now, as pods deleted behind the service's back.
            words = api_error_words(exc)
            backend_permission_record(owner.name, f"re-reading nodes of pool {pool.name}: {words}")
            for row in missing:
                said.refused_reads[row.pk] = (f"pod disappeared from the backend; its node {row.node_name} "
                                              f"could not be read: {words}")
        else:
            said.deferred.update(row.pk for row in missing)
        return said
    for row in missing:
        node_state = node_states.get(row.node_name)
        if node_state in (NODE_NOT_READY, NODE_GONE):
            how = "was deleted" if node_state == NODE_GONE else "is NotReady"
            said.lost[row.pk] = (CAUSE_NODE_LOST, f"pod {row.pod_name} disappeared; its node {row.node_name} {how}")
    return said


def _seconds(waited: timedelta) -> str:
    return f"unschedulable for {int(waited.total_seconds())} s"
