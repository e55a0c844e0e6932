"""The ``kubernetes`` dispatch backend: one pod per task, through the official client (docs/design.md §6).

Every task becomes one pod with a deterministic name, pinned to its chosen node by a
``kubernetes.io/hostname`` node selector, with requests == limits for cpu, memory, ephemeral storage
and ``nvidia.com/gpu``. Calls are idempotent: creating a pod that exists (409 AlreadyExists) and
deleting one that is gone (404 NotFound) are success. API errors are split for Celery's retries:

* transient (:class:`DispatchTransientError`, retried with backoff): connection errors and timeouts,
  408, 429 and every 5xx;
* 401 and 403: retried here a few times with a short backoff first (``OSMO_K8S_AUTH_RETRIES``,
  default 4 over ~1.5 s): a kube-apiserver that just started answers 403 to allowed requests until its
  RBAC caches synced (~75 ms); still refused after that, they are permanent. Only the service's own
  work waits so (create, delete, status listings); a user's log or events read answers at once;
* permanent (:class:`DispatchPermanentError`, the task fails): any other 4xx (400, 404 on create,
  422, ...), carrying the API's own message.

Phases are read back by listing the pool's pods by label (paginated) and mapped by
:mod:`scheduler.dispatch.k8s_status`. The backend does not assume a kubelet exists: a pod still Pending
``pending_timeout_s`` after it was dispatched is reported as Failed with a message saying why (its
waiting reason); a pod the cluster refuses to schedule is reported with the cluster's words instead.

This module imports nothing from Django: it is configured by arguments and environment variables.
It stays over 500 lines because it is the one adapter of the ``PodBackend`` protocol onto the API
client (the error split above, the calls and their retries); what a pod is made of lives in
:mod:`scheduler.dispatch.pod`, the status mapping and the sessions in modules beside it.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException
from urllib3.exceptions import HTTPError as Urllib3HTTPError

from scheduler.dispatch.base import (
    LOG_READ_MAX_BYTES,
    DispatchForbiddenError,
    DispatchPermanentError,
    DispatchTransientError,
    ListedPod,
    PodEvent,
    PodLog,
    PodState,
    SessionUnsupportedError,
    TaskExec,
)
from scheduler.dispatch.k8s_sessions import KubeSessions
from scheduler.dispatch.k8s_status import aware, container_events, pod_state
from scheduler.dispatch.pod.manifest import (
    CONTAINER_NAME,
    NODE_SELECTOR_KEY,
    _labels,
    _owner,
    build_files_configmap,
    build_manifest,
    build_service,
    gang_selector,
    pool_selector,
    workflow_selector,
)
from scheduler.dispatch.pod.naming import kube_pod_name
from scheduler.dispatch.pod.objects import credentials_objects, pull_secret
from scheduler.dispatch.pod.request import PodRequest

DEFAULT_PENDING_TIMEOUT_S = 600.0
DEFAULT_REQUEST_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds for every API call
LIST_PAGE_SIZE = 500
# Events of at most this many pods are read one field-selected list per pod; more, one paginated list of
# the namespace's pod events, filtered here (events carry no pod labels to select them by).
EVENTS_PER_POD_MAX = 8
# A collection delete by labels also says "finished pods only", so it can never take a live pod.
FINISHED_FIELD_SELECTOR = "status.phase!=Pending,status.phase!=Running,status.phase!=Unknown"


# ------------------------------------------------------------------------------------------------
# Error mapping
# ------------------------------------------------------------------------------------------------
def api_message(exc: ApiException) -> str:
    """The ``message`` of the API's Status body, falling back to the HTTP reason."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if body:
        try:
            status = json.loads(body)
        except ValueError:
            return str(body)[:500]
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"])
    return str(exc.reason or "")


def _api_reason(exc: ApiException) -> str:
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        status = json.loads(body) if body else {}
    except ValueError:
        return ""
    return str(status.get("reason", "")) if isinstance(status, dict) else ""


AUTH_RETRY_FIRST_DELAY_S = 0.1  # then x2: 0.1, 0.2, 0.4, 0.8 s


def _auth_retries() -> int:
    try:
        return max(int(os.environ.get("OSMO_K8S_AUTH_RETRIES") or 4), 0)
    except ValueError:
        return 4


