"""deploy/kubernetes/: every overlay renders with ``kubectl kustomize`` and every object passes
``kubernetes-validate`` strict; what docs/kubernetes.md and docs/deploy.md promise is what renders."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.manifests import OVERLAYS, ROOT, RenderError, problems, render, tree_copy
from workflows.sessions.proxy import PORT_ROUTE


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return tree_copy(tmp_path)


def _by_kind_name(objects):
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in objects}


def test_overlays_are_the_two_documented():
    assert OVERLAYS == ["production", "try"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_overlay_renders_and_every_object_validates_strictly(tree, overlay):
    # when
    objects = render(tree / "overlays" / overlay)

    # then
    assert problems(objects) == []
    kinds = {(obj["kind"], obj["metadata"]["name"]) for obj in objects}
    assert {
        ("Namespace", "osmo"), ("Namespace", "osmo-jobs"), ("ServiceAccount", "osmo"),
        ("ServiceAccount", "osmo-scheduler"), ("ConfigMap", "osmo-settings"), ("Job", "osmo-migrate"),
        ("Deployment", "osmo-web"), ("Deployment", "osmo-worker"), ("Deployment", "osmo-beat"),
        ("Service", "osmo-web"), ("Ingress", "osmo-web"), ("HorizontalPodAutoscaler", "osmo-web"),
        ("HorizontalPodAutoscaler", "osmo-worker"), ("PodDisruptionBudget", "osmo-web"),
        ("PodDisruptionBudget", "osmo-worker"), ("NetworkPolicy", "osmo-default-deny-ingress"),
        ("NetworkPolicy", "osmo-web-http"), ("Role", "osmo-dispatch"), ("RoleBinding", "osmo-dispatch"),
        ("ServiceAccount", "osmo-sessions"), ("Role", "osmo-sessions"), ("RoleBinding", "osmo-sessions"),
    } <= kinds
    secrets = [name for kind, name in kinds if kind == "Secret" and name.startswith("osmo-secrets-")]
    assert len(secrets) == 1


def test_external_datastores_by_default_in_cluster_only_when_trying_it_out(tree):
    # when
    production = _by_kind_name(render(tree / "overlays" / "production"))
    trying = _by_kind_name(render(tree / "overlays" / "try"))

    # then
    assert not any(kind in {"StatefulSet"} or "postgres" in name or "redis" in name for kind, name in production)
    images = sorted(c["image"] for key in [("StatefulSet", "osmo-postgres"), ("Deployment", "osmo-redis")]
                    for c in trying[key]["spec"]["template"]["spec"]["containers"])
    assert images == ["postgres:17", "redis:7.4"]


def test_overlay_with_its_secret_missing_fails_validation_naming_it(tree):
    # given: the production overlay with its secretGenerator taken out
    overlay = tree / "overlays" / "production"
    kustomization = yaml.safe_load((overlay / "kustomization.yaml").read_text())
    del kustomization["secretGenerator"]
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))

    # when
    found = problems(render(overlay))

    # then: every pod that reads it names it, nothing else is wrong
    assert sorted(found) == [
        f"{kind} osmo/{name}: Secret 'osmo-secrets' is used but not in the rendered output"
        for kind, name in [("Deployment", "osmo-beat"), ("Deployment", "osmo-sessions"), ("Deployment", "osmo-web"),
                           ("Deployment", "osmo-worker"), ("Job", "osmo-migrate")]
    ]


def test_production_overlay_without_its_secrets_file_does_not_render(tree):
    # given: an operator who did not write secrets.env
    overlay = tree / "overlays" / "production"
    (overlay / "secrets.env").unlink()

    # then
    with pytest.raises(RenderError, match="secrets.env"):
        render(overlay)


def test_strict_validation_rejects_a_misspelt_field(tree):
    # given: a rendering with one misspelt field (guards against a validator that accepts anything)
    objects = render(tree / "overlays" / "try")
    web = _by_kind_name(objects)[("Deployment", "osmo-web")]
    web["spec"]["template"]["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesytem"] = True

    # then
    found = problems(objects)
    assert len(found) == 1
    assert found[0].startswith("Deployment osmo/osmo-web: ")
    assert "readOnlyRootFilesytem" in found[0]


def test_web_probes_security_and_single_beat(tree):
    # when
    objects = _by_kind_name(render(tree / "overlays" / "production"))
    web = objects[("Deployment", "osmo-web")]["spec"]["template"]["spec"]
    beat = objects[("Deployment", "osmo-beat")]

    # then: the probes are the service's own endpoints. A pod starts serving once it reached the
    # database and the broker; afterwards readiness does not depend on them: with PostgreSQL or Redis
    # down, every replica would turn unready at once and the Service lose all endpoints, so clients got
    # the ingress's own 503 page instead of the envelope's 503 with Retry-After (the database) or the
    # answers the fail-open cache lets through (Redis; docs/operations.md, "Failure answers")
    container = web["containers"][0]
    assert container["command"] == ["gunicorn", "-c", "python:osmo.gunicorn_conf", "osmo.wsgi"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["startupProbe"]["httpGet"]["path"] == "/readyz?checks=database,broker"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    # and every pod of the service runs as a user with a read-only root filesystem, /tmp writable
    for key in [("Deployment", "osmo-web"), ("Deployment", "osmo-worker"), ("Deployment", "osmo-beat"),
                ("Job", "osmo-migrate")]:
        pod = objects[key]["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        for each in pod.get("initContainers", []) + pod["containers"]:
            assert each["securityContext"]["readOnlyRootFilesystem"] is True, key
            assert {m["mountPath"] for m in each["volumeMounts"]} == {"/data", "/tmp"}, key
    # and beat is one, replaced (never two during a rollout)
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    assert ("HorizontalPodAutoscaler", "osmo-beat") not in objects
    assert {objects[("HorizontalPodAutoscaler", n)]["spec"]["scaleTargetRef"]["name"]
            for n in ("osmo-web", "osmo-worker")} == {"osmo-web", "osmo-worker"}
    # and only the workers (osmo-scheduler) and the sessions' exec and port-forward (osmo-sessions, of web and
    # osmo-sessions) get a Kubernetes API token
    assert objects[("ServiceAccount", "osmo")]["automountServiceAccountToken"] is False
    assert objects[("Deployment", "osmo-worker")]["spec"]["template"]["spec"]["serviceAccountName"] == "osmo-scheduler"


def test_sessions_run_on_uvicorn_behind_the_ingress_paths_ws_ports_and_mcp(tree):
    # when
    objects = _by_kind_name(render(tree / "overlays" / "production"))
    sessions = objects[("Deployment", "osmo-sessions")]["spec"]["template"]["spec"]
    ingress = objects[("Ingress", "osmo-web")]

    # then the websockets of exec and port-forward are served by the ASGI application, probed like web,
    # and the Ingress sends /ws/ and the MCP endpoint there (everything else to web: gunicorn serves no
    # /mcp) with timeouts past the idle timeout
    container = sessions["containers"][0]
    assert container["command"][:2] == ["uvicorn", "osmo.asgi:application"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    paths = {p["path"]: p["backend"]["service"]["name"] for p in ingress["spec"]["rules"][0]["http"]["paths"]}
    assert paths == {"/ws/": "osmo-sessions", "/mcp": "osmo-sessions",
                     "/workflows/[^/]+/tasks/[^/]+/(absolute-)?ports/": "osmo-sessions",
                     "/": "osmo-web"}
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/use-regex"] == "true"
    # (the Ingress's expression takes what the proxy's own route takes, and not the task page itself)
    expression = next(path for path in paths if "ports" in path)
    for url in ("/workflows/wf-1/tasks/main/ports/8888/lab", "/workflows/wf-1/tasks/t/absolute-ports/80/",
                "/workflows/wf-1/tasks/main/"):
        assert bool(re.match(expression, url)) == bool(re.match(PORT_ROUTE, url[1:]))
    assert int(ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 1800
    assert ("Service", "osmo-sessions") in objects and ("NetworkPolicy", "osmo-sessions-http") in objects


def _documented(kind: str, name: str | None = None) -> dict:
    """The ``kind`` object (named ``name``, if given) of docs/kubernetes.md §3 (its YAML examples)."""
    text = (ROOT / "docs" / "kubernetes.md").read_text()
    for block in re.findall(r"```yaml\n(.*?)```", text, flags=re.S):
        for document in yaml.safe_load_all(block):
            if document and document.get("kind") == kind and name in (None, document["metadata"]["name"]):
                return document
    raise AssertionError(f"docs/kubernetes.md shows no {kind} {name or ''}")


def _documented_role() -> dict:
    """The dispatch Role of docs/kubernetes.md §3 (its YAML example)."""
    return _documented("Role", "osmo-dispatch")


def test_job_namespace_role_grants_exactly_the_verbs_docs_kubernetes_lists(tree):
    # given
    documented = _documented_role()

    # when
    objects = _by_kind_name(render(tree / "overlays" / "production"))
    role = objects[("Role", "osmo-dispatch")]
    binding = objects[("RoleBinding", "osmo-dispatch")]

    # then
    assert role["rules"] == documented["rules"]
    assert role["metadata"]["namespace"] == documented["metadata"]["namespace"] == "osmo-jobs"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "osmo-scheduler", "namespace": "osmo"}]
    assert objects[("Deployment", "osmo-worker")]["metadata"]["namespace"] == "osmo"


def test_sessions_role_grants_exactly_exec_and_port_forward_as_docs_kubernetes_lists(tree):
    # given: the sessions' Role of docs/kubernetes.md §3
    documented = _documented("Role", "osmo-sessions")

    # when
    objects = _by_kind_name(render(tree / "overlays" / "production"))

    # then only create on the two subresources, for the account web and the sessions Deployment use, with
    # a token mounted (the workers' account, which may create pods, is not theirs)
    assert objects[("Role", "osmo-sessions")]["rules"] == documented["rules"] == [
        {"apiGroups": [""], "resources": ["pods/exec", "pods/portforward"], "verbs": ["create"]}]
    assert objects[("Role", "osmo-sessions")]["metadata"]["namespace"] == "osmo-jobs"
    assert objects[("RoleBinding", "osmo-sessions")]["subjects"] == _documented("RoleBinding", "osmo-sessions")[
        "subjects"] == [
        {"kind": "ServiceAccount", "name": "osmo-sessions", "namespace": "osmo"}]
    for deployment in ("osmo-web", "osmo-sessions"):
        assert objects[("Deployment", deployment)]["spec"]["template"]["spec"]["serviceAccountName"] == "osmo-sessions"
    assert objects[("ServiceAccount", "osmo-sessions")]["automountServiceAccountToken"] is True


def test_node_reading_cluster_role_grants_exactly_what_docs_kubernetes_says(tree):
    # given: the ClusterRole of docs/kubernetes.md §3 (nodes: get, list, watch; pods in all namespaces: list)
    documented = _documented("ClusterRole")

    # when
    objects = _by_kind_name(render(tree / "overlays" / "production"))

    # then
    assert objects[("ClusterRole", "osmo-nodes-read")]["rules"] == documented["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]
    assert documented["metadata"]["name"] == "osmo-nodes-read"
    assert objects[("ClusterRoleBinding", "osmo-nodes-read")]["subjects"] == [
        {"kind": "ServiceAccount", "name": "osmo-scheduler", "namespace": "osmo"}]


def _worker_liveness(tree: Path) -> list[str]:
    objects = _by_kind_name(render(tree / "overlays" / "production"))
    pod = objects[("Deployment", "osmo-worker")]["spec"]["template"]["spec"]
    return pod["containers"][0]["livenessProbe"]["exec"]["command"]


def _probe_run(command: list[str], redis_url: str) -> subprocess.CompletedProcess[str]:
    """The probe's command as the kubelet runs it in the worker's container: the image's ``celery`` on
    PATH, the pod's name as ``HOSTNAME``, the settings from the environment."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOSTNAME": "no-such-pod",
           "REDIS_URL": redis_url, "DJANGO_SETTINGS_MODULE": "osmo.settings.test"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


