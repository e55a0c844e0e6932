"""What a task's pod takes from the stored spec beyond its task row, and the one place OSMO's run-time
tokens are resolved (docs/spec.md, "Tokens"; docs/kubernetes.md, "Objects per workflow").

At dispatch every task's ``command``, ``args``, ``environment`` values and ``files`` (paths and
contents) go through :func:`workflows.spec.resolve_tokens` with the task's :class:`TokenContext`:

- ``{{workflow_id}}``: the workflow's id;
- ``{{output}}`` and ``{{input:<n>}}``/``{{input:<task>}}``: the folders the task runtime fills
  (``/osmo/output``, ``/osmo/input/<n>``: the same on every backend);
- ``{{host:<task>}}``: on the local backend the loopback (every task shares the machine's network);
  elsewhere the task's DNS name ``<hostname>.<group service>.<namespace>.svc`` (the group's headless
  Service; a task of another group resolves only while it runs, as in OSMO). Only the groups such a
  token names get a Service and host names (:attr:`WorkflowPods.host_groups`): the others need no
  DNS name, and their pods cost no Service calls.

Reads the stored (validated, rendered) spec as YAML: no Django.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from credentials.secrets import CredentialRef
from runtime.plan import DEFAULT_INPUT_DIR, DEFAULT_OUTPUT_DIR
from scheduler.choices import DispatchBackend
from scheduler.dispatch.pod.naming import group_service_name, pod_hostname, task_dns_name
from workflows.spec import TokenContext, find_tokens, resolve_tokens

LOCAL_HOST = "127.0.0.1"
DEFAULT_RESOURCE = "default"


@dataclass(frozen=True, slots=True)
class TaskPodFields:
    """A task's pod fields from the spec: ``files`` (path, contents) as written (tokens unresolved),
    ``inputs`` the upstream task of each input in order (None for a ``url`` input)."""

    files: tuple[tuple[str, str], ...] = ()
    privileged: bool = False
    host_network: bool = False
    platform: str | None = None
    inputs: tuple[str | None, ...] = ()
    # ``volumeMounts``: (host path, container path, read only), as the submission checked them.
    volume_mounts: tuple[tuple[str, str, bool], ...] = ()
    # ``credentials``: what the task takes from its submitter's credentials (names and uses, no values).
    credentials: tuple[CredentialRef, ...] = ()
    # ``outputs``: the URLs the task's output directory is uploaded to, as written (tokens unresolved).
    outputs: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WorkflowPods:
    """Every task's :class:`TaskPodFields` and group (by task name)."""

    tasks: Mapping[str, TaskPodFields] = field(default_factory=dict)
    groups: Mapping[str, str] = field(default_factory=dict)
    # The groups some ``{{host:<task>}}`` of the workflow names a task of: only these get a Service.
    host_groups: frozenset[str] = frozenset()


def _volume_mounts(raw: object) -> tuple[tuple[str, str, bool], ...]:
    """``<host path>[:<container path>[:ro]]`` items (validated at submission) as tuples."""
    mounts = []
    for item in raw if isinstance(raw, list) else ():
        parts = str(item).split(":")
        host = parts[0].rstrip("/") or "/"
        inside = (parts[1].rstrip("/") or "/") if len(parts) > 1 else host
        mounts.append((host, inside, len(parts) == 3 and parts[2] == "ro"))
    return tuple(mounts)


def _credentials(raw: object) -> tuple[CredentialRef, ...]:
    """``<credential>: {VARIABLE: key}`` or ``<credential>: /path`` entries (validated at submission)."""
    refs = []
    for name, use in raw.items() if isinstance(raw, dict) else ():
        if isinstance(use, dict):
            refs.append(CredentialRef(name=str(name), environment=tuple(sorted((str(variable), str(key))
                                                                               for variable, key in use.items()))))
        elif use is not None:
            refs.append(CredentialRef(name=str(name), path=str(use)))
    return tuple(refs)


