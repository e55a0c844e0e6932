"""The task plan: everything the runtime needs to run one task, as one JSON document (docs/runtime.md).

The dispatch side builds it from the stored spec (:func:`plan_from_osmo_task` maps OSMO's task fields);
the runtime reads it (:meth:`TaskPlan.from_json`). Values are plain and frozen; a plan that does not
parse or whose regexes do not compile raises :class:`PlanInvalidError` naming the field, and the
runtime refuses to start (a spec's bad regex is refused with a 400 at submission already).

Paths are the ones the task sees: ``{{output}}`` is ``output_dir``, ``{{input:N}}`` is
``<input_dir>/N``. Upstream ``task`` inputs arrive here as the upstream task's artifact URL (the pool's
artifact store), with ``committed_only`` set: only a committed output is read (see
:mod:`runtime.storage`).
"""

from __future__ import annotations

import json
import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

DEFAULT_OUTPUT_DIR = "/osmo/output"
DEFAULT_INPUT_DIR = "/osmo/input"
DEFAULT_START_TIMEOUT_S = 600.0
_DURATION_RE = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)d)?\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*"
                          r"(?:(\d+(?:\.\d+)?)s?)?\s*$")


class PlanInvalidError(ValueError):
    """The plan cannot be run; ``field`` names the offending entry (``inputs.0.regex``)."""

    def __init__(self, field_path: str, message: str) -> None:
        super().__init__(f"{field_path}: {message}")
        self.field = field_path
        self.message = message


@dataclass(frozen=True, slots=True)
class FileSpec:
    path: str
    contents: str


@dataclass(frozen=True, slots=True)
class InputSpec:
    url: str
    regex: str = ""
    committed_only: bool = False  # an upstream task's artifact: only read once its manifest is written


@dataclass(frozen=True, slots=True)
class OutputSpec:
    url: str
    regex: str = ""


@dataclass(frozen=True, slots=True)
class BarrierSpec:
    url: str  # the service's barrier endpoint (POST)
    token: str  # the per-task token (scoped to this task's barrier)
    group_size: int


@dataclass(frozen=True, slots=True)
class CheckpointSpec:
    path: str
    url: str
    frequency_s: float
    regex: str = ""