def _listed(items: list[k8s_client.V1Pod]) -> list[ListedPod]:
    """The named pods of a listing as :class:`ListedPod` rows."""
    out = []
    for pod in items:
        meta = pod.metadata
        if meta is None or not meta.name:
            continue
        node = (pod.spec.node_name or (pod.spec.node_selector or {}).get(NODE_SELECTOR_KEY)) if pod.spec else None
        out.append(ListedPod(name=str(meta.name), phase=(pod.status.phase if pod.status else None) or "Pending",
                             node=node, terminating=meta.deletion_timestamp is not None))
    return out


def _with_auth_retries(call: Any, *, patient: bool = True) -> Any:
    """``call()``, again after a short sleep while it answers 401/403 (at most OSMO_K8S_AUTH_RETRIES
    more times): the window after an API server start when it refuses requests RBAC allows. Not
    ``patient`` (a user waiting on a read): one try."""
    delay = AUTH_RETRY_FIRST_DELAY_S
    retries = _auth_retries() if patient else 0
    for attempt in range(retries + 1):
        try:
            return call()
        except ApiException as exc:
            if exc.status not in (401, 403) or attempt == retries:
                raise
        time.sleep(delay)
        delay *= 2
    raise AssertionError("unreachable")


def _is_transient_status(status: int | None) -> bool:
    # status 0/None: the client gave up before an HTTP answer (SSL error and the like).
    return not status or status in (408, 429) or status >= 500


def _translate(exc: Exception, action: str) -> Exception:
    """The dispatch error for a client exception raised while doing ``action``."""
    if isinstance(exc, ApiException):
        text = f"Kubernetes API {action}: HTTP {exc.status} {_api_reason(exc) or exc.reason or ''}".rstrip()
        text = f"{text}: {api_message(exc)}"
        if _is_transient_status(exc.status):
            return DispatchTransientError(text)
        if exc.status in (401, 403):
            return DispatchForbiddenError(text)
        return DispatchPermanentError(text)
    return DispatchTransientError(f"Kubernetes API {action}: {exc.__class__.__name__}: {exc}")


_CLIENT_ERRORS = (ApiException, Urllib3HTTPError, OSError)


class _ContinueExpired(Exception):
    """A list's continue token expired after its first page (410 Gone): the listing may restart."""

    def __init__(self, api: ApiException) -> None:
        super().__init__(str(api))
        self.api = api


