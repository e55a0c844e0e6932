"""Backends: the named clusters (and this machine, and the simulation) pools run on (docs/design.md §6,
"Backends"). Their writes, their sealed kubeconfigs, their health and the dispatch client of a pool's
backend, one per backend and connection version in each process."""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from django.db import transaction
from django.utils import timezone

from credentials.crypto import DecryptError
from credentials.services import keyring
from osmo.errors import ConflictError, NotFoundError, ValidationFailedError
from scheduler.choices import BUILTIN_BACKENDS, BackendStatus, DispatchBackend
from scheduler.dispatch import DispatchPermanentError, PodBackend, backend_for, kubernetes_backend_for
from scheduler.models import Backend, Pool, builtin_backend

logger = logging.getLogger(__name__)

#: The owner id a backend's kubeconfig is sealed with (no user owns it): a ciphertext copied from a
#: user's credential, or from another backend (the name is sealed too), does not open.
BACKEND_SEAL_OWNER = 0
#: How much of a sync error a backend keeps in ``last_error``.
LAST_ERROR_MAX = 1000


class BackendNotFoundError(NotFoundError):
    code = "backend_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"There is no backend named {name[:80]!r}.", details={"name": name[:80]})


def _seal_name(name: str) -> str:
    return f"backend:{name}"


def kubeconfig_seal(*, name: str, text: str) -> str:
    """``text`` encrypted with the credential store's first key, bound to the backend's name."""
    return keyring().seal(owner_id=BACKEND_SEAL_OWNER, name=_seal_name(name), values={"kubeconfig": text})


def kubeconfig_open(backend: Backend) -> str:
    """The backend's kubeconfig in clear ("" when it has none). Never log or return it."""
    if not backend.kubeconfig_sealed:
        return ""
    try:
        values = keyring().open(backend.kubeconfig_sealed, owner_id=BACKEND_SEAL_OWNER, name=_seal_name(backend.name))
    except DecryptError as exc:
        raise DispatchPermanentError(f"backend {backend.name!r}: its kubeconfig cannot be decrypted ({exc})") from exc
    return values["kubeconfig"]


def backends_rotate() -> int:
    """Every stored kubeconfig encrypted again with the first key (the same connection; workers build
    their client again, as the stored text changed). Returns how many were."""
    count = 0
    with transaction.atomic():
        for backend in Backend.objects.select_for_update().exclude(kubeconfig_sealed=""):
            Backend.objects.filter(pk=backend.pk).update(kubeconfig_sealed=keyring().rotate(backend.kubeconfig_sealed))
            count += 1
    return count


def kubeconfig_check(text: str, *, context: str = "") -> None:
    """Refuse (ValidationFailedError naming ``kubeconfig`` or ``context``) a kubeconfig the client cannot use."""
    from scheduler.dispatch.kubernetes import api_client_from_kubeconfig_text, kubeconfig_contexts

    try:
        _, contexts = kubeconfig_contexts(text)
    except DispatchPermanentError as exc:
        raise ValidationFailedError([{"path": "kubeconfig", "message": str(exc)}],
                                    message="The backend is invalid.") from exc
    if context and context not in contexts:
        raise ValidationFailedError(
            [{"path": "context", "message": f"the kubeconfig has no context {context!r} "
                                            f"(it has: {', '.join(contexts) or 'none'})"}],
            message="The backend is invalid.")
    try:
        api_client_from_kubeconfig_text(text, context=context or None).close()
    except DispatchPermanentError as exc:
        raise ValidationFailedError([{"path": "kubeconfig", "message": str(exc)}],
                                    message="The backend is invalid.") from exc


def _invalid(field: str, message: str) -> ValidationFailedError:
    return ValidationFailedError([{"path": field, "message": message}], message="The backend is invalid.")


