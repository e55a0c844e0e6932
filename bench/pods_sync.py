"""Pod status read-back benchmark: ``python -m bench.pods_sync [--pods N] [--repeat R] [--json]``.

What one sync of a Kubernetes pool asks the API for (``pods_observe``: one listing for the reconcile
and the states of every dispatched pod; see docs/kubernetes.md §5, §6), with ``N`` (default 5,000) of
the service's pods in the namespace, against a local fake API server that pages its PodList as
kube-apiserver does (``limit`` / ``continue``). Three ways side by side:

- ``paged-500``: the backend as it is (label-selected list, 500 pods per page);
- ``paged-50``: the same with 50 pods per page;
- ``per-pod``: the baseline of one ``GET pods/<name>`` per dispatched pod (what reading each task's
  pod would cost).

One line per way: list calls, requests per sync, time per sync (median of ``R``), and each as a
ratio to ``paged-500``. The official client does the HTTP and deserialisation; nothing is mocked.
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes import client as k8s_client

from scheduler.dispatch import kubernetes as kube
from scheduler.dispatch.pod.request import PodRequest

NAMESPACE = "osmo-jobs"
POOL = "nvl72"
CREATED = "2025-06-01T12:00:00Z"


def pod_body(index: int) -> dict[str, Any]:
    """A running pod of the service as the API lists it (the fields the backend reads, and labels)."""
    name = f"bench-1-t{index:05d}"
    node = f"node-{index // 4:05d}"
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"00000000-0000-4000-8000-{index:012d}",
                     "resourceVersion": str(1000 + index), "creationTimestamp": CREATED,
                     "labels": {kube.LABEL_WORKFLOW: "bench-1", kube.LABEL_GROUP: "g", kube.LABEL_TASK: f"t{index}",
                                kube.LABEL_POOL: POOL, kube.LABEL_MANAGED_BY: kube.MANAGED_BY}},
        "spec": {"restartPolicy": "Never", "nodeName": node, "nodeSelector": {kube.NODE_SELECTOR_KEY: node},
                 "containers": [{"name": "task", "image": "busybox"}]},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "task", "image": "busybox", "imageID": "", "ready": True, "restartCount": 0,
             "state": {"running": {"startedAt": CREATED}}}]},
    }


class PagingApi:
    """A fake API server holding ``pods`` pods; pages lists by ``limit``/``continue``; counts requests."""

    def __init__(self, pods: int) -> None:
        self.bodies = [pod_body(i) for i in range(pods)]
        self.by_name = {body["metadata"]["name"]: body for body in self.bodies}
        self.lists = self.gets = 0
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                api.serve(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = parse_qs(parts.query)
        collection = f"/api/v1/namespaces/{NAMESPACE}/pods"
        if parts.path == collection:
            self.lists += 1
            start = int((query.get("continue") or ["0"])[0])
            limit = int((query.get("limit") or [str(len(self.bodies))])[0])
            items = self.bodies[start:start + limit]
            metadata: dict[str, Any] = {"resourceVersion": "99999"}
            if start + limit < len(self.bodies):
                metadata["continue"] = str(start + limit)
            body: Any = {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items}
            status = 200
        else:
            self.gets += 1
            body = self.by_name.get(parts.path.rsplit("/", 1)[-1])
            status = 200 if body else 404
        payload = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def requests_for(pods: int) -> list[PodRequest]:
    return [PodRequest(pod_name=f"bench-1-t{i:05d}", namespace=NAMESPACE, node_name=f"node-{i // 4:05d}",
                       workflow_id="bench-1", group="g", task=f"t{i}", pool=POOL, image="busybox",
                       dispatched_at=datetime(2025, 6, 1, 12, 0, 1, tzinfo=UTC)) for i in range(pods)]


def sync_paged(backend: kube.KubernetesBackend, requests: list[PodRequest], now: datetime) -> int:
    """What one sync asks: one listing for the reconcile and the states of the dispatched pods."""
    listed, states = backend.pods_observe(requests, namespace=NAMESPACE, pool=POOL, now=now)
    assert len(listed) == len(requests) and all(s.phase == "Running" for s in states.values())
    return len(states)


def sync_per_pod(backend: kube.KubernetesBackend, requests: list[PodRequest], now: datetime) -> int:
    """The baseline: one read per dispatched pod."""
    running = 0
    for request in requests:
        pod = backend.core.read_namespaced_pod(request.pod_name, NAMESPACE, _request_timeout=backend.request_timeout)
        running += kube.pod_state(pod, dispatched_at=request.dispatched_at, now=now,
                                  pending_timeout_s=backend.pending_timeout_s).phase == "Running"
    assert running == len(requests)
    return running


def measure(way: str, api: PagingApi, requests: list[PodRequest], repeat: int) -> dict[str, Any]:
    configuration = k8s_client.Configuration()
    configuration.host = api.url
    backend = kube.KubernetesBackend(k8s_client.ApiClient(configuration), request_timeout=(5.0, 60.0))
    page_size = kube.LIST_PAGE_SIZE
    kube.LIST_PAGE_SIZE = 50 if way == "paged-50" else page_size
    now = datetime(2025, 6, 1, 12, 1, tzinfo=UTC)
    times: list[float] = []
    try:
        for _ in range(repeat):
            api.lists = api.gets = 0
            started = time.perf_counter()
            (sync_per_pod if way == "per-pod" else sync_paged)(backend, requests, now)
            times.append(time.perf_counter() - started)
    finally:
        kube.LIST_PAGE_SIZE = page_size
        backend.api_client.close()
    return {"way": way, "pods": len(requests), "list_calls": api.lists, "requests_per_sync": api.lists + api.gets,
            "seconds_per_sync": round(statistics.median(times), 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object per line")
    args = parser.parse_args(argv)
    api = PagingApi(args.pods)
    requests = requests_for(args.pods)
    try:
        rows = [measure(way, api, requests, args.repeat) for way in ("paged-500", "paged-50", "per-pod")]
    finally:
        api.stop()
    base = rows[0]
    for row in rows:
        row["requests_ratio"] = round(row["requests_per_sync"] / base["requests_per_sync"], 1)
        row["time_ratio"] = round(row["seconds_per_sync"] / base["seconds_per_sync"], 1)
        if args.json:
            print(json.dumps(row))
        else:
            print(f"{row['way']:>9}: {row['pods']} pods, {row['list_calls']:>3} list calls, "
                  f"{row['requests_per_sync']:>5} requests/sync (x{row['requests_ratio']}), "
                  f"{row['seconds_per_sync']:.3f} s/sync (x{row['time_ratio']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
