"""The cluster-facing half of the periodic Kubernetes sync (docs/kubernetes.md §9) at scale:
``python -m bench.k8s_sync --json`` (no database needed).

A local HTTP server on the loopback (its own process) serves recorded pages in the API's shapes: a
``NodeList`` of ``--nodes`` nodes (default 20,000) and a ``PodList`` of ``--pods`` other tenants' pods
(default 100,000) plus one pod of ours per ten nodes, paginated with ``continue`` tokens (``limit`` =
``--page-size``, default 500). Measured, through the real kubernetes client:

- ``listing``: this sync: the node list and one pod list of all namespaces (``fieldSelector``
  non-terminal), summed per node page by page (:func:`scheduler.services.kubernetes_foreign_usage`);
- ``per_node``: the alternative, the same node list then the pods of each node
  (``fieldSelector=spec.nodeName=<node>,...``), one request per node;

each with requests, wall seconds, and the client process's peak RSS after it (``ru_maxrss``; the
listing runs first, so the per-node figure is at least the listing's). ``ratio`` is per-node seconds
over listing seconds. Both answers are compared (same usage per node). Database writes are not
included: they are the same rows either way (``bench.kit.pools`` measures node writes).

``--backends N`` (several clusters behind one service, docs/kubernetes.md §1a) measures instead, in the
same run, the listing of one cluster of ``--nodes`` nodes against N clusters of ``--nodes``/N nodes each
(and ``--pods``/N pods each), each with its own server process and its own client, synced one after the
other as one worker slot would: requests per backend, seconds, and ``ratio`` = the N backends' seconds
over the one's (the goal: at most 2).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import resource
import sys
import time
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings.local")
django.setup()

from kubernetes import client as k8s_client  # noqa: E402

from scheduler.inventory import NON_TERMINAL_PODS, foreign_usage, node_list_page  # noqa: E402
from scheduler.services.kubernetes_sync import kubernetes_foreign_usage, kubernetes_nodes_list  # noqa: E402

MANAGED_BY_LABEL, MANAGED_BY = "app.kubernetes.io/managed-by", "osmo"


def _node(index: int) -> dict:
    name = f"gpu-{index:05d}"
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "918001",
                     "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.present": "true",
                                "nvidia.com/gpu-clique": f"clique-{index // 18}",
                                "topology.kubernetes.io/zone": f"zone-{index // 5184}"}},
        "spec": {"podCIDR": "10.244.1.0/24", "providerID": f"baremetal://{name}"},
        "status": {"capacity": {"cpu": "144", "memory": "960Gi", "nvidia.com/gpu": "4", "pods": "110"},
                   "allocatable": {"cpu": "143500m", "memory": "1006392860Ki", "ephemeral-storage": "3683282291043",
                                   "nvidia.com/gpu": "4", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]},
    }


def _pod(index: int, node: str, *, ours: bool, rng: random.Random) -> dict:
    labels = {"app": f"tenant-{index % 97}"}
    if ours:
        labels.update({MANAGED_BY_LABEL: MANAGED_BY, "osmo.nvidia.com/pool": "big"})
    requests = {"cpu": f"{rng.choice((100, 250, 500, 1000, 4000))}m", "memory": f"{rng.choice((1, 2, 8))}Gi"}
    if rng.random() < 0.2:
        requests["nvidia.com/gpu"] = str(rng.choice((1, 2)))
    return {"metadata": {"name": f"pod-{index}", "namespace": f"team-{index % 13}", "uid": f"uid-pod-{index}",
                         "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox",
                                                        "resources": {"requests": requests}}]},
            "status": {"phase": "Running"}}


def _pages(kind: str, items: list[dict], page_size: int, prefix: str) -> dict[str | None, bytes]:
    pages: dict[str | None, bytes] = {}
    for start in range(0, max(len(items), 1), page_size):
        token = None if start == 0 else f"{prefix}-{start}"
        following = start + page_size
        metadata: dict = {"resourceVersion": "918273"}
        if following < len(items):
            metadata.update({"continue": f"{prefix}-{following}", "remainingItemCount": len(items) - following})
        pages[token] = json.dumps({"kind": kind, "apiVersion": "v1", "metadata": metadata,
                                   "items": items[start:following]}).encode()
    return pages


def _serve(port_out: multiprocessing.Queue, nodes: int, pods: int, page_size: int) -> None:
    """The recorded cluster: built here, in the server's process, so the client's memory is its own."""
    rng = random.Random(1)
    node_items = [_node(i) for i in range(nodes)]
    names = [item["metadata"]["name"] for item in node_items]
    pod_items = [_pod(i, rng.choice(names), ours=False, rng=rng) for i in range(pods)]
    pod_items += [_pod(pods + i, names[i * 10], ours=True, rng=rng) for i in range(nodes // 10)]
    rng.shuffle(pod_items)
    node_pages = _pages("NodeList", node_items, page_size, "n")
    pod_pages = _pages("PodList", pod_items, page_size, "p")
    by_node: dict[str, list[dict]] = defaultdict(list)
    for item in pod_items:
        by_node[item["spec"]["nodeName"]].append(item)
    per_node = {name: _pages("PodList", by_node.get(name, []), 10**9, "x")[None] for name in names}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the client's connection pool expects
        disable_nagle_algorithm = True  # headers and body leave at once, as an apiserver's do
        wbufsize = 1 << 16

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            url = urlparse(self.path)
            query = parse_qs(url.query)
            token = query.get("continue", [None])[0]
            body: bytes | None = None
            if url.path == "/api/v1/nodes":
                body = node_pages.get(token)
            elif url.path == "/api/v1/pods":
                selector = query.get("fieldSelector", [""])[0]
                node = next((part.split("=", 1)[1] for part in selector.split(",")
                             if part.startswith("spec.nodeName=")), None)
                body = per_node.get(node) if node is not None else pod_pages.get(token)
            if body is None:
                body, code = b'{"kind":"Status","status":"Failure","reason":"NotFound","code":404}', 404
            else:
                code = 200
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_out.put(httpd.server_address[1])
    httpd.serve_forever()


def _peak_rss_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _listing(core, page_size: int) -> tuple[dict, int]:
    nodes, node_requests = kubernetes_nodes_list(core, label_selector=None, page_size=page_size)
    names = [item["metadata"]["name"] for item in nodes]
    usage, _counted, pod_requests = kubernetes_foreign_usage(core, nodes=names, managed_by_label=MANAGED_BY_LABEL,
                                                             managed_by=MANAGED_BY, page_size=page_size)
    return usage, node_requests + pod_requests


def _per_node(core, page_size: int) -> tuple[dict, int]:
    nodes, requests = kubernetes_nodes_list(core, label_selector=None, page_size=page_size)
    usage: dict = {}
    for item in nodes:
        name = item["metadata"]["name"]
        response = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={name},{NON_TERMINAL_PODS}",
                                                    _preload_content=False)
        requests += 1
        pods = node_list_page(response.data).items
        usage.update(foreign_usage(pods, nodes=[name], managed_by_label=MANAGED_BY_LABEL,
                                   managed_by=MANAGED_BY)[0])
    return usage, requests


def _servers(count: int, nodes: int, pods: int, page_size: int) -> tuple[list[multiprocessing.Process], list[str]]:
    ports: multiprocessing.Queue = multiprocessing.Queue()
    servers = [multiprocessing.Process(target=_serve, args=(ports, nodes, pods, page_size), daemon=True)
               for _ in range(count)]
    for server in servers:
        server.start()
    return servers, [f"http://127.0.0.1:{ports.get(timeout=600)}" for _ in servers]


def _client(url: str):
    configuration = k8s_client.Configuration()
    configuration.host = url
    return k8s_client.CoreV1Api(k8s_client.ApiClient(configuration))


def several(args: argparse.Namespace) -> dict:
    """One cluster of ``nodes`` against ``backends`` clusters of ``nodes // backends`` each, same run."""
    count = args.backends
    one_servers, one_urls = _servers(1, args.nodes, args.pods, args.page_size)
    many_servers, many_urls = _servers(count, args.nodes // count, args.pods // count, args.page_size)
    try:
        one_times: list[float] = []
        many_times: list[float] = []
        for _round in range(max(args.repeat, 1)):  # alternated, the best of each: no warm-up or drift bias
            started = time.perf_counter()
            usage, one_requests = _listing(_client(one_urls[0]), args.page_size)
            one_times.append(time.perf_counter() - started)
            per_backend: list[int] = []
            busy = 0
            started = time.perf_counter()
            for url in many_urls:  # one after the other: one worker slot syncing every backend
                listed, requests = _listing(_client(url), args.page_size)
                per_backend.append(requests)
                busy += sum(1 for value in listed.values() if any(value.values()))
            many_times.append(time.perf_counter() - started)
        one_seconds, many_seconds = min(one_times), min(many_times)
    finally:
        for server in one_servers + many_servers:
            server.terminate()
            server.join(timeout=10)
    return {
        "one": {"backends": 1, "nodes": args.nodes, "pods": args.pods, "requests": one_requests,
                "seconds": round(one_seconds, 2), "busy_nodes": sum(1 for v in usage.values() if any(v.values()))},
        "several": {"backends": count, "nodes_each": args.nodes // count, "pods_each": args.pods // count,
                    "requests_per_backend": max(per_backend), "requests": sum(per_backend),
                    "seconds": round(many_seconds, 2), "busy_nodes": busy},
        "ratio": round(many_seconds / one_seconds, 2), "page_size": args.page_size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--pods", type=int, default=100_000)
    parser.add_argument("--page-size", type=int, default=500)
    parser.add_argument("--backends", type=int, default=0,
                        help="several clusters: N backends of nodes/N nodes against one of all (e.g. 8)")
    parser.add_argument("--repeat", type=int, default=3, help="--backends: rounds, alternated (best of each)")
    parser.add_argument("--json", action="store_true", help="one JSON line instead of text")
    args = parser.parse_args()
    if args.backends > 0:
        result = several(args)
        print(json.dumps(result) if args.json else json.dumps(result, indent=2))
        return
    ports: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(ports, args.nodes, args.pods, args.page_size), daemon=True)
    server.start()
    try:
        configuration = k8s_client.Configuration()
        configuration.host = f"http://127.0.0.1:{ports.get(timeout=600)}"
        core = k8s_client.CoreV1Api(k8s_client.ApiClient(configuration))
        started = time.perf_counter()
        listed, listing_requests = _listing(core, args.page_size)
        listing_seconds = time.perf_counter() - started
        listing_rss = _peak_rss_mib()
        started = time.perf_counter()
        per_node, per_node_requests = _per_node(core, args.page_size)
        per_node_seconds = time.perf_counter() - started
        if {node: usage for node, usage in per_node.items() if any(usage.values())} != listed:
            sys.exit("the two ways disagree on some node's usage")
        result = {
            "nodes": args.nodes, "foreign_pods": args.pods, "our_pods": args.nodes // 10, "page_size": args.page_size,
            "listing": {"requests": listing_requests, "seconds": round(listing_seconds, 2),
                        "peak_rss_mib": listing_rss},
            "per_node": {"requests": per_node_requests, "seconds": round(per_node_seconds, 2),
                         "peak_rss_mib": _peak_rss_mib()},
            "ratio": round(per_node_seconds / listing_seconds, 1),
            "busy_nodes": sum(1 for usage in listed.values() if any(usage.values())),
        }
    finally:
        server.terminate()
        server.join(timeout=10)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
