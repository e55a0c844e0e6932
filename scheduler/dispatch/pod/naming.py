"""Pod names and Kubernetes label values: the one place they are made. Deterministic, so dispatch is
idempotent; a name that had to be shortened or sanitised carries a hash of the original."""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 63  # a DNS-1123 label
HASH_LENGTH = 8
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:HASH_LENGTH]


def _label_with_digest(text: str, digest_of: str, *, fallback: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", text.lower())
    base = re.sub(r"-{2,}", "-", base).strip("-")
    base = base[: MAX_NAME - HASH_LENGTH - 1].rstrip("-")
    return f"{base or fallback}-{_digest(digest_of)}"


def pod_name_for(workflow_id: str, task_name: str, attempt: int = 0) -> str:
    """The pod name of a task: a DNS-1123 label (<= 63 chars) readable as ``<workflow>-<task>`` with a
    hash of both as suffix, so two tasks never share a name and a task always gets the same one.
    ``attempt`` counts the gang's preemptions: a gang placed again gets new names (``-r<attempt>``),
    so a new pod never collides with its predecessor while that one terminates."""
    if attempt:
        return _label_with_digest(f"{workflow_id}-{task_name}-r{attempt}", f"{workflow_id}/{task_name}/{attempt}",
                                  fallback="task")
    return _label_with_digest(f"{workflow_id}-{task_name}", f"{workflow_id}/{task_name}", fallback="task")


def kube_pod_name(raw: str) -> str:
    """The pod's name in Kubernetes: ``raw`` itself when it is a DNS-1123 label (names made by
    :func:`pod_name_for` always are); otherwise, defensively, a sanitised, truncated form with a hash
    of ``raw`` as suffix, so two different names never collide."""
    if len(raw) <= MAX_NAME and _DNS1123_LABEL.match(raw):
        return raw
    return _label_with_digest(raw, raw, fallback="osmo")


def label_value(raw: str) -> str:
    """A valid label value for ``raw`` (<= 63 chars of ``[A-Za-z0-9._-]``, alphanumeric at both ends).

    Valid values are kept as they are; others are sanitised and get a hash suffix of the raw value so
    that distinct raw names stay distinct. The raw value always goes in an annotation as well.
    """
    raw = str(raw)
    if len(raw) <= MAX_NAME and _LABEL_VALUE.match(raw):
        return raw
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", raw)
    base = base[: MAX_NAME - HASH_LENGTH - 1]
    base = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", base)
    return f"{base}-{_digest(raw)}" if base else _digest(raw)


def group_service_name(workflow_id: str, group: str) -> str:
    """The name of a group's headless Service: a DNS-1035 label (it starts with a letter), the same
    for every task of the group, distinct for two groups."""
    return _label_with_digest(f"osmo-{workflow_id}-{group}", f"{workflow_id}/{group}", fallback="osmo")


def pod_hostname(task_name: str) -> str:
    """A task's pod host name in its group's Service: the task name when it is a DNS-1123 label,
    otherwise a sanitised form with a hash of the name."""
    return kube_pod_name(task_name)


def task_dns_name(*, hostname: str, subdomain: str, namespace: str) -> str:
    """The DNS name a pod with ``hostname`` and ``subdomain`` has in ``namespace`` (with the headless
    Service named ``subdomain``): what ``{{host:<task>}}`` resolves to on Kubernetes."""
    return f"{hostname}.{subdomain}.{namespace}.svc"
