"""A small stateful Kubernetes API server over real HTTP, for tests with several clusters at once: it
keeps the pods it is sent (so a listing returns what was created, and a second create of one name is a
409), lists nodes and pods in the API's shapes, and can go down (connections refused) or hang
(connections accepted, never answered) and come back on the same port. Only what the service calls is
played: pods (create, get, list by label selector, delete, collection delete), nodes (list, get) and
the owned objects beside a pod (ConfigMaps, Secrets, Services: accepted and forgotten)."""

from __future__ import annotations

import json
import socket
import threading
import uuid
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MANAGED = "app.kubernetes.io/managed-by"


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (selector or "").split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


def kubeconfig_for(url: str, *, name: str = "fake", token: str = "token") -> str:
    """A kubeconfig (token user) whose one context points at ``url``."""
    return (f"apiVersion: v1\nkind: Config\ncurrent-context: {name}\n"
            f"clusters:\n- name: {name}\n  cluster: {{server: '{url}'}}\n"
            f"users:\n- name: {name}\n  user: {{token: {token}}}\n"
            f"contexts:\n- name: {name}\n  context: {{cluster: {name}, user: {name}}}\n")


class FakeCluster:
    """``nodes``: name -> labels (each node 8 GPUs, Ready). ``creates`` counts POSTs of each pod name;
    ``forbidden`` is a set of (method, path prefix) answered 403 as the API server words it."""

    def __init__(self, nodes: dict[str, dict[str, str]], *, port: int = 0) -> None:
        self.nodes = dict(nodes)
        self.pods: dict[str, dict[str, Any]] = {}
        self.creates: Counter[str] = Counter()
        self.forbidden: set[tuple[str, str]] = set()
        self.taints: dict[str, list[dict[str, str]]] = {}  # node name -> its spec.taints
        self.conditions: dict[str, list[dict[str, str]]] = {}  # node name -> conditions beside Ready=True
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        self._port = port
        self._server: ThreadingHTTPServer | None = None
        self._hang: socket.socket | None = None
        self._connections: set[socket.socket] = set()

    # -- life --------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> FakeCluster:
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                cluster._connections.add(self.connection)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                cluster._handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                cluster._handle(self, "POST")

            def do_PATCH(self) -> None:  # noqa: N802
                cluster._handle(self, "PATCH")

            def do_DELETE(self) -> None:  # noqa: N802
                cluster._handle(self, "DELETE")

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self._server = ThreadingHTTPServer(("127.0.0.1", self._port), Handler)
        self._server.daemon_threads = True
        self._port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Down: the port refuses connections (the pods it holds are kept, as a cluster's are)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        for connection in list(self._connections):  # kept-alive connections too: the client's pool holds them
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            connection.close()
        self._connections.clear()
        if self._hang is not None:
            self._hang.close()
            self._hang = None

    def hang(self) -> None:
        """Up but silent: connections are accepted (the kernel's backlog) and never answered."""
        self.stop()
        self._hang = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._hang.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._hang.bind(("127.0.0.1", self._port))
        self._hang.listen(128)

    # -- what a test does to the cluster ------------------------------------------------------------
    def pods_set_phase(self, phase: str) -> None:
        with self.lock:
            for pod in self.pods.values():
                pod["status"] = {"phase": phase, **({"containerStatuses": [{
                    "name": "task", "ready": False, "restartCount": 0, "image": "busybox", "imageID": "",
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]} if phase == "Succeeded" else {})}

    # -- the API -----------------------------------------------------------------------------------
    def _send(self, handler: BaseHTTPRequestHandler, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _status(self, handler: BaseHTTPRequestHandler, code: int, reason: str, message: str) -> None:
        self._send(handler, code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": message, "reason": reason, "code": code})

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(handler.path)
        query = {key: values[0] for key, values in parse_qs(url.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        body = json.loads(handler.rfile.read(length) or b"null") if length else None
        parts = url.path.strip("/").split("/")
        with self.lock:
            self.requests.append((method, url.path))
            for refused_method, prefix in self.forbidden:
                if method == refused_method and url.path.startswith(prefix):
                    resource = "nodes" if "/nodes" in url.path else "pods"
                    verb = {"GET": "get" if resource == "nodes" and len(parts) > 3 else "list", "POST": "create",
                            "PATCH": "patch", "DELETE": "delete"}[method]
                    scope = "at the cluster scope" if "namespaces" not in url.path else "in the namespace"
                    self._status(handler, 403, "Forbidden",
                                 f'{resource} is forbidden: User "system:serviceaccount:osmo:osmo-scheduler" '
                                 f'cannot {verb} resource "{resource}" in API group "" {scope}')
                    return
            self._route(handler, method, parts, query, body)

    def _route(self, handler: BaseHTTPRequestHandler, method: str, parts: list[str], query: dict[str, str],
               body: Any) -> None:
        # /api/v1/nodes[/name]
        if parts[:3] == ["api", "v1", "nodes"]:
            if len(parts) == 4:
                labels = self.nodes.get(parts[3])
                if labels is None:
                    return self._status(handler, 404, "NotFound", f'nodes "{parts[3]}" not found')
                return self._send(handler, 200, self._node(parts[3], labels))
            items = [self._node(name, labels) for name, labels in sorted(self.nodes.items())
                     if _matches(labels, query.get("labelSelector", ""))]
            return self._send(handler, 200, {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items})
        # /api/v1/pods (all namespaces)
        if parts[:3] == ["api", "v1", "pods"]:
            items = [pod for pod in self.pods.values() if self._alive(pod, query)]
            return self._send(handler, 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
        # /api/v1/namespaces/{ns}/{resource}[/name]
        if parts[:3] != ["api", "v1", "namespaces"] or len(parts) < 5:
            return self._status(handler, 404, "NotFound", "no such path")
        namespace, resource, name = parts[3], parts[4], parts[5] if len(parts) > 5 else None
        if resource != "pods":  # configmaps, secrets, services: accepted (a PATCH of a missing Service: 404)
            if method == "PATCH":
                return self._status(handler, 404, "NotFound", f'{resource} "{name}" not found')
            return self._send(handler, 201, body or {})
        if method == "POST":
            pod_name = body["metadata"]["name"]
            self.creates[pod_name] += 1
            if pod_name in self.pods:
                return self._status(handler, 409, "AlreadyExists", f'pods "{pod_name}" already exists')
            pod = {**body, "metadata": {**body["metadata"], "namespace": namespace, "uid": str(uuid.uuid4()),
                                        "creationTimestamp": "2030-01-01T00:00:00Z"},
                   "status": {"phase": "Running"}}
            pod["spec"] = {**pod["spec"], "nodeName": pod["spec"].get("nodeSelector", {}).get("kubernetes.io/hostname")}
            self.pods[pod_name] = pod
            return self._send(handler, 201, pod)
        if method == "GET" and name is None:
            items = [pod for pod in self.pods.values() if pod["metadata"]["namespace"] == namespace
                     and _matches(pod["metadata"].get("labels", {}), query.get("labelSelector", ""))]
            return self._send(handler, 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items})
        if method == "GET":
            if name not in self.pods:
                return self._status(handler, 404, "NotFound", f'pods "{name}" not found')
            return self._send(handler, 200, self.pods[name])
        if method == "DELETE" and name is None:
            for pod_name in [n for n, pod in self.pods.items()
                             if _matches(pod["metadata"].get("labels", {}), query.get("labelSelector", ""))
                             and pod["status"]["phase"] in ("Succeeded", "Failed")]:
                del self.pods[pod_name]
            return self._send(handler, 200, {"kind": "Status", "status": "Success"})
        if method == "DELETE":
            self.pods.pop(name, None)
            return self._send(handler, 200, {"kind": "Status", "status": "Success"})
        return self._status(handler, 405, "MethodNotAllowed", method)

    @staticmethod
    def _alive(pod: dict[str, Any], query: dict[str, str]) -> bool:
        selector = query.get("fieldSelector", "")
        if "spec.nodeName=" in selector:
            node = selector.split("spec.nodeName=")[1].split(",")[0]
            if pod["spec"].get("nodeName") != node:
                return False
        return pod["status"]["phase"] not in ("Succeeded", "Failed")

    def _node(self, name: str, labels: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
                "spec": {"taints": self.taints[name]} if name in self.taints else {},
                "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "ephemeral-storage": "1Ti",
                                           "nvidia.com/gpu": "8"},
                           "conditions": [{"type": "Ready", "status": "True"}, *self.conditions.get(name, [])]}}