@transaction.atomic
def backend_set(*, name: str, kind: str | None = None, kubeconfig: str | None = None, in_cluster: bool | None = None,
                **fields: Any) -> Backend:
    """Create or update the backend ``name``. ``kubeconfig`` (text), when given, replaces the stored one
    (sealed) and ``in_cluster`` is cleared; ``in_cluster=True`` drops a stored kubeconfig. Either change
    bumps the connection version, so every worker builds a new client at its next call. Other ``fields``:
    description, context, namespace, scheduler_name, node_conditions, tolerated_taints, dashboard_links,
    status (ONLINE or MAINTENANCE: OFFLINE is the syncs' to say).

    Raises:
        ValidationFailedError: a bad name, kind or field, an unusable kubeconfig, an unknown context, a
            kind change while pools use the backend; nothing is stored then.
    """
    backend = Backend.objects.select_for_update().filter(name=name).first()
    created = backend is None
    if backend is None:
        backend = Backend(name=name, kind=kind or (name if name in BUILTIN_BACKENDS else DispatchBackend.KUBERNETES))
    elif kind is not None and kind != backend.kind:
        if backend.pools.exists():
            raise _invalid("kind", f"backend {name!r} has pools; its kind cannot change")
        backend.kind = kind
    if backend.kind not in DispatchBackend.values:
        raise _invalid("kind", f"must be one of: {', '.join(DispatchBackend.values)}")
    status = fields.pop("status", None)
    if status is not None:
        if status not in (BackendStatus.ONLINE, BackendStatus.MAINTENANCE):
            raise _invalid("status", "an admin sets ONLINE or MAINTENANCE; OFFLINE comes from the syncs")
        backend.status = status
    for key, value in fields.items():
        if key not in ("description", "context", "namespace", "scheduler_name", "node_conditions",
                       "tolerated_taints", "dashboard_links"):
            raise _invalid(key, "is not a field of a backend")
        setattr(backend, key, value)
    connection_changed = False
    if (kubeconfig is not None or in_cluster) and name in BUILTIN_BACKENDS:
        raise _invalid("kubeconfig", f"the built-in backend {name!r} reads the worker processes' environment; "
                                     "make a backend of another name for this connection")
    if kubeconfig is not None:
        if backend.kind != DispatchBackend.KUBERNETES:
            raise _invalid("kubeconfig", f"only a kubernetes backend has a kubeconfig (this one is {backend.kind})")
        kubeconfig_check(kubeconfig, context=backend.context)
        backend.kubeconfig_sealed = kubeconfig_seal(name=name, text=kubeconfig)
        backend.in_cluster = False
        connection_changed = True
    elif "context" in fields and backend.kubeconfig_sealed:
        kubeconfig_check(kubeconfig_open(backend), context=backend.context)
        connection_changed = True
    if in_cluster is not None and in_cluster != backend.in_cluster:
        backend.in_cluster = in_cluster
        if in_cluster:
            backend.kubeconfig_sealed = ""
        connection_changed = True
    if (created and backend.kind == DispatchBackend.KUBERNETES and name != DispatchBackend.KUBERNETES
            and not backend.kubeconfig_sealed and not backend.in_cluster):
        raise _invalid("kubeconfig", "a kubernetes backend other than the built-in one needs a kubeconfig "
                                     "or in-cluster mode")
    if connection_changed:
        backend.kubeconfig_version += 1
        backend.permission_error = ""
    try:
        backend.full_clean()
    except Exception as exc:  # django ValidationError: name the field
        from django.core.exceptions import ValidationError

        if not isinstance(exc, ValidationError):
            raise
        errors = [{"path": field, "message": " ".join(str(m) for m in messages)}
                  for field, messages in exc.message_dict.items()]
        raise ValidationFailedError(errors, message="The backend is invalid.") from exc
    backend.save()
    logger.info("backend.set", extra={"backend": name, "kind": backend.kind, "new": created,
                                      "connection_version": backend.kubeconfig_version})
    return backend


@transaction.atomic
def backend_delete(*, name: str) -> None:
    """Delete a backend without pools.

    Raises:
        BackendNotFoundError; ConflictError: it is built in, or pools still use it.
    """
    backend = Backend.objects.select_for_update().filter(name=name).first()
    if backend is None:
        raise BackendNotFoundError(name)
    if backend.builtin:
        raise ConflictError(f"the built-in backend {name!r} cannot be deleted")
    pools = list(backend.pools.values_list("name", flat=True)[:10])
    if pools:
        raise ConflictError(f"backend {name!r} still has pools ({', '.join(pools)}); move or delete them first",
                            details={"pools": pools})
    backend.delete()


def backend_named(name: str) -> Backend:
    """The backend ``name`` (a built-in one is made when missing)."""
    if name in BUILTIN_BACKENDS:
        return builtin_backend(name)
    backend = Backend.objects.filter(name=name).first()
    if backend is None:
        raise BackendNotFoundError(name)
    return backend


def backend_names() -> tuple[str, ...]:
    """Every backend a pool may name: the built-in ones first, then the others by name."""
    others = Backend.objects.exclude(name__in=BUILTIN_BACKENDS).order_by("name").values_list("name", flat=True)
    return (*BUILTIN_BACKENDS, *others)


def backend_client(backend: Backend) -> PodBackend | None:
    """The dispatch client of a backend with its own connection, one per backend and connection version
    in this process; None for one that uses the process's (the built-in backends: ``backend_for(kind)``)."""
    if backend.from_environment or backend.kind != DispatchBackend.KUBERNETES:
        return None
    # The version says "changed" to every process; the digest of what is stored tells a backend deleted and
    # made again under its name (version 1 again) from the one before.
    stored = hashlib.sha256(f"{backend.kubeconfig_sealed}|{backend.context}|{backend.in_cluster}".encode())
    return kubernetes_backend_for((backend.name, f"{backend.kubeconfig_version}:{stored.hexdigest()[:16]}"),
                                  kubeconfig=kubeconfig_open(backend), context=backend.context,
                                  in_cluster=backend.in_cluster)