def test_a_broker_outage_does_not_fail_the_workers_liveness_probe(tree):
    """Replays the audit's finding: the worker's liveness probe (``celery inspect ping``) goes through the
    broker, so a Redis outage of 5 minutes failed it on every worker at once and Kubernetes restarted
    them all, into a crash-loop back-off that outlasted the outage (docs/operations.md: workers wait for
    the broker without limit)."""
    # given the probe, and a broker that cannot be reached
    command = _worker_liveness(tree)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"redis://127.0.0.1:{sock.getsockname()[1]}/0"

    # when
    result = _probe_run(command, closed)

    # then it passes, saying why
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the broker cannot be reached" in result.stdout


def test_a_worker_that_does_not_answer_fails_its_liveness_probe(tree):
    # given the probe and a reachable broker where no worker of that name answers
    if not os.environ.get("REDIS_URL"):
        pytest.fail("needs Redis: run with make test")
    command = _worker_liveness(tree)

    # when
    result = _probe_run(command, os.environ["REDIS_URL"])

    # then
    assert result.returncode == 1
    assert "No nodes replied" in result.stdout


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_tasks_reach_the_web_service_and_the_service_accepts_that_host(tree, overlay):
    # given the rendered overlay's settings and its web Service
    objects = _by_kind_name(render(tree / "overlays" / overlay))
    data = objects[("ConfigMap", "osmo-settings")]["data"]
    service = objects[("Service", "osmo-web")]
    url = data["OSMO_RUNTIME_SERVICE_URL"]

    # then the address is the web Service's in-cluster name on its port
    port = service["spec"]["ports"][0]["port"]
    assert url == f"http://{service['metadata']['name']}.{service['metadata']['namespace']}.svc" + (
        "" if port == 80 else f":{port}")

    # and the service started with these settings takes requests to that host (a task's barrier,
    # its `osmo` command) beside the ingress's hosts
    code = "from django.conf import settings; import json; print(json.dumps(settings.ALLOWED_HOSTS))"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "osmo.settings.test", "ALLOWED_HOSTS": data["ALLOWED_HOSTS"],
           "OSMO_RUNTIME_SERVICE_URL": url}
    done = subprocess.run([sys.executable, "-c", f"import django; django.setup(); {code}"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    hosts = yaml.safe_load(done.stdout)
    assert hosts == [*data["ALLOWED_HOSTS"].split(","), f"osmo-web.{service['metadata']['namespace']}.svc"]
