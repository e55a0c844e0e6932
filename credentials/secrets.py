"""The Kubernetes side of a task's credentials (docs/kubernetes.md, "Credentials"), pure: the decrypted
payload a task gets (:class:`SecretPayload`), the Secret that holds it and the pod's references to it
(``secretKeyRef`` environment entries, one ``secret`` volume per mount path), and the registry
credentials' ``dockerconfigjson`` pull secret for an image. Values never appear in a pod spec, and
never in a ``repr``."""

from __future__ import annotations

import base64
import json
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class CredentialRef:
    """A task's use of a credential: ``environment`` ``(VARIABLE, key)`` pairs, or files at ``path``
    (the spec's ``CredentialSpec``, restated so this app does not import the spec package)."""

    name: str
    environment: tuple[tuple[str, str], ...] = ()
    path: str | None = None


@dataclass(frozen=True, slots=True)
class SecretPayload:
    """What goes into the task's Secret: ``env`` (variable -> value) and ``files`` (absolute path ->
    contents: one file per key under each mount path)."""

    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:  # never the values, wherever it is printed
        return f"SecretPayload(env={sorted(self.env)}, files={sorted(self.files)})"

    def __bool__(self) -> bool:
        return bool(self.env or self.files)


@dataclass(frozen=True, slots=True)
class SecretObjects:
    """The Secret to create (``manifest``) and what the pod spec adds to refer to it."""

    manifest: dict[str, Any]
    env: list[dict[str, Any]]
    volumes: list[dict[str, Any]]
    volume_mounts: list[dict[str, Any]]

    def __repr__(self) -> str:
        return f"SecretObjects(name={self.manifest['metadata']['name']!r}, env={[e['name'] for e in self.env]})"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def task_secret_objects(payload: SecretPayload, *, name: str, namespace: str, labels: Mapping[str, str],
                        owner: Mapping[str, Any] | None = None) -> SecretObjects:
    """The task's Secret ``name`` (an Opaque Secret in the API's shape: base64 ``data``) and the pod's
    references. ``owner``: an ``ownerReferences`` item (the task's pod), so the Secret is deleted with
    it. Secret keys: ``env-<n>`` for variables, ``file-<n>`` for files (keys of the API's syntax
    whatever the variable or path)."""
    data: dict[str, str] = {}
    env = []
    for index, (variable, value) in enumerate(sorted(payload.env.items())):
        key = f"env-{index}"
        data[key] = _b64(value)
        env.append({"name": variable, "valueFrom": {"secretKeyRef": {"name": name, "key": key}}})
    by_directory: dict[str, list[tuple[str, str]]] = {}
    for index, (path, value) in enumerate(sorted(payload.files.items())):
        key = f"file-{index}"
        data[key] = _b64(value)
        directory, filename = posixpath.split(path)
        by_directory.setdefault(directory, []).append((key, filename))
    volumes, mounts = [], []
    for index, (directory, items) in enumerate(sorted(by_directory.items())):
        volume = f"credentials-{index}"
        files = [{"key": key, "path": filename} for key, filename in items]
        volumes.append({"name": volume, "secret": {"secretName": name, "defaultMode": 0o400, "items": files}})
        mounts.append({"name": volume, "mountPath": directory, "readOnly": True})
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if owner is not None:
        metadata["ownerReferences"] = [dict(owner)]
    manifest = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "Opaque", "data": data}
    return SecretObjects(manifest=manifest, env=env, volumes=volumes, volume_mounts=mounts)


def image_registry(image: str) -> str:
    """The registry host of an image reference (Docker's rule: a first component with '.' or ':', or
    ``localhost``; else Docker Hub, ``docker.io``)."""
    first, sep, _rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        return first.lower()
    return "docker.io"


def registry_host(registry: str) -> str:
    """A registry credential's ``registry`` value as a host (``https://nvcr.io/`` -> ``nvcr.io``)."""
    host = registry.strip().lower().removeprefix("https://").removeprefix("http://")
    host = host.split("/", 1)[0]
    return "docker.io" if host in ("index.docker.io", "registry-1.docker.io") else host


def docker_config(registry: str, username: str, password: str) -> str:
    """A ``.dockerconfigjson`` for one registry (what ``kubectl create secret docker-registry`` writes)."""
    auth = base64.b64encode(f"{username}:{password}".encode()).decode()
    server = "https://index.docker.io/v1/" if registry == "docker.io" else registry
    return json.dumps({"auths": {server: {"username": username, "password": password, "auth": auth}}},
                      sort_keys=True)


def pull_secret_manifest(config: str, *, name: str, namespace: str, labels: Mapping[str, str],
                         owner: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``kubernetes.io/dockerconfigjson`` Secret of :func:`docker_config`, for ``imagePullSecrets``."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "labels": dict(labels)}
    if owner is not None:
        metadata["ownerReferences"] = [dict(owner)]
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": _b64(config)}}


__all__ = ["CredentialRef", "SecretObjects", "SecretPayload", "docker_config", "image_registry",
           "pull_secret_manifest", "registry_host", "task_secret_objects"]