def backend_of_pool(pool: Pool) -> PodBackend | None:
    """The dispatch client of the pool's backend when it has its own connection (its row is read again: the
    connection version may have moved since the pool was loaded); None: use ``backend_for(pool.backend)``."""
    if pool.backend != DispatchBackend.KUBERNETES or pool.backend_ref_id in (None, DispatchBackend.KUBERNETES):
        return None  # no query: the built-in backends use the process's client
    backend = Backend.objects.filter(name=pool.backend_ref_id).first()
    return backend_client(backend) if backend is not None else None


def pool_backend(pool: Pool) -> PodBackend:
    """The dispatch client of the pool's backend, whichever it is."""
    return backend_of_pool(pool) or backend_for(pool.backend)


def pool_tolerated_taints(pool: Pool, backend: Backend | None, setting: list[str] | tuple[str, ...]) -> list[str]:
    """The taint keys that do not make the pool's nodes unschedulable: ``OSMO_K8S_TOLERATED_TAINTS``, its
    backend's and its own (kept by ``sync_nodes_from_kubernetes --tolerate-taint``): what the periodic
    sync, the node re-reads and the command all use."""
    keys = [*setting, *(backend.tolerated_taints if backend is not None else ()), *pool.k8s_tolerated_taints]
    return sorted(set(keys))


def api_error_words(exc: BaseException) -> str:
    """One line saying why a call to a cluster failed: a 401/403 with the API's own message, which names
    the verb and the resource refused (``nodes is forbidden: User "…" cannot list resource "nodes" …``)."""
    from kubernetes.client.exceptions import ApiException

    if isinstance(exc, ApiException):
        from scheduler.dispatch.kubernetes import api_message

        return f"HTTP {exc.status} {exc.reason or ''}: {api_message(exc)}".replace("\n", " ")[:LAST_ERROR_MAX]
    return f"{exc.__class__.__name__}: {exc}".replace("\n", " ")[:LAST_ERROR_MAX]


def backend_permission_record(name: str, refusal: str | None) -> None:
    """Keep (or, ``None``, clear) the last 401/403 a dispatch or a node re-read of backend ``name`` got:
    which verb on which resource its credentials lack. The status does not change (the node sync's own
    refusals make it OFFLINE); an update only when it differs."""
    text = (refusal or "")[:LAST_ERROR_MAX]
    changed = Backend.objects.filter(name=name).exclude(permission_error=text).update(permission_error=text,
                                                                                     updated_at=timezone.now())
    if changed and text:
        logger.warning("backend.permission_refused", extra={"backend": name, "error": text})


def backend_record_sync(backend: Backend, *, error: str | None) -> None:
    """Record a sync's outcome: success sets ONLINE (unless an admin set MAINTENANCE) and the last contact;
    a failure sets OFFLINE (since when kept from the first failure) with its reason."""
    now = timezone.now()
    if error is None:
        updates: dict[str, Any] = {"last_contact": now, "last_error": "", "offline_since": None}
        if backend.status == BackendStatus.OFFLINE:
            updates["status"] = BackendStatus.ONLINE
            logger.info("backend.online", extra={"backend": backend.name})
    else:
        updates = {"last_error": error[:LAST_ERROR_MAX]}
        if backend.status == BackendStatus.ONLINE:
            updates["status"] = BackendStatus.OFFLINE
            logger.warning("backend.offline", extra={"backend": backend.name, "error": error[:LAST_ERROR_MAX]})
        if backend.offline_since is None:
            updates["offline_since"] = now
    came_back = updates.get("status") == BackendStatus.ONLINE
    Backend.objects.filter(pk=backend.pk).update(**updates, updated_at=now)
    for key, value in updates.items():
        setattr(backend, key, value)
    if came_back:  # its queued gangs are solved again now, not at the next tick
        from scheduler.services.reservations import pool_capacity_changed

        for pool_id in Pool.objects.filter(backend_ref__name=backend.name).values_list("pk", flat=True):
            pool_capacity_changed(pool_id)


__all__ = ["BackendNotFoundError", "api_error_words", "backend_client", "backend_delete", "backend_named",
           "backend_names", "backend_of_pool", "backend_permission_record", "backend_record_sync", "backend_set",
           "backends_rotate", "kubeconfig_check", "kubeconfig_open", "kubeconfig_seal", "pool_backend",
           "pool_tolerated_taints"]
