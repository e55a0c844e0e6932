"""The task fields of OSMO's specification beyond the container itself (docs/spec.md, "Task"):
``inputs``, ``outputs``, ``files``, ``credentials``, ``exitActions``, ``checkpoint``,
``volumeMounts``, ``privileged``, ``hostNetwork``; and the check of OSMO's run-time tokens
(:mod:`workflows.spec.tokens`) once every task is known.

Every read records its problems with the value's path and goes on (as the rest of the parser).
Where this service deliberately differs from OSMO, the message says so: ``dataset`` inputs and
outputs (no dataset store here: use ``url``) and ``localpath`` files (the CLI inlines them).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from parsing.quantity import QuantityError, parse_duration
from runtime.plan import service_path_refusal, store_refusal
from workflows.spec.drafts import GroupDraft, ResourceDraft, TaskDraft, listing
from workflows.spec.errors import join_path
from workflows.spec.model import (
    CheckpointSpec,
    CredentialSpec,
    ExitAction,
    FileSpec,
    InputSpec,
    OutputSpec,
    PlatformRule,
    VolumeMount,
)
from workflows.spec.tokens import find_tokens, malformed_tokens
from workflows.spec.walk import SpecWalker, type_name

#: Largest ``files[].contents`` (UTF-8 bytes). The whole spec is at most 1 MiB (SpecLimits).
FILE_MAX_BYTES = 256 * 1024
#: Container directories no file or mount may be placed in (the kernel's and the runtime's).
RESERVED_DIRS = ("/proc", "/sys", "/dev")
EXIT_ACTIONS = ("COMPLETE", "FAIL", "RESCHEDULE")
EXIT_CODE_MAX = 2**31 - 1
URL_PATTERN = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://\S+")
CREDENTIAL_NAME = re.compile(r"[a-zA-Z0-9]([a-zA-Z0-9_.-]*[a-zA-Z0-9])?")
ENV_NAME = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
INPUT_KINDS = ("task", "url", "dataset")
INPUT_FIELDS = (*INPUT_KINDS, "regex")
OUTPUT_FIELDS = ("url", "dataset", "regex")
FILE_FIELDS = ("path", "contents", "localpath")
# ``path``/``url``/``frequency`` as OSMO's cookbook writes them; its specification page also shows
# ``source``/``destination``/``frequency`` and ``checkpoint_cadence``: the same fields.
CHECKPOINT_ALIASES = {"source": "path", "destination": "url", "checkpoint_cadence": "frequency"}
CHECKPOINT_FIELDS = ("path", "url", "frequency", "regex", *CHECKPOINT_ALIASES)
NO_DATASETS = "this service keeps no datasets"
LOCALPATH = (
    "localpath is read by the CLI (osmo workflow submit), relative to the spec file, and sent as "
    "contents; the API takes files with contents only"
)


class TaskFields(SpecWalker):
    """Reads of the task fields of the module docstring into a :class:`TaskDraft`."""

    # -- shared ---------------------------------------------------------------------------------

    def container_path(self, value: object, path: str, *, relative: bool = False, reserved: bool = True,
                       side: str = "in the container") -> str | None:
        """An absolute (or, with ``relative``, a relative: to the task's working directory),
        normalised path in the container, outside :data:`RESERVED_DIRS` (unless not ``reserved``:
        host mounts such as /dev/shm, which the pool's platforms decide on). ``side`` says where the
        path is in the message (a ``volumeMounts`` item's first part is on the host)."""
        text = self.string(value, path)
        if text is None:
            return None
        if relative and not text.startswith("/"):
            parts = text.split("/")
            if ".." in parts or "." in parts or "//" in text or text.endswith("/"):
                self.error(path, f"{text[:80]!r} must be a normalised path: no '.', '..', '//' or trailing '/'")
                return None
            return text
        if not text.startswith("/"):
            self.error(path, f"{text[:80]!r} must be an absolute path {side} (starting with /)")
            return None
        parts = text.split("/")
        if ".." in parts or "." in parts or "//" in text or (len(text) > 1 and text.endswith("/")):
            self.error(path, f"{text[:80]!r} must be a normalised path: no '.', '..', '//' or trailing '/'")
            return None
        if text == "/" or (reserved and any(text == top or text.startswith(top + "/") for top in RESERVED_DIRS)):
            self.error(path, f"{text[:80]!r} is not allowed: not / and nothing under {', '.join(RESERVED_DIRS)}")
            return None
        return posixpath.normpath(text)

    def regex(self, value: object, path: str) -> str | None:
        text = self.string(value, path)
        if text is None:
            return None
        try:
            re.compile(text)
        except (re.error, OverflowError) as exc:  # OverflowError: a repeat count past 4294967295 (a{99999999999})
            self.error(path, f"regex {text[:80]!r} does not compile: {exc}")
            return None
        except RecursionError:  # the compiler recurses per group: ((((...)))) a few thousand deep
            self.error(path, f"regex {text[:80]!r} does not compile: it nests groups too deeply")
            return None
        return text

    def url(self, value: object, path: str) -> str | None:
        text = self.string(value, path)
        if text is None:
            return None
        if not URL_PATTERN.fullmatch(text):
            self.error(path, f"{text[:80]!r} is not a storage URL like s3://bucket/path")
            return None
        refusal = None
        if self.pool is not None and "{{" not in text:
            refusal = store_refusal(text, self.pool.artifact_store) or service_path_refusal(text,
                                                                                         self.pool.service_paths)
        if refusal is not None:  # (with a token, dispatch checks it once it is resolved)
            self.error(path, refusal)
            return None
        return text

    def flag(self, body: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        value = body.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.error(join_path(path, key), f"must be true or false, got {type_name(value)}")
            return default
        return value

    def items(self, value: object, path: str, what: str) -> list[tuple[str, Any]]:
        """``value`` as a list's (path, item) pairs; an error and [] when it is no list."""
        if not isinstance(value, list | tuple):
            self.error(path, f"must be a list of {what}, got {type_name(value)}")
            return []
        return [(join_path(path, index), item) for index, item in enumerate(value)]

    # -- fields ---------------------------------------------------------------------------------

    def task_fields(self, body: Mapping[str, Any], path: str, draft: TaskDraft) -> None:
        """Every field of this module for one task (``body`` is the task's mapping)."""
        if body.get("inputs") is not None:
            self.task_inputs(body["inputs"], join_path(path, "inputs"), draft)
        if body.get("outputs") is not None:
            draft.outputs = self.task_outputs(body["outputs"], join_path(path, "outputs"), draft)
        if body.get("files") is not None:
            draft.files = self.task_files(body["files"], join_path(path, "files"), draft)
        if body.get("credentials") is not None:
            draft.credentials = self.task_credentials(body["credentials"], join_path(path, "credentials"))
        if body.get("exitActions") is not None:
            draft.exit_actions = self.exit_actions(body["exitActions"], join_path(path, "exitActions"))
        if body.get("checkpoint") is not None:
            draft.checkpoints = self.checkpoints(body["checkpoint"], join_path(path, "checkpoint"), draft)
        if body.get("volumeMounts") is not None:
            draft.volume_mounts = self.volume_mounts(body["volumeMounts"], join_path(path, "volumeMounts"))
        draft.privileged = self.flag(body, "privileged", path, False)
        draft.host_network = self.flag(body, "hostNetwork", path, False)

    def task_inputs(self, value: object, path: str, draft: TaskDraft) -> None:
        for item_path, raw in self.items(value, path, "inputs like {task: <name>} or {url: <url>}"):
            body = self.mapping(raw, item_path, INPUT_FIELDS)
            if body is None:
                draft.input_specs.append(InputSpec())
                continue
            kinds = [kind for kind in INPUT_KINDS if kind in body]
            # Every item keeps its index for {{input:<n>}}: a refused one holds an empty place (the
            # spec is refused anyway), so the tokens after it are not reported as well.
            placeholder = InputSpec()
            if len(kinds) != 1:
                given = f"got {', '.join(kinds)}" if kinds else "got none"
                self.error(item_path, f"an input needs exactly one of task, url ({given})")
                draft.input_specs.append(placeholder)
                continue
            regex = self.regex(body["regex"], join_path(item_path, "regex")) if "regex" in body else None
            if kinds[0] == "dataset":
                self.error(join_path(item_path, "dataset"),
                           f"dataset inputs are not supported ({NO_DATASETS}): {_instead(body['dataset'], 'stored')}")
                draft.input_specs.append(placeholder)
            elif kinds[0] == "task":
                name = self.string(body["task"], join_path(item_path, "task"))
                if name is not None:
                    draft.inputs.append((name, join_path(item_path, "task")))
                draft.input_specs.append(InputSpec(task=name, regex=regex) if name is not None else placeholder)
            else:
                url = self.url(body["url"], join_path(item_path, "url"))
                if url is not None:
                    draft.texts.append((join_path(item_path, "url"), url))
                draft.input_specs.append(InputSpec(url=url, regex=regex) if url is not None else placeholder)

    def task_outputs(self, value: object, path: str, draft: TaskDraft) -> tuple[OutputSpec, ...]:
        outputs = []
        for item_path, raw in self.items(value, path, "outputs like {url: <url>}"):
            body = self.mapping(raw, item_path, OUTPUT_FIELDS)
            if body is None:
                continue
            if "dataset" in body:
                self.error(join_path(item_path, "dataset"), f"dataset outputs are not supported ({NO_DATASETS}): "
                                                            f"{_instead(body['dataset'], 'uploaded')}")
                continue
            if "url" not in body:
                self.error(join_path(item_path, "url"), "this field is required")
                continue
            url = self.url(body["url"], join_path(item_path, "url"))
            regex = self.regex(body["regex"], join_path(item_path, "regex")) if "regex" in body else None
            if url is not None:
                draft.texts.append((join_path(item_path, "url"), url))
                outputs.append(OutputSpec(url=url, regex=regex))
        return tuple(outputs)

    def task_files(self, value: object, path: str, draft: TaskDraft) -> tuple[FileSpec, ...]:
        files = []
        first_at: dict[str, str] = {}
        for item_path, raw in self.items(value, path, "files like {path: <path>, contents: <text>}"):
            body = self.mapping(raw, item_path, FILE_FIELDS, required=("path",))
            if body is None:
                continue
            if "localpath" in body:
                self.error(join_path(item_path, "localpath"), LOCALPATH)
                continue
            if "contents" not in body:
                self.error(join_path(item_path, "contents"), "this field is required (the file's text)")
                continue
            contents = self.text_value(body["contents"], join_path(item_path, "contents"))
            target = self.container_path(body["path"], join_path(item_path, "path")) if "path" in body else None
            if contents is not None and len(contents.encode("utf-8")) > FILE_MAX_BYTES:
                self.error(join_path(item_path, "contents"),
                           f"the file is larger than {FILE_MAX_BYTES} bytes (the limit of one file)")
                continue
            if target is None or contents is None:
                continue
            if target in first_at:
                self.error(join_path(item_path, "path"),
                           f"two files at {target!r} (also at {first_at[target]}); give each file its own path")
                continue
            first_at[target] = join_path(item_path, "path")
            draft.texts.append((join_path(item_path, "contents"), contents))
            files.append(FileSpec(path=target, contents=contents))
        return tuple(files)

    def task_credentials(self, value: object, path: str) -> tuple[CredentialSpec, ...]:
        if not isinstance(value, Mapping):
            self.error(path, "must be a mapping of credential names to {VARIABLE: key} or a mount path, "
                             f"got {type_name(value)}")
            return ()
        credentials = []
        variables: dict[str, str] = {}
        for name, raw in value.items():
            item_path = join_path(path, name)
            if not CREDENTIAL_NAME.fullmatch(name) or len(name) > 63:
                self.error(item_path, f"invalid credential name {name[:80]!r}: letters, digits, '_', '-', '.'")
                continue
            if isinstance(raw, str):
                mount = self.container_path(raw, item_path)
                if mount is not None:
                    credentials.append(CredentialSpec(name=name, path=mount))
                continue
            if not isinstance(raw, Mapping) or not raw:
                self.error(item_path, "must map environment variables to keys of the credential "
                                      f"({{HF_TOKEN: token}}) or be a mount path, got {type_name(raw)}")
                continue
            pairs = []
            for variable, key in raw.items():
                variable_path = join_path(item_path, variable)
                if not ENV_NAME.fullmatch(variable):
                    self.error(variable_path, f"invalid environment variable name {variable[:80]!r}")
                    continue
                if variable in variables:
                    self.error(variable_path, f"environment variable {variable!r} is also set from credential "
                                              f"{variables[variable]!r}")
                    continue
                key_text = self.string(key, variable_path)
                if key_text is not None:
                    variables[variable] = name
                    pairs.append((variable, key_text))
            if pairs:
                credentials.append(CredentialSpec(name=name, environment=tuple(sorted(pairs))))
        return tuple(sorted(credentials, key=lambda credential: credential.name))

    def exit_codes(self, value: object, path: str) -> list[tuple[int, int]] | None:
        """``3``, ``"1,2,10-20"`` or a list of those -> inclusive ranges; None after an error."""
        parts: list[object] = list(value) if isinstance(value, list | tuple) else [value]
        ranges: list[tuple[int, int]] = []
        for part in parts:
            if isinstance(part, int) and not isinstance(part, bool):
                pieces = [str(part)]
            elif isinstance(part, str):
                pieces = [piece.strip() for piece in part.split(",")]
            else:
                self.error(path, f"exit codes must be numbers or text like '1,2,10-20', got {type_name(part)}")
                return None
            for piece in pieces:
                match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", piece)
                if match is None:
                    self.error(path, f"invalid exit code {piece[:40]!r}; write codes and ranges like '1,2,10-20'")
                    return None
                low = int(match.group(1))
                high = int(match.group(2)) if match.group(2) is not None else low
                if high > EXIT_CODE_MAX:
                    self.error(path, f"exit code {high} is too large (at most {EXIT_CODE_MAX})")
                    return None
                if low > high:
                    self.error(path, f"the range {piece!r} goes down; write it as {high}-{low}")
                    return None
                ranges.append((low, high))
        if not ranges:
            self.error(path, "must give at least one exit code")
            return None
        return ranges

    def exit_actions(self, value: object, path: str) -> tuple[ExitAction, ...]:
        body = self.mapping(value, path, EXIT_ACTIONS)
        if body is None:
            return ()
        taken: list[tuple[int, int, str]] = []
        actions = []
        for action in EXIT_ACTIONS:
            if action not in body:
                continue
            ranges = self.exit_codes(body[action], join_path(path, action))
            if ranges is None:
                continue
            clean = True
            for low, high in ranges:
                clash = next(((a, b, other) for a, b, other in taken if low <= b and a <= high), None)
                if clash is not None:
                    a, b, other = clash
                    self.error(join_path(path, action),
                               f"exit codes {_codes(low, high)} of {action} overlap {_codes(a, b)} of {other}; "
                               "each exit code may have one action")
                    clean = False
                    continue
                taken.append((low, high, action))
            if clean:
                actions.append(ExitAction(action=action, ranges=tuple(sorted(ranges))))
        return tuple(actions)

    def checkpoints(self, value: object, path: str, draft: TaskDraft) -> tuple[CheckpointSpec, ...]:
        found = []
        for item_path, raw in self.items(value, path, "checkpoints like {path: <dir>, url: <url>, frequency: 5m}"):
            body = self.mapping(raw, item_path, CHECKPOINT_FIELDS)
            if body is None:
                continue
            fields: dict[str, tuple[str, object]] = {}
            for key, item in body.items():
                canonical = CHECKPOINT_ALIASES.get(key, key)
                if canonical in fields:
                    self.error(join_path(item_path, key), f"{key!r} and {fields[canonical][0]!r} are the same field; "
                                                          "give one")
                    continue
                fields[canonical] = (key, item)
            missing = [key for key in ("path", "url", "frequency") if key not in fields]
            for key in missing:
                self.error(join_path(item_path, key), "this field is required")
            if missing:
                continue
            source = self.container_path(fields["path"][1], join_path(item_path, fields["path"][0]), relative=True)
            url = self.url(fields["url"][1], join_path(item_path, fields["url"][0]))
            frequency: int | None = None
            try:
                frequency = parse_duration(fields["frequency"][1], "frequency")
            except QuantityError as exc:
                self.error(join_path(item_path, fields["frequency"][0]), str(exc))
            regex = None
            if "regex" in fields:
                regex = self.regex(fields["regex"][1], join_path(item_path, "regex"))
            if source is None or url is None or frequency is None:
                continue
            draft.texts.append((join_path(item_path, fields["url"][0]), url))
            found.append(CheckpointSpec(path=source, url=url, frequency_s=frequency, regex=regex))
        return tuple(found)

    def volume_mounts(self, value: object, path: str) -> tuple[VolumeMount, ...]:
        mounts = []
        targets: dict[str, str] = {}
        for item_path, raw in self.items(value, path, "host mounts like /data:/data or /data:/data:ro"):
            text = self.string(raw, item_path)
            if text is None:
                continue
            parts = text.split(":")
            read_only = len(parts) == 3 and parts[2] == "ro"
            if len(parts) > 3 or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
                self.error(item_path, f"{text[:80]!r}: write <host path>[:<container path>[:ro]]")
                continue
            host = self.container_path(parts[0], item_path, reserved=False, side="on the host")
            inside = self.container_path(parts[1], item_path, reserved=False) if len(parts) > 1 else host
            if host is None or inside is None:
                continue
            if inside in targets:
                self.error(item_path, f"two mounts at {inside!r} (also at {targets[inside]})")
                continue
            targets[inside] = item_path
            mounts.append(VolumeMount(host_path=host, container_path=inside, read_only=read_only))
        return tuple(mounts)

    # -- platforms ------------------------------------------------------------------------------

    def check_platforms(self, groups: list[GroupDraft], resolved: dict[str, ResourceDraft]) -> None:
        """With platforms defined for the pool: each resource's platform is one of them, and a
        task's ``privileged``, ``hostNetwork`` and ``volumeMounts`` are allowed by its platform."""
        rules = {rule.name: rule for rule in self.pool.platforms}
        if not rules:
            return
        known = listing(sorted(rules))
        reported: set[str] = set()
        for group in groups:
            for task in group.tasks:
                draft = resolved.get(task.name) if task.name is not None else None
                if draft is None or draft.spec is None:
                    continue
                platform = draft.spec.platform
                if platform is not None and platform not in rules:
                    if draft.path not in reported:
                        reported.add(draft.path)
                        self.error(join_path(draft.path, "platform"),
                                   f"unknown platform {platform!r}; pool {self.pool.name!r} has platforms: {known}")
                    continue
                rule = rules.get(platform) if platform is not None else None
                self.check_platform_task(task, rule)

    def check_platform_task(self, task: TaskDraft, rule: PlatformRule | None) -> None:
        where = f"platform {rule.name!r}" if rule is not None else "a task without a platform"
        hint = "" if rule is not None else f"; name a platform of pool {self.pool.name!r} that allows it"
        if task.privileged and not (rule and rule.privileged):
            self.error(join_path(task.path, "privileged"), f"{where} does not allow privileged containers{hint}")
        if task.host_network and not (rule and rule.host_network):
            self.error(join_path(task.path, "hostNetwork"), f"{where} does not allow the host network{hint}")
        prefixes = rule.host_mounts if rule is not None else ()
        for index, mount in enumerate(task.volume_mounts):
            if not any(mount.host_path == prefix or mount.host_path.startswith(prefix.rstrip("/") + "/")
                       for prefix in prefixes):
                allowed = f" (allowed: {', '.join(prefixes)})" if prefixes else ""
                self.error(join_path(join_path(task.path, "volumeMounts"), index),
                           f"{where} does not allow mounting host path {mount.host_path!r}{allowed}{hint}")

    # -- tokens ---------------------------------------------------------------------------------

    def check_tokens(self, groups: list[GroupDraft]) -> None:
        """Each task's ``{{input:<n>}}`` within its inputs, ``{{input:<task>}}`` naming one of its
        task inputs, ``{{host:<task>}}`` naming a task of the workflow; malformed tokens reported."""
        names = sorted({task.name for group in groups for task in group.tasks if task.name is not None})
        known = set(names)
        hints: dict[str, str] = {}  # by unknown name: each hint reads every task, a token may repeat 100,000 times
        for group in groups:
            for task in group.tasks:
                input_tasks = {spec.task for spec in task.input_specs if spec.task is not None}
                for path, text in task.texts:
                    for bad in malformed_tokens(text):
                        self.error(path, f"malformed token {bad[:80]!r}; write {{{{input:<n>}}}}, "
                                         "{{input:<task>}} or {{host:<task>}}")
                    for token in find_tokens(text):
                        if token.kind == "host" and token.arg not in known:
                            name = str(token.arg)
                            if name not in hints:
                                hints[name] = _host_hint(name, groups)
                            self.error(path, f"{token.text} names no task of this workflow; tasks: {listing(names)}"
                                             f"{hints[name]}")
                        elif token.kind == "input" and isinstance(token.arg, int):
                            if token.arg >= len(task.input_specs):
                                count = len(task.input_specs)
                                self.error(path, f"{token.text} is out of range: task {task.name!r} has {count} "
                                                 f"input{'s' if count != 1 else ''} (indexes start at 0)")
                        elif token.kind == "input" and token.arg not in input_tasks:
                            have = f"its task inputs: {listing(sorted(input_tasks))}" if input_tasks else \
                                "it has no task inputs"
                            self.error(path, f"{token.text} names no input of task {task.name!r}; {have}")


def _instead(dataset: object, done: str) -> str:
    """What to write instead of a ``dataset`` input or output, naming the dataset (OSMO writes
    ``dataset: {name: <name>}``, its cookbook also ``dataset: <name>``)."""
    name = dataset.get("name") if isinstance(dataset, Mapping) else dataset
    which = f"dataset {str(name)[:80]!r}" if isinstance(name, str | int) and str(name) else "the dataset"
    return f"give where the files of {which} are {done} instead, as url: <scheme>://<bucket>/<path>/"


def _host_hint(name: str, groups: list[GroupDraft]) -> str:
    """What ``{{host:<name>}}`` named, when ``name`` is a group or a resource rather than a task (OSMO's
    NIM recipe writes ``{{host:nim-server}}``, its server task's resource): the task to write instead."""
    by_group = sorted(task.name for group in groups if group.name == name and not group.derived
                      for task in group.tasks if task.name is not None)
    if by_group:
        return f" ({name!r} is a group: {{{{host:<task>}}}} takes one of its tasks, {listing(by_group)})"
    by_resource = sorted(task.name for group in groups for task in group.tasks
                         if task.resource == name and task.name is not None)
    if by_resource:
        first = by_resource[0] if len(by_resource) == 1 else "<task>"
        return (f" ({name!r} is a resource, used by task{'s' if len(by_resource) > 1 else ''} "
                f"{listing(by_resource)}: write {{{{host:{first}}}}})")
    return ""


def _codes(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"