@dataclass(frozen=True, slots=True)
class TaskPlan:
    """One task's runtime plan (see the module docstring)."""

    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    files: tuple[FileSpec, ...] = ()
    inputs: tuple[InputSpec, ...] = ()
    outputs: tuple[OutputSpec, ...] = ()
    artifact_url: str = ""  # where {{output}} also goes for downstream `task` inputs ("" = nowhere)
    output_dir: str = DEFAULT_OUTPUT_DIR
    input_dir: str = DEFAULT_INPUT_DIR
    barrier: BarrierSpec | None = None
    checkpoints: tuple[CheckpointSpec, ...] = ()
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S

    def __post_init__(self) -> None:
        regexes = [("inputs", i, entry.regex) for i, entry in enumerate(self.inputs)]
        regexes += [("outputs", i, entry.regex) for i, entry in enumerate(self.outputs)]
        regexes += [("checkpoints", i, entry.regex) for i, entry in enumerate(self.checkpoints)]
        for name, index, regex in regexes:
            _check_regex(f"{name}.{index}.regex", regex)
        if not self.command:
            raise PlanInvalidError("command", "must not be empty")
        if self.barrier is not None and self.barrier.group_size < 1:
            raise PlanInvalidError("barrier.group_size", "must be >= 1")
        for index, checkpoint in enumerate(self.checkpoints):
            if checkpoint.frequency_s <= 0:
                raise PlanInvalidError(f"checkpoints.{index}.frequency_s", "must be > 0")

    def input_path(self, index: int) -> str:
        return f"{self.input_dir.rstrip('/')}/{index}"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["env"] = dict(self.env)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskPlan:
        if not isinstance(data, Mapping):
            raise PlanInvalidError("plan", "must be a JSON object")
        try:
            barrier = data.get("barrier")
            return cls(
                command=_strings("command", data.get("command")),
                args=_strings("args", data.get("args", ())),
                env={str(k): str(v) for k, v in dict(data.get("env") or {}).items()},
                files=tuple(FileSpec(path=str(f["path"]), contents=str(f.get("contents", "")))
                            for f in data.get("files") or ()),
                inputs=tuple(InputSpec(url=str(i["url"]), regex=str(i.get("regex") or ""),
                                       committed_only=bool(i.get("committed_only", False)))
                             for i in data.get("inputs") or ()),
                outputs=tuple(OutputSpec(url=str(o["url"]), regex=str(o.get("regex") or ""))
                              for o in data.get("outputs") or ()),
                artifact_url=str(data.get("artifact_url") or ""),
                output_dir=str(data.get("output_dir") or DEFAULT_OUTPUT_DIR),
                input_dir=str(data.get("input_dir") or DEFAULT_INPUT_DIR),
                barrier=None if not barrier else BarrierSpec(url=str(barrier["url"]), token=str(barrier["token"]),
                                                             group_size=int(barrier["group_size"])),
                checkpoints=tuple(CheckpointSpec(path=str(c["path"]), url=str(c["url"]),
                                                 frequency_s=float(c["frequency_s"]), regex=str(c.get("regex") or ""))
                                  for c in data.get("checkpoints") or ()),
                start_timeout_s=float(data.get("start_timeout_s", DEFAULT_START_TIMEOUT_S)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, PlanInvalidError):
                raise
            raise PlanInvalidError("plan", f"malformed: {exc.__class__.__name__}: {exc}") from exc

    @classmethod
    def from_json(cls, text: str) -> TaskPlan:
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise PlanInvalidError("plan", f"not JSON: {exc}") from exc
        return cls.from_dict(data)


def _strings(name: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise PlanInvalidError(name, "must be a list of strings")
    return tuple(str(part) for part in value)


def _check_regex(field_path: str, pattern: str) -> None:
    if not pattern:
        return
    try:
        re.compile(pattern)
    except re.error as exc:
        raise PlanInvalidError(field_path, f"does not compile: {exc}") from exc


def duration_seconds(text: str | float | int) -> float:
    """OSMO's duration (``30m``, ``1h30m``, ``2d``, ``45``: seconds when no unit) in seconds."""
    if isinstance(text, int | float):
        return float(text)
    match = _DURATION_RE.match(str(text))
    if not match or not any(match.groups()):
        raise PlanInvalidError("checkpoint.frequency", f"{text!r} is not a duration like 30m, 1h or 45s")
    days, hours, minutes, seconds = (float(part or 0) for part in match.groups())
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def _tokens(text: str, *, workflow_id: str, hosts: Mapping[str, str]) -> str:
    text = text.replace("{{workflow_id}}", workflow_id)
    return re.sub(r"\{\{host:([^}]+)\}\}", lambda m: hosts.get(m.group(1).strip(), m.group(0)), text)


def store_overlaps(url: str, store: str) -> bool:
    """Whether ``url`` names ``store`` or a place in it, or holds it (same scheme and bucket, one path
    within the other once ``..`` is resolved)."""
    a, b = urlparse(url), urlparse(store)
    if (a.scheme or "file", a.netloc) != (b.scheme or "file", b.netloc):
        return False
    path, root = posixpath.normpath("/" + a.path), posixpath.normpath("/" + b.path)
    return any(inner == outer or inner.startswith(outer.rstrip("/") + "/")
               for inner, outer in ((path, root), (root, path)))


def store_refusal(url: str, store: str) -> str | None:
    """Why a ``url`` input, an output or a checkpoint may not name ``url`` (None: it may): the pool's
    artifact store holds every workflow's outputs under guessable ids (docs/design.md, the runtime
    section). The spec parser says it at submission, the plan again at dispatch (after tokens)."""
    if not store or not store_overlaps(url, store):
        return None
    return (f"{url[:200]!r} is in the service's artifact store ({store}), which holds every workflow's outputs: "
            "read an upstream task's output with `inputs: [{task: NAME}]`, and write yours to {{output}}")


def service_path_refusal(url: str, service_paths: Sequence[str]) -> str | None:
    """Why a ``file://`` ``url`` may not be used on a pool whose tasks run on the service's own machine
    (None: it may): it names a place in one of ``service_paths`` (the checkout, the virtualenv, the data
    folder, the pods' folders), or holds one, however it is spelt (``.``, ``..``, ``//``, a host part,
    percent escapes, a link: the path is compared as written, unescaped and with links resolved)."""
    parsed = urlparse(url)
    if parsed.scheme != "file" or not service_paths:
        return None
    spellings = {posixpath.normpath("/" + parsed.path), posixpath.normpath("/" + unquote(parsed.path))}
    spellings |= {os.path.realpath(path) for path in spellings}
    for path in sorted(spellings):
        for kept in service_paths:
            if path == kept or path.startswith(kept.rstrip("/") + "/") or kept.startswith(path.rstrip("/") + "/"):
                return (f"{url[:200]!r} is in the service's own folders ({kept}: its code, its interpreter or "
                        "its data), which a task may not read or write: use a folder of its own, such as "
                        "file:///var/tmp/osmo-storage")
    return None


def _store_refused(field_path: str, url: str, store: str) -> None:
    refusal = store_refusal(url, store)
    if refusal is not None:
        raise PlanInvalidError(field_path, refusal)


def plan_from_osmo_task(
    task: Mapping[str, Any], *, workflow_id: str, artifact_url_for: Mapping[str, str], artifact_url: str = "",
    hosts: Mapping[str, str] | None = None, barrier: BarrierSpec | None = None,
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S, artifact_store: str = "",
) -> TaskPlan:
    """The plan of one task from its OSMO spec fields (the parsed task as a dict).

    ``task`` keys, as in OSMO's spec: ``command``, ``args``, ``environment``, ``files``
    (``[{path, contents}]``), ``inputs`` (``[{task: name} | {url: ...}]``, each with an optional
    ``regex``), ``outputs`` (``[{url, regex?}]``), ``checkpoint`` (``[{path, url, frequency, regex?}]``;
    OSMO's ``source``/``destination`` spellings are accepted). ``artifact_url_for`` gives each upstream
    task's artifact URL (the pool's artifact store; see docs/design.md, the runtime section) and
    ``artifact_url`` this task's own. ``{{workflow_id}}`` and ``{{host:<task>}}`` are resolved here
    (``hosts``: task name -> host name); ``{{output}}`` and ``{{input:N}}`` by the runtime, which knows
    the paths. The group's ``barrier`` is built by the caller (it holds the service URL and the token).
    ``artifact_store``: the pool's artifact store, which a ``url`` input, an output or a checkpoint may
    not name (nor hold). Raises :class:`PlanInvalidError` (an unknown upstream task, a bad regex or
    duration, a URL in the artifact store).
    """
    hosts = hosts or {}

    def sub(value: object) -> str:
        return _tokens(str(value), workflow_id=workflow_id, hosts=hosts)

    inputs: list[InputSpec] = []
    for index, entry in enumerate(task.get("inputs") or ()):
        if "task" in entry:
            upstream = str(entry["task"])
            if upstream not in artifact_url_for:
                raise PlanInvalidError(f"inputs.{index}.task", f"no artifact URL for task {upstream!r}")
            inputs.append(InputSpec(url=artifact_url_for[upstream], regex=str(entry.get("regex") or ""),
                                    committed_only=True))
        elif "url" in entry:
            inputs.append(InputSpec(url=sub(entry["url"]), regex=str(entry.get("regex") or "")))
            _store_refused(f"inputs.{index}.url", inputs[-1].url, artifact_store)
        else:
            raise PlanInvalidError(f"inputs.{index}", "needs `task` or `url`")
    checkpoints = tuple(
        CheckpointSpec(path=sub(c.get("path", c.get("source", ""))), url=sub(c.get("url", c.get("destination", ""))),
                       frequency_s=duration_seconds(c.get("frequency", c.get("checkpoint_cadence", 0))),
                       regex=str(c.get("regex") or ""))
        for c in task.get("checkpoint") or ()
    )
    outputs = tuple(OutputSpec(url=sub(o["url"]), regex=str(o.get("regex") or "")) for o in task.get("outputs") or ())
    for kind, urls in (("outputs", [o.url for o in outputs]), ("checkpoint", [c.url for c in checkpoints])):
        for index, url in enumerate(urls):
            _store_refused(f"{kind}.{index}.url", url, artifact_store)
    return TaskPlan(
        command=tuple(sub(part) for part in task.get("command") or ()),
        args=tuple(sub(part) for part in task.get("args") or ()),
        env={str(k): sub(v) for k, v in dict(task.get("environment") or {}).items()},
        files=tuple(FileSpec(path=str(f["path"]), contents=sub(f.get("contents", "")))
                    for f in task.get("files") or ()),
        inputs=tuple(inputs),
        outputs=outputs,
        artifact_url=artifact_url,
        barrier=barrier,
        checkpoints=checkpoints,
        start_timeout_s=start_timeout_s,
    )
