"""The task runtime in a Kubernetes pod (docs/runtime.md), after Argo Workflows' emissary executor: an
init container from the project's runtime image copies the runtime into a shared ``emptyDir``; the task
container (the user's image, which needs only ``/bin/sh``) runs the copied runtime instead of its command,
and the runtime runs the command from the plan (``OSMO_TASK_PLAN``). ``{{output}}`` and ``{{input:N}}``
are folders of a second ``emptyDir``. The runtime writes its result to ``/dev/termination-log``, which
the pod status carries back as the container's termination message (:func:`result_from_message`).
Pure: no Django, no client calls.
"""

from __future__ import annotations

import json
import os
from typing import Any

RUNTIME_IMAGE_ENV = "OSMO_RUNTIME_IMAGE"
INIT_CONTAINER = "osmo-runtime-init"
RUNTIME_VOLUME = "osmo-runtime"
DATA_VOLUME = "osmo-data"
RUNTIME_MOUNT = "/osmo/bin"
#: Where the runtime image keeps the runtime (a self-contained folder with an ``osmo-runtime`` launcher).
IMAGE_RUNTIME_DIR = "/opt/osmo-runtime"
PLAN_ENV = "OSMO_TASK_PLAN"


def runtime_image() -> str:
    return os.environ.get(RUNTIME_IMAGE_ENV, "")


def wrap_with_runtime(manifest: dict[str, Any], *, plan: str, image: str, container_name: str) -> dict[str, Any]:
    """The pod ``manifest`` with its task container run through the runtime (a new dict)."""
    spec = dict(manifest["spec"])
    containers = []
    for container in spec["containers"]:
        container = dict(container)
        if container["name"] == container_name:
            container.pop("args", None)
            container["command"] = [f"{RUNTIME_MOUNT}/osmo-runtime"]
            container["env"] = [*container.get("env", []), {"name": PLAN_ENV, "value": plan}]
            container["volumeMounts"] = [
                *container.get("volumeMounts", []),
                {"name": RUNTIME_VOLUME, "mountPath": RUNTIME_MOUNT, "readOnly": True},
                {"name": DATA_VOLUME, "mountPath": "/osmo/output", "subPath": "output"},
                {"name": DATA_VOLUME, "mountPath": "/osmo/input", "subPath": "input"},
            ]
            container["terminationMessagePath"] = "/dev/termination-log"
            container["terminationMessagePolicy"] = "File"
        containers.append(container)
    spec["containers"] = containers
    spec["initContainers"] = [*spec.get("initContainers", []), {
        "name": INIT_CONTAINER,
        "image": image,
        "command": ["cp", "-a", f"{IMAGE_RUNTIME_DIR}/.", f"{RUNTIME_MOUNT}/"],
        "volumeMounts": [{"name": RUNTIME_VOLUME, "mountPath": RUNTIME_MOUNT}],
    }]
    spec["volumes"] = [*spec.get("volumes", []), {"name": RUNTIME_VOLUME, "emptyDir": {}},
                       {"name": DATA_VOLUME, "emptyDir": {}}]
    return {**manifest, "spec": spec}


def result_from_message(message: str) -> tuple[int, str] | None:
    """The (exit code, message) of a runtime result written as the termination message, or None when
    the message is not one (a container without the runtime)."""
    try:
        result = json.loads(message)
    except ValueError:
        return None
    if not isinstance(result, dict) or not isinstance(result.get("exit_code"), int):
        return None
    return int(result["exit_code"]), str(result.get("message") or "")