# ------------------------------------------------------------------------------------------------
# The backend
# ------------------------------------------------------------------------------------------------
def kubeconfig_contexts(text: str) -> tuple[dict[str, Any], list[str]]:
    """The kubeconfig document ``text`` and its context names; raises :class:`DispatchPermanentError`
    when it is not a kubeconfig (not YAML, not a mapping, no contexts)."""
    import yaml

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise DispatchPermanentError(f"the kubeconfig is not YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("contexts"), list):
        raise DispatchPermanentError("the kubeconfig has no contexts: it is not a kubeconfig")
    names = [str(item.get("name")) for item in document["contexts"] if isinstance(item, dict) and item.get("name")]
    return document, names


def api_client_from_kubeconfig_text(text: str, *, context: str | None = None) -> k8s_client.ApiClient:
    """An API client for a kubeconfig given as text, in a fresh Configuration."""
    document, contexts = kubeconfig_contexts(text)
    if context and context not in contexts:
        raise DispatchPermanentError(
            f"the kubeconfig has no context {context!r} (it has: {', '.join(contexts) or 'none'})")
    configuration = k8s_client.Configuration()
    try:
        k8s_config.load_kube_config_from_dict(document, context=context or None, persist_config=False,
                                              client_configuration=configuration)
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
        raise DispatchPermanentError(f"Kubernetes kubeconfig configuration unusable: {exc}") from exc
    return k8s_client.ApiClient(configuration)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


class KubernetesBackend:
    """Dispatch through the Kubernetes API (``CoreV1Api``) of one cluster."""

    name = "kubernetes"

    def __init__(self, api_client: k8s_client.ApiClient, *, pending_timeout_s: float | None = None,
                 request_timeout: float | tuple[float, float] = DEFAULT_REQUEST_TIMEOUT) -> None:
        self.api_client = api_client
        self.core = k8s_client.CoreV1Api(api_client)
        if pending_timeout_s is None:
            pending_timeout_s = float(os.environ.get("OSMO_K8S_PENDING_TIMEOUT") or DEFAULT_PENDING_TIMEOUT_S)
        self.pending_timeout_s = float(pending_timeout_s)
        self.request_timeout = request_timeout
        read_timeout = request_timeout[1] if isinstance(request_timeout, tuple) else request_timeout
        self.sessions = KubeSessions(self.core, timeout=float(read_timeout))

    @classmethod
    def from_settings(cls, *, kubeconfig: str | None = None, context: str | None = None,
                      in_cluster: bool | None = None, api_client: k8s_client.ApiClient | None = None,
                      pending_timeout_s: float | None = None,
                      request_timeout: float | tuple[float, float] = DEFAULT_REQUEST_TIMEOUT) -> KubernetesBackend:
        """A backend for a cluster given by a kubeconfig file/context, in-cluster config, or a ready client.

        Unset arguments come from ``KUBECONFIG``, ``OSMO_K8S_CONTEXT``, ``OSMO_K8S_IN_CLUSTER`` and
        ``OSMO_K8S_PENDING_TIMEOUT``. The configuration is loaded into a fresh
        ``kubernetes.client.Configuration``; the client's global default is never touched.
        """
        if api_client is None:
            if in_cluster is None:
                in_cluster = _env_flag("OSMO_K8S_IN_CLUSTER")
            configuration = k8s_client.Configuration()
            try:
                if in_cluster:
                    k8s_config.load_incluster_config(client_configuration=configuration)
                else:
                    k8s_config.load_kube_config(
                        config_file=kubeconfig or os.environ.get("KUBECONFIG") or None,
                        context=context or os.environ.get("OSMO_K8S_CONTEXT") or None,
                        client_configuration=configuration,
                        persist_config=False,
                    )
            except (ConfigException, OSError) as exc:
                where = "in-cluster" if in_cluster else "kubeconfig"
                raise DispatchPermanentError(f"Kubernetes {where} configuration unusable: {exc}") from exc
            api_client = k8s_client.ApiClient(configuration)
        return cls(api_client, pending_timeout_s=pending_timeout_s, request_timeout=request_timeout)

    @classmethod
    def from_kubeconfig_text(cls, text: str, *, context: str | None = None, pending_timeout_s: float | None = None,
                             request_timeout: float | tuple[float, float] = DEFAULT_REQUEST_TIMEOUT
                             ) -> KubernetesBackend:
        """A backend for the cluster of a kubeconfig held in memory (a named backend's, decrypted from the
        database): never written to disk, the client's global default never touched. An unreadable
        document or an unknown context raises :class:`DispatchPermanentError` saying which."""
        return cls(api_client_from_kubeconfig_text(text, context=context), pending_timeout_s=pending_timeout_s,
                   request_timeout=request_timeout)

    # -- PodBackend -----------------------------------------------------------------------------
    def create_pod(self, pod: PodRequest) -> None:
        """Create the pod, then its files' ConfigMap, its credentials' Secret, its image pull Secret and
        its group's Service, all owned by the pod (so they go with it; the kubelet starts the container
        once the ConfigMap and the Secret exist, and retries a pull that found no pull Secret yet)."""
        manifest = build_manifest(pod)
        name = manifest["metadata"]["name"]
        action = f"create pod {pod.namespace}/{name}"
        uid = ""
        try:
            # client 37 sends no Content-Type for this call by default; say it is JSON explicitly.
            created = _with_auth_retries(lambda: self.core.create_namespaced_pod(
                pod.namespace, manifest,  # type: ignore[arg-type]  # dicts are serialised as is
                _headers={"Content-Type": "application/json"}, _request_timeout=self.request_timeout))
            uid = str(created.metadata.uid or "") if created is not None and created.metadata else ""
        except ApiException as exc:
            if exc.status != 409:  # AlreadyExists: the deterministic name says it is this task's pod
                raise _translate(exc, action) from exc
        except _CLIENT_ERRORS as exc:
            raise _translate(exc, action) from exc
        if not pod.files and not pod.subdomain and not pod.credentials and not pod.pull_config:
            return
        if not uid:  # created by an earlier attempt: its owned objects may be missing
            uid = self._pod_uid(pod.namespace, name)
        configmap = build_files_configmap(pod, owner_uid=uid)
        if configmap is not None:
            self._create_owned(self.core.create_namespaced_config_map, pod.namespace, configmap, None)
        secret = credentials_objects(pod, labels=_labels(pod), owner=_owner(pod, uid))
        if secret is not None:
            self._create_owned(self.core.create_namespaced_secret, pod.namespace, secret.manifest, None)
        pull = pull_secret(pod, labels=_labels(pod), owner=_owner(pod, uid))
        if pull is not None:
            self._create_owned(self.core.create_namespaced_secret, pod.namespace, pull, None)
        service = build_service(pod, owner_uid=uid)
        if service is not None:
            self._service_owner_add(pod, service, uid)

    def _service_owner_add(self, pod: PodRequest, service: dict[str, Any], uid: str) -> None:
        """Add the pod to the owners of its group's Service, creating the Service when it does not
        exist: one PATCH for every pod but the group's first (a strategic merge keeps the other
        owners, merged by uid)."""
        owner = {"metadata": {"ownerReferences": [_owner(pod, uid)]}}
        action = f"add pod {kube_pod_name(pod.pod_name)} to the owners of service {pod.namespace}/{pod.subdomain}"

        def patch() -> Any:
            return self.core.patch_namespaced_service(
                pod.subdomain, pod.namespace, owner,
                _headers={"Content-Type": "application/strategic-merge-patch+json"},
                _request_timeout=self.request_timeout)

        try:
            _with_auth_retries(patch)
            return
        except ApiException as exc:
            if exc.status != 404:
                raise _translate(exc, action) from exc
        except _CLIENT_ERRORS as exc:
            raise _translate(exc, action) from exc
        self._create_owned(self.core.create_namespaced_service, pod.namespace, service, patch)

    def _pod_uid(self, namespace: str, name: str) -> str:
        try:
            read = _with_auth_retries(lambda: self.core.read_namespaced_pod(name, namespace,
                                                                            _request_timeout=self.request_timeout))
        except _CLIENT_ERRORS as exc:
            raise _translate(exc, f"read pod {namespace}/{name}") from exc
        return str(read.metadata.uid or "") if read.metadata else ""

    def _create_owned(self, create: Any, namespace: str, body: dict[str, Any], on_exists: Any) -> None:
        """Create an object the pod owns; when it exists already, ``on_exists()`` (e.g. add this pod to
        the Service's owners; a strategic merge keeps the other owners, merged by uid)."""
        action = f"create {body['kind']} {namespace}/{body['metadata']['name']}"
        try:
            _with_auth_retries(lambda: create(namespace, body, _headers={"Content-Type": "application/json"},
                                              _request_timeout=self.request_timeout))
        except ApiException as exc:
            if exc.status != 409:
                raise _translate(exc, action) from exc
            if on_exists is None:
                return
            try:
                _with_auth_retries(on_exists)
            except _CLIENT_ERRORS as patch_exc:
                raise _translate(patch_exc, f"add owner to {body['kind']} {namespace}/{body['metadata']['name']}"
                                 ) from patch_exc
        except _CLIENT_ERRORS as exc:
            raise _translate(exc, action) from exc

    def delete_pod(self, *, namespace: str, pod_name: str, grace_seconds: int | None = None) -> None:
        name = kube_pod_name(pod_name)
        try:
            _with_auth_retries(lambda: self.core.delete_namespaced_pod(name, namespace,
                                                                       grace_period_seconds=grace_seconds,
                                                                       _request_timeout=self.request_timeout))
        except ApiException as exc:
            if exc.status == 404:  # already gone
                return
            raise _translate(exc, f"delete pod {namespace}/{name}") from exc
        except _CLIENT_ERRORS as exc:
            raise _translate(exc, f"delete pod {namespace}/{name}") from exc

    def gang_finished_pods_delete(self, *, namespace: str, pool: str, workflow_id: str, group: str) -> None:
        """One ``DELETE .../pods?labelSelector=<gang>&fieldSelector=<finished>`` (a collection delete)."""
        selector = gang_selector(pool=pool, workflow_id=workflow_id, group=group)
        action = f"delete finished pods of {workflow_id}/{group} in {namespace}"
        try:
            _with_auth_retries(lambda: self.core.delete_collection_namespaced_pod(
                namespace, label_selector=selector, field_selector=FINISHED_FIELD_SELECTOR,
                _request_timeout=self.request_timeout))
        except ApiException as exc:
            if exc.status == 404:  # the namespace is gone, and its pods with it
                return
            raise _translate(exc, action) from exc
        except _CLIENT_ERRORS as exc:
            raise _translate(exc, action) from exc

    def pod_states(self, pods: Iterable[PodRequest], *, now: datetime) -> dict[str, PodState]:
        requests = list(pods)
        wanted: dict[tuple[str, str], list[PodRequest]] = defaultdict(list)
        for pod in requests:
            wanted[(pod.namespace, pod.pool)].append(pod)
        states: dict[str, PodState] = {}
        for (namespace, pool), some in wanted.items():
            states.update(self._states(self._list_pods(namespace, pool_selector(pool)), some, now=now))
        return states

    def pods_list(self, *, namespace: str, pool: str) -> list[ListedPod]:
        return _listed(self._list_pods(namespace, pool_selector(pool)))

    def pods_observe(self, pods: Iterable[PodRequest], *, namespace: str, pool: str, now: datetime
                     ) -> tuple[list[ListedPod], dict[str, PodState]]:
        """``pods_list`` and ``pod_states`` of pods of this namespace and pool from one listing."""
        items = self._list_pods(namespace, pool_selector(pool))
        return _listed(items), self._states(items, list(pods), now=now)

    def _states(self, items: list[k8s_client.V1Pod], requests: list[PodRequest], *, now: datetime
                ) -> dict[str, PodState]:
        by_name = {kube_pod_name(pod.pod_name): pod for pod in requests}
        states: dict[str, PodState] = {pod.pod_name: PodState("Missing") for pod in requests}
        for listed in items:
            request = by_name.get(listed.metadata.name or "") if listed.metadata else None
            if request is not None:
                states[request.pod_name] = pod_state(listed, dispatched_at=request.dispatched_at, now=now,
                                                     pending_timeout_s=self.pending_timeout_s)
        return states

    def pod_log(self, pod: PodRequest, *, tail: int, now: datetime) -> PodLog:
        """The last ``tail`` lines of the ``task`` container's log (``tail + 1`` are asked for, so that
        a longer log is known to be truncated)."""
        name = kube_pod_name(pod.pod_name)
        action = f"read log of pod {pod.namespace}/{name}"
        try:
            response = _with_auth_retries(lambda: self.core.read_namespaced_pod_log(
                name, pod.namespace, container=CONTAINER_NAME, tail_lines=tail + 1, limit_bytes=LOG_READ_MAX_BYTES,
                _preload_content=False, _request_timeout=self.request_timeout), patient=False)
            raw = response.data
        except _CLIENT_ERRORS as exc:
            raise _translate(exc, action) from exc
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")
        lines = text.splitlines()
        if len(raw or b"") >= LOG_READ_MAX_BYTES:  # cut at the byte limit: its last line may be partial
            return PodLog(tuple(lines[:-1][-tail:]) if tail else (), truncated=True)
        return PodLog(tuple(lines[-tail:]) if tail else (), truncated=len(lines) > tail)

    def pod_events(self, pods: Iterable[PodRequest], *, now: datetime) -> list[PodEvent]:
        """The pods' Kubernetes events, and the reasons their containers' states give (OOMKilled,
        ImagePullBackOff, ...; the events do not always say them). Calls: per namespace, one
        field-selected event list per pod for a few pods, else one paginated list of the namespace's
        pod events; plus one paginated list of the workflow's pods (by label, not the whole pool's)."""
        by_namespace: dict[str, dict[str, PodRequest]] = defaultdict(dict)
        for pod in pods:
            by_namespace[pod.namespace][kube_pod_name(pod.pod_name)] = pod
        events: list[PodEvent] = []
        for namespace, by_name in by_namespace.items():
            if len(by_name) <= EVENTS_PER_POD_MAX:
                selectors = [f"involvedObject.kind=Pod,involvedObject.name={name}" for name in by_name]
            else:
                selectors = ["involvedObject.kind=Pod"]
            for selector in selectors:
                for event in self._list_events(namespace, selector, patient=False):
                    obj = event.involved_object
                    request = by_name.get(obj.name or "") if obj is not None else None
                    if request is None:
                        continue
                    moment = event.last_timestamp or event.event_time or event.first_timestamp or (
                        event.metadata.creation_timestamp if event.metadata else None) or now
                    message = (event.message or "").strip()
                    if (event.count or 1) > 1:
                        message = f"{message} (x{event.count})"
                    events.append(PodEvent(aware(moment), request.pod_name, event.reason or event.type or "",
                                           message))
            for pool, workflow_id in sorted({(request.pool, request.workflow_id) for request in by_name.values()}):
                selector = workflow_selector(pool=pool, workflow_id=workflow_id)
                for listed in self._list_pods(namespace, selector, patient=False):
                    request = by_name.get(listed.metadata.name or "") if listed.metadata else None
                    if request is not None:
                        events.extend(container_events(listed, request.pod_name, now=now))
        return events

    # -- SessionBackend (scheduler.dispatch.k8s_sessions: pods/exec and pods/portforward) ----------
    def exec_start(self, *, namespace: str, pod_name: str, argv: Sequence[str], tty: bool = False) -> TaskExec:
        """Start ``argv`` in the pod's ``task`` container (as its user, in its namespaces and limits)."""
        return self.sessions.exec_start(namespace=namespace, name=kube_pod_name(pod_name), argv=argv, tty=tty)

    def task_ports(self, *, namespace: str, pod_name: str) -> dict[int, str]:
        """The TCP ports listened on in the pod's network (read by an exec in its ``task`` container)."""
        return self.sessions.task_ports(namespace=namespace, name=kube_pod_name(pod_name))

    def port_connect(self, *, namespace: str, pod_name: str, port: int, timeout: float = 10.0) -> socket.socket:
        """A connection to a port the pod listens on, through the API server's port-forward."""
        return self.sessions.port_connect(namespace=namespace, name=kube_pod_name(pod_name), port=port)

    def task_udp_ports(self, *, namespace: str, pod_name: str) -> dict[int, str]:
        """Refused: the API server's ``pods/portforward`` carries TCP streams only (kubectl's cannot do UDP)."""
        raise SessionUnsupportedError(self.name, "the Kubernetes API's port-forward carries TCP only (kubectl "
                                                 "port-forward cannot forward UDP either), so --udp is refused; "
                                                 "forward a TCP port")

    # -- helpers --------------------------------------------------------------------------------
    def _paged(self, call: Any, namespace: str, *, patient: bool, **selector: str) -> list[Any]:
        """Every item of a namespaced list call (``list_namespaced_pod``/``_event``) matching
        ``selector``, following ``continue`` tokens (each page with :func:`_with_auth_retries`).
        Raises ``ApiException`` and client errors as is; a 410 Gone after the first page is raised as
        :class:`_ContinueExpired`."""
        items: list[Any] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {**selector, "limit": LIST_PAGE_SIZE, "_request_timeout": self.request_timeout}
            if token:
                kwargs["_continue"] = token
            try:
                page = _with_auth_retries(functools.partial(call, namespace, **kwargs), patient=patient)
            except ApiException as exc:
                if exc.status == 410 and token:
                    raise _ContinueExpired(exc) from exc
                raise
            items.extend(page.items or [])
            token = page.metadata._continue if page.metadata else None
            if not token:
                return items

    def _list_events(self, namespace: str, field_selector: str, *, patient: bool = True) -> list[Any]:
        """Every event matching ``field_selector`` in ``namespace``, following ``continue`` tokens."""
        try:
            return self._paged(self.core.list_namespaced_event, namespace, patient=patient,
                               field_selector=field_selector)
        except _ContinueExpired as exc:
            raise _translate(exc.api, f"list events in {namespace}") from exc
        except _CLIENT_ERRORS as exc:
            raise _translate(exc, f"list events in {namespace}") from exc

    def _list_pods(self, namespace: str, selector: str, *, patient: bool = True) -> list[k8s_client.V1Pod]:
        """All pods matching ``selector`` in ``namespace``, following ``continue`` tokens.

        A 410 Gone (the continue token expired mid-listing) restarts the listing once from the top.
        """
        for attempt in range(2):
            try:
                return self._paged(self.core.list_namespaced_pod, namespace, patient=patient, label_selector=selector)
            except _ContinueExpired as exc:
                if attempt == 0:
                    continue
                raise _translate(exc.api, f"list pods in {namespace}") from exc
            except _CLIENT_ERRORS as exc:
                raise _translate(exc, f"list pods in {namespace}") from exc
        raise DispatchTransientError(f"Kubernetes API list pods in {namespace}: continue token kept expiring")