def mount_allowed(host_path: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a platform with these host path prefixes lets a task mount ``host_path`` (the
    submission's rule, docs/spec.md "Resource")."""
    return any(host_path == prefix or host_path.startswith(prefix.rstrip("/") + "/") for prefix in prefixes)


def _task_fields(task: Mapping[str, Any], resources: Mapping[str, Any]) -> TaskPodFields:
    files = tuple((str(item.get("path", "")), str(item.get("contents") or ""))
                  for item in task.get("files") or () if isinstance(item, dict))
    inputs = tuple(str(item["task"]) if isinstance(item, dict) and item.get("task") is not None else None
                   for item in task.get("inputs") or ())
    resource = resources.get(str(task.get("resource") or DEFAULT_RESOURCE))
    platform = resource.get("platform") if isinstance(resource, dict) else None
    return TaskPodFields(files=files, privileged=task.get("privileged") is True,
                         host_network=task.get("hostNetwork") is True,
                         platform=str(platform) if platform is not None else None, inputs=inputs,
                         volume_mounts=_volume_mounts(task.get("volumeMounts")),
                         credentials=_credentials(task.get("credentials")),
                         outputs=tuple(str(item["url"]) for item in task.get("outputs") or ()
                                       if isinstance(item, dict) and item.get("url")))


# What a spec must spell for its tasks' pods to take anything from it: the keys :func:`_task_fields`
# reads, or a token (a text without "{{" has none, and neither have the task rows made from it). A
# YAML (or JSON) key is spelled out in the text unless a double-quoted scalar escapes one of its
# characters, which takes a backslash.
_POD_MARKERS = ("files", "privileged", "hostNetwork", "platform", "inputs", "volumeMounts", "credentials", "outputs",
                "{{")


@functools.lru_cache(maxsize=32)
def workflow_pods(spec_text: str) -> WorkflowPods:
    """The pod fields of every task of a stored spec (a spec without groups: each task its own group).
    Cached by text: the spec of a workflow never changes once stored. A text that spells none of
    :data:`_POD_MARKERS` gives every task the defaults without being parsed (dispatch asks for every
    gang: the parse was a third of a dispatch's CPU)."""
    if "\\" not in spec_text and not any(marker in spec_text for marker in _POD_MARKERS):
        return WorkflowPods()  # no fields and no token: what each task's pod would take from the parse
    try:
        document = yaml.load(spec_text or "", Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.YAMLError:
        return WorkflowPods()
    workflow = document.get("workflow") if isinstance(document, dict) else None
    if not isinstance(workflow, dict):
        return WorkflowPods()
    resources = workflow.get("resources") or document.get("resources")  # OSMO allows either place
    resources = resources if isinstance(resources, dict) else {}
    groups = workflow.get("groups") or [{"name": t.get("name"), "tasks": [t]} for t in workflow.get("tasks") or ()
                                        if isinstance(t, dict)]
    tasks: dict[str, TaskPodFields] = {}
    group_of: dict[str, str] = {}
    for group in groups:
        if not isinstance(group, dict):
            continue
        for task in group.get("tasks") or ():
            if isinstance(task, dict) and task.get("name") is not None:
                tasks[str(task["name"])] = _task_fields(task, resources)
                group_of[str(task["name"])] = str(group.get("name"))
    named = {str(token.arg) for token in find_tokens(spec_text) if token.kind == "host"}
    return WorkflowPods(tasks, group_of, frozenset(group_of[name] for name in named if name in group_of))


def token_hosts(backend: str, *, global_id: str, groups: Mapping[str, str], namespace: str) -> dict[str, str]:
    """``{{host:<task>}}`` of every task (task name -> group name in ``groups``) on ``backend``."""
    if backend == DispatchBackend.LOCAL:
        return {task: LOCAL_HOST for task in groups}
    return {task: task_dns_name(hostname=pod_hostname(task), subdomain=group_service_name(global_id, group),
                                namespace=namespace)
            for task, group in groups.items()}


def token_context(task: str, pods: WorkflowPods, *, workflow_id: str, hosts: Mapping[str, str]) -> TokenContext:
    """The token values of one task (see the module docstring)."""
    inputs = pods.tasks.get(task, TaskPodFields()).inputs
    folders = [f"{DEFAULT_INPUT_DIR}/{index}" for index in range(len(inputs))]
    return TokenContext(workflow_id=workflow_id, output=DEFAULT_OUTPUT_DIR, inputs=folders,
                        input_tasks={name: folders[index] for index, name in enumerate(inputs) if name is not None},
                        hosts=hosts)


@dataclass(frozen=True, slots=True)
class ResolvedTask:
    """A task's command, args, environment and files with every token resolved."""

    command: tuple[str, ...]
    args: tuple[str, ...]
    environment: dict[str, str]
    files: tuple[tuple[str, str], ...]


def resolve_task(context: TokenContext, *, command: list[str] | tuple[str, ...] | None,
                 args: list[str] | tuple[str, ...] | None, environment: Mapping[str, object] | None,
                 files: tuple[tuple[str, str], ...] = ()) -> ResolvedTask:
    """Resolve the tokens of one task's texts (raises ``TokenUnresolvedError``)."""
    def sub(text: object) -> str:
        return resolve_tokens(str(text), context)

    return ResolvedTask(command=tuple(sub(part) for part in command or ()),
                        args=tuple(sub(part) for part in args or ()),
                        environment={str(key): sub(value) for key, value in (environment or {}).items()},
                        files=tuple((sub(path), sub(contents)) for path, contents in files))
