"""Dispatch backends behind one interface (see :mod:`scheduler.dispatch.base`)."""

from __future__ import annotations

import os

from scheduler.dispatch.base import (
    DispatchPermanentError,
    DispatchTransientError,
    ListedPod,
    PodBackend,
    PodEvent,
    PodLog,
    PodState,
)
from scheduler.dispatch.pod.request import PodRequest

_BACKENDS: dict[tuple, PodBackend] = {}
# The Kubernetes backend reads these when built; a change means a different backend.
_BACKEND_ENV = ("KUBECONFIG", "OSMO_K8S_CONTEXT", "OSMO_K8S_IN_CLUSTER", "OSMO_K8S_PENDING_TIMEOUT",
                "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")


def backend_for(name: str, **options) -> PodBackend:
    """The backend named by a pool's ``backend`` field, built once per process and options (a
    Kubernetes backend loads its kubeconfig and opens a connection pool; reuse them)."""
    env: tuple[str | None, ...] = ()
    if name == "kubernetes":
        env = tuple(os.environ.get(var) for var in _BACKEND_ENV)
    elif name == "local":  # its pods live under OSMO_LOCAL_DIR
        env = (os.environ.get("OSMO_LOCAL_DIR"),)
    cache_key = (name, tuple(sorted(options.items())), env)
    backend = _BACKENDS.get(cache_key)
    if backend is None:
        if name == "kubernetes":
            from scheduler.dispatch.kubernetes import KubernetesBackend

            backend = KubernetesBackend.from_settings(**options)
        elif name == "local":
            from scheduler.dispatch.local import LocalBackend

            backend = LocalBackend(**{**_local_service_folders(), **options})
        else:
            from scheduler.dispatch.simulated import SimulatedBackend

            backend = SimulatedBackend()
        _BACKENDS[cache_key] = backend
    return backend


def kubernetes_backend_for(key: tuple[str, str], *, kubeconfig: str = "", context: str = "",
                           in_cluster: bool = False) -> PodBackend:
    """The Kubernetes backend of a named backend's own connection, built once per process and ``key``
    (its name and connection version: a rotated kubeconfig has a new version, so the next call builds a
    new client without a restart; the old one is dropped)."""
    backend = _BACKENDS.get(("named", key))
    if backend is None:
        from scheduler.dispatch.kubernetes import KubernetesBackend

        if in_cluster:
            backend = KubernetesBackend.from_settings(in_cluster=True)
        else:
            backend = KubernetesBackend.from_kubeconfig_text(kubeconfig, context=context or None)
        for stale in [cached for cached in _BACKENDS if cached[0] == "named" and cached[1][0] == key[0]]:
            del _BACKENDS[stale]
        _BACKENDS[("named", key)] = backend
    return backend


def _local_service_folders() -> dict[str, object]:
    """The local backend's options from the settings: its sandbox's network, process limit and the
    service's address (docs/runtime.md), and the service's paths it keeps from its tasks: the
    data folder and the worker user's home hidden; the SQLite database's files, the beat schedule, the
    broker's, the metrics' and the secret key's folders, wherever they are, never bound into a sandbox; the
    folders a task may write (``OSMO_LOCAL_WRITABLE`` and the ``file://`` artifact stores)."""
    from pathlib import Path
    from urllib.parse import urlparse

    from django.conf import settings

    from osmo import config as osmo_config
    from osmo.secret_file import secret_key_path

    sealed = [str(osmo_config.observability().metrics_dir), str(settings.CELERY_BEAT_SCHEDULE_FILENAME),
              str(secret_key_path(settings.DATA_DIR).parent)]
    if getattr(settings, "BROKER_DIR", None) is not None:
        sealed.append(str(settings.BROKER_DIR))
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        sealed += [f"{database['NAME']}{suffix}" for suffix in ("", "-wal", "-shm", "-journal")]
    hidden = [str(settings.DATA_DIR)]
    home = Path.home()
    if home != Path(home.anchor):  # its keys and cloud credentials (~/.ssh, ~/.aws, ~/.kube)
        hidden.append(str(home))
    knobs = osmo_config.runtime()
    stores = [knobs.artifact_store, *knobs.artifact_stores.values()]
    file_stores = [urlparse(url) for url in stores]
    writable = [*knobs.local_writable, *(url.path for url in file_stores if url.scheme == "file" and url.path)]
    return {"hidden": tuple(hidden), "sealed": tuple(sealed), "writable": tuple(writable),
            "network": knobs.local_network, "service_url": knobs.service_url,
            "max_processes": knobs.local_max_processes}


__all__ = ["PodBackend", "PodEvent", "PodLog", "DispatchPermanentError", "DispatchTransientError", "ListedPod",
           "PodRequest", "PodState", "backend_for", "kubernetes_backend_for"]
