"""Render the Kustomize overlays of deploy/kubernetes/ with ``kubectl kustomize`` and validate what
comes out: every object strictly against the Kubernetes schema (``kubernetes-validate``), and every
Secret, ConfigMap and ServiceAccount a pod uses present in the same rendering (the schema cannot
see a reference to an object that is not there)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE_ROOT = ROOT / "deploy" / "kubernetes"
OVERLAYS = sorted(path.name for path in (KUSTOMIZE_ROOT / "overlays").iterdir() if path.is_dir())
K8S_VERSION = "1.37.0"
POD_OWNERS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}


class RenderError(Exception):
    """``kubectl kustomize`` refused the overlay (its message is the exception's)."""


def tree_copy(destination: Path) -> Path:
    """A copy of deploy/kubernetes/ in ``destination`` with the production overlay's secrets.env made
    from its example (what an operator does first), so every overlay renders as committed."""
    tree = destination / "kubernetes"
    shutil.copytree(KUSTOMIZE_ROOT, tree, ignore=shutil.ignore_patterns("secrets.env"))
    production = tree / "overlays" / "production"
    shutil.copy(production / "secrets.env.example", production / "secrets.env")
    return tree


def render(overlay: Path) -> list[dict[str, Any]]:
    result = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RenderError(result.stderr.strip())
    return [document for document in yaml.safe_load_all(result.stdout) if document]


def _pod_spec(obj: dict[str, Any]) -> dict[str, Any] | None:
    if obj["kind"] not in POD_OWNERS:
        return None
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def _containers(pod: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield from pod.get("initContainers", [])
    yield from pod.get("containers", [])


def _references(pod: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(kind, name) of every Secret, ConfigMap and ServiceAccount the pod needs to start."""
    if pod.get("serviceAccountName"):
        yield "ServiceAccount", pod["serviceAccountName"]
    for container in _containers(pod):
        for source in container.get("envFrom", []):
            if "secretRef" in source and not source["secretRef"].get("optional"):
                yield "Secret", source["secretRef"]["name"]
            if "configMapRef" in source and not source["configMapRef"].get("optional"):
                yield "ConfigMap", source["configMapRef"]["name"]
        for variable in container.get("env", []):
            value_from = variable.get("valueFrom", {})
            if "secretKeyRef" in value_from and not value_from["secretKeyRef"].get("optional"):
                yield "Secret", value_from["secretKeyRef"]["name"]
            if "configMapKeyRef" in value_from and not value_from["configMapKeyRef"].get("optional"):
                yield "ConfigMap", value_from["configMapKeyRef"]["name"]
    for volume in pod.get("volumes", []):
        if "secret" in volume and not volume["secret"].get("optional"):
            yield "Secret", volume["secret"]["secretName"]
        if "configMap" in volume and not volume["configMap"].get("optional"):
            yield "ConfigMap", volume["configMap"]["name"]


def problems(objects: list[dict[str, Any]]) -> list[str]:
    """Everything wrong with a rendering, one line each naming the object (empty: valid)."""
    found: list[str] = []
    present = {(obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]) for obj in objects}
    for obj in objects:
        namespace = obj["metadata"].get("namespace", "")
        where = f"{obj['kind']} {namespace}/{obj['metadata']['name']}".replace(" /", " ")
        try:
            kubernetes_validate.validate(obj, desired_version=K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            found.append(f"{where}: {error.message} at {'.'.join(str(p) for p in error.path)}")
        pod = _pod_spec(obj)
        if pod is None:
            continue
        for kind, name in sorted(set(_references(pod))):
            if (kind, namespace, name) not in present:
                found.append(f"{where}: {kind} {name!r} is used but not in the rendered output")
    return found
