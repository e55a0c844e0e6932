"""The ``local`` dispatch backend: every task is a real process on this machine, run by the task runtime
inside a bubblewrap sandbox (docs/runtime.md, "Local backend").

A pod is a folder ``<root>/<namespace>/<pod>/`` (``root``: ``OSMO_LOCAL_DIR``):

* ``request.json``: the pod's identity (pool, workflow, group, task, node), for listings;
* ``run/plan.json``: the runtime's plan; ``run/result.json``: its result (termination message);
  ``run/bin/osmo``: the task's ``osmo`` command (the service's CLI, at the end of the command's ``PATH``);
* ``sandbox/tmp`` and ``sandbox/osmo``: the task's own ``/tmp`` and ``/osmo`` (``{{output}}`` is
  ``/osmo/output``, ``{{input:N}}`` ``/osmo/input/N``), so two tasks can both write ``/tmp/run.sh``;
* ``log``: the runtime's and the command's stdout and stderr (the container log);
* ``started``: made (atomically) by the one supervisor that runs the pod; ``pid``: its process id (a
  session and process group leader); ``exit``: the sandbox's exit status, written by the supervisor
  once it ended.

The supervisor is a ``/bin/sh`` script started with ``setsid -f``, so it outlives the worker process
that created it and is nobody's child to reap. A worker killed between making the folder and starting
the supervisor leaves a folder nothing runs: creating the pod again (the redelivered dispatch) starts
its supervisor, and the ``started`` claim lets only one supervisor of a pod run, however many were
started. The sandbox sees the machine's folders read-only (each top-level one
bound on a tmpfs root), its own ``/tmp``, ``/osmo``, ``/dev`` and ``/proc``, a private PID namespace that dies with the
supervisor, and the host network (tasks of a group reach each other on the loopback). The folders of
the plan's ``file://`` upload URLs are bound writable.

The service's own folders are not the tasks': the pod root (every pod's plan and credential files, in
clear for their own sandbox) and the ``hidden`` folders (the data folder: the SQLite database with
every API token, the broker's messages) are covered by an empty tmpfs in the sandbox, so a task of one
user cannot read another's credentials or the service's secrets there. A ``file://`` upload URL whose
folder holds one of them, lies inside the pod root or overlaps a ``sealed`` path (the database files,
the broker's and the metrics' folders) is refused (:class:`DispatchPermanentError`), never bound
writable; so is such a ``file://`` input, never bound read-only over the tmpfs. Upload folders must
lie in the ``writable`` folders (``OSMO_LOCAL_WRITABLE``), so a task cannot name ``/etc`` as an output.

Phases are read from the folder: no ``pid`` yet -> Pending; a live ``pid`` and no ``exit`` ->
Running; ``exit`` -> Succeeded when the task's code (the result's, else the status) is 0, else Failed
with that code and the result's message. Deleting a pod signals the process group (SIGTERM, then
SIGKILL after the grace period) and removes the folder. Imports nothing from Django.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from runtime.environment import CLI_DIR_ENV, OWN_ENV
from scheduler.dispatch.base import (
    DispatchPermanentError,
    DispatchTransientError,
    ListedPod,
    PodEvent,
    PodLog,
    PodRequest,
    PodState,
)
from scheduler.dispatch.local_files import (
    RESULT_MAX_BYTES,
    alive,
    group_running,
    mtime,
    read_regular,
    tail_lines,
)
from scheduler.dispatch.naming import kube_pod_name

LOCAL_DIR_ENV = "OSMO_LOCAL_DIR"
SANDBOX_OUTPUT = "/osmo/output"
SANDBOX_INPUT = "/osmo/input"
SANDBOX_RUN = "/osmo/run"
#: The folder of ``run/`` holding the task's ``osmo`` command (``OSMO_CLI_DIR`` in the sandbox).
CLI_FOLDER = "bin"
DEFAULT_GRACE_SECONDS = 5
#: After SIGKILL, how long a delete waits for the pod's processes to have ended.
KILL_WAIT_SECONDS = 5
START_DEADLINE_SECONDS = 60.0  # a supervisor that has not written its pid by then never started


def default_root() -> Path:
    return Path(os.environ.get(LOCAL_DIR_ENV) or Path(tempfile.gettempdir()) / "osmo-local")


def _runtime_path() -> str:
    """The folder holding the ``runtime`` package (put on the sandbox's PYTHONPATH)."""
    spec = find_spec("runtime")
    if spec is None or not spec.submodule_search_locations:
        raise DispatchPermanentError("the task runtime package (runtime) is not installed")
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def _file_url_folders(plan: dict[str, Any]) -> list[str]:
    """The local folders the plan uploads to (``file://`` outputs, artifact, checkpoints)."""
    urls = [entry.get("url", "") for entry in plan.get("outputs") or ()]
    urls += [entry.get("url", "") for entry in plan.get("checkpoints") or ()]
    urls.append(plan.get("artifact_url") or "")
    folders = []
    for url in urls:
        parsed = urlparse(url)
        if parsed.scheme == "file" and parsed.path:
            folders.append(parsed.path.rstrip("/") or "/")
    return sorted(set(folders))


def _within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it (both real, absolute paths)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


_PRIVATE_TOP = frozenset({"tmp", "proc", "dev", "osmo"})
#: What a sandbox keeps of the worker's environment (the rest holds the service's secrets: its secret
#: key, the credential store's keys, the database's and the broker's passwords): the programs' and
#: libraries' search paths, the GPUs' selection, the locale and time zone, proxies, and the storage
#: libraries' settings and credentials, which the runtime needs for a pool's artifact store
#: (docs/runtime.md).
SANDBOX_ENV_NAMES = frozenset({"PATH", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TZ", "TERM", "HTTP_PROXY",
                               "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
                               "GOOGLE_APPLICATION_CREDENTIALS"})
SANDBOX_ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "AWS_", "AZURE_STORAGE_", "FSSPEC_")


def _sandbox_env_names(environ: Mapping[str, str]) -> list[str]:
    """The names of the worker's variables a sandbox keeps (:data:`SANDBOX_ENV_NAMES`, the prefixes)."""
    return sorted(name for name in environ
                  if (name in SANDBOX_ENV_NAMES or name.startswith(SANDBOX_ENV_PREFIXES))
                  and name.replace("_", "").isalnum() and name.isascii())


def _host_root() -> list[str]:
    """bwrap arguments showing the host's top-level folders read-only on the sandbox's own root (a
    tmpfs, where ``/osmo`` and ``/tmp`` can be made: the host's ``/`` itself is read-only)."""
    args: list[str] = []
    for entry in sorted(os.scandir("/"), key=lambda e: e.name):
        if entry.name in _PRIVATE_TOP:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), entry.path]
        elif entry.is_dir():
            args += ["--ro-bind", entry.path, entry.path]
    return args


class LocalBackend:
    """Tasks as sandboxed processes on this machine (see the module docstring)."""

    name = "local"

    def __init__(self, root: Path | str | None = None, *, python: str | None = None, bwrap: str = "bwrap",
                 hidden: Iterable[str] = (), sealed: Iterable[str] = (), writable: Iterable[str] | None = None
                 ) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.python = python or sys.executable
        self.bwrap = bwrap
        # The service's folders (module docstring): hidden from every sandbox; sealed ones never written.
        self.hidden = tuple(sorted({os.path.realpath(str(path)) for path in (self.root, *hidden)}))
        self.sealed = tuple(sorted({os.path.realpath(path) for path in sealed}))
        # Where a file:// upload may go (None: anywhere the service's folders are not).
        self.writable = (tuple(sorted({os.path.realpath(str(path)) for path in writable}))
                         if writable is not None else None)

    def _concealed(self) -> list[str]:
        """bwrap arguments covering the hidden folders with an empty tmpfs. Those under a folder the
        sandbox has of its own (``/tmp``) are not the host's there anyway. What the sandbox runs (the
        interpreter, its base installation, the runtime) is bound back read-only inside a hidden folder
        that holds it (a home with ``~/.pyenv``); a hidden folder that is one of them stays visible."""
        needed = sorted({os.path.realpath(path) for path in (sys.prefix, sys.base_prefix, _runtime_path())})
        args: list[str] = []
        for folder in self.hidden:
            top = Path(folder).parts[1] if len(Path(folder).parts) > 1 else ""
            if top in _PRIVATE_TOP or not os.path.isdir(folder) or any(_within(folder, path) for path in needed):
                continue
            args += ["--tmpfs", folder]
            for path in needed:
                if _within(path, folder):
                    args += ["--ro-bind", path, path]
        return args

    def _service_clash(self, path: str) -> str | None:
        """The service's folder a ``file://`` bind of ``path`` would show to the task, if any: one that
        ``path`` holds, the pod root's inside (other pods), or a sealed path it overlaps."""
        real = os.path.realpath(path)
        root = os.path.realpath(self.root)
        clash = next((kept for kept in self.hidden if _within(kept, real)), None)
        clash = clash or (root if _within(real, root) else None)
        return clash or next((kept for kept in self.sealed if _within(kept, real) or _within(real, kept)), None)

    def _file_binds(self, pod: PodRequest, plan: dict[str, Any]) -> tuple[list[str], list[str]]:
        """The plan's ``file://`` upload folders (bound writable) and existing input paths (bound
        read-only), each checked against the service's folders."""
        uploads = _file_url_folders(plan)
        urls = [urlparse(entry.get("url", "")) for entry in plan.get("inputs") or ()]
        inputs = sorted({url.path for url in urls if url.scheme == "file" and url.path and os.path.exists(url.path)})
        for kind, paths in (("upload folder", uploads), ("input", inputs)):
            for path in paths:
                clash = self._service_clash(path)
                if clash is not None:
                    raise DispatchPermanentError(f"the {kind} {path[:200]!r} may not be used by "
                                                 f"a task: it overlaps the service's folder {clash!r}")
        if self.writable is not None:
            for path in uploads:
                if not any(_within(os.path.realpath(path), root) for root in self.writable):
                    raise DispatchPermanentError(
                        f"the upload folder {path[:200]!r} may not be used by a task: it is "
                        f"outside the folders tasks may write ({', '.join(self.writable)}; OSMO_LOCAL_WRITABLE)")
        return uploads, inputs

    # -- layout ---------------------------------------------------------------------------------
    def pod_dir(self, namespace: str, pod_name: str) -> Path:
        return self.root / kube_pod_name(namespace) / kube_pod_name(pod_name)

    def _plan(self, pod: PodRequest) -> dict[str, Any]:
        if pod.runtime_plan:
            plan = json.loads(pod.runtime_plan)
        else:
            if not pod.command:
                raise DispatchPermanentError(f"the local backend needs a command (it does not "
                                             f"run the image {pod.image!r}'s entrypoint)")
            plan = {"command": list(pod.command), "args": list(pod.args), "env": dict(pod.environment)}
        plan["output_dir"] = SANDBOX_OUTPUT
        plan["input_dir"] = SANDBOX_INPUT
        if pod.credentials.env:  # the task's credentials as variables (a credential's value wins)
            plan["env"] = {**dict(plan.get("env") or {}), **pod.credentials.env}
        return dict(plan)

    def _cli_launcher(self) -> str:
        """The task's ``osmo`` command: the service's CLI with the worker's interpreter (docs/runtime.md,
        "The osmo command in a task"); ``OSMO_URL`` and ``OSMO_TOKEN`` come from the plan."""
        return "\n".join([
            "#!/bin/sh",
            "# The service's CLI in a local task (docs/runtime.md). PYTHONPATH is this process's only.",
            f"PYTHONPATH={shlex.quote(_runtime_path())}",
            "export PYTHONPATH",
            f'exec {shlex.quote(self.python)} -m cli "$@"',
            "",
        ])

    @staticmethod
    def _credential_files(staging: Path, pod: PodRequest) -> dict[str, str]:
        """Write the task's credential files under ``credentials/<n>/`` (owner-only), one folder per
        mount path; the folder to bind read-only at each mount path, by mount path."""
        folders: dict[str, str] = {}
        for path, value in sorted(pod.credentials.files.items()):
            directory, filename = os.path.split(path)
            where = folders.setdefault(directory, f"credentials/{len(folders)}")
            (staging / where).mkdir(parents=True, mode=0o700, exist_ok=True)
            target = staging / where / filename
            target.touch(mode=0o600)
            target.write_text(value)
        return folders

    def _supervisor(self, folder: Path, credential_dirs: dict[str, str],
                    file_binds: tuple[list[str], list[str]]) -> str:
        sandbox = folder / "sandbox"
        binds = []
        for mount, where in sorted(credential_dirs.items()):
            binds += ["--ro-bind", str(folder / where), mount]
        # The sandbox's /tmp is its own: an interpreter or a checkout under the host's /tmp (a clone
        # there, its virtualenv) is bound back read-only, or the runtime cannot start.
        for host_path in sorted({os.path.realpath(sys.prefix), os.path.realpath(_runtime_path())}):
            if Path(host_path).is_relative_to("/tmp"):
                binds += ["--ro-bind", host_path, host_path]
        uploads, inputs = file_binds
        for target in uploads:
            os.makedirs(target, exist_ok=True)
            binds += ["--bind", target, target]
        for path in inputs:
            binds += ["--ro-bind", path, path]
        argv = [self.bwrap, *_host_root(), *self._concealed(), "--dev", "/dev", "--proc", "/proc",
                "--bind", str(sandbox / "tmp"), "/tmp", "--bind", str(sandbox / "osmo"), "/osmo",
                "--bind", str(folder / "run"), SANDBOX_RUN, *binds,
                "--unshare-pid", "--die-with-parent", "--chdir", "/tmp",
                "--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp", "--setenv", "PYTHONPATH", _runtime_path(),
                "--setenv", "PYTHONUNBUFFERED", "1", "--setenv", "OSMO_RESULT_PATH", f"{SANDBOX_RUN}/result.json",
                # PYTHONPATH is the runtime's, not the command's; the command finds `osmo` in the CLI folder
                "--setenv", OWN_ENV, "PYTHONPATH", "--setenv", CLI_DIR_ENV, f"{SANDBOX_RUN}/{CLI_FOLDER}",
                "--", self.python, "-m", "runtime", f"{SANDBOX_RUN}/plan.json"]
        # The sandbox starts from an empty environment plus the kept variables, passed by name: their
        # values (storage credentials) are read from the supervisor's environment, never written here.
        kept = " ".join(f'{name}="${{{name}}}"' for name in _sandbox_env_names(os.environ))
        return "\n".join([
            "#!/bin/sh",
            "# The supervisor of one local pod (scheduler/dispatch/local.py): writes its pid, runs the sandbox,",
            "# writes the sandbox's exit status.",
            f"cd {shlex.quote(str(folder))} || exit 1",
            "mkdir started 2>/dev/null || exit 0  # another supervisor of this pod runs it",
            "echo $$ > pid.tmp && mv pid.tmp pid",
            f"env -i {kept} {shlex.join(argv)} < /dev/null > log 2>&1",
            "echo $? > exit.tmp && mv exit.tmp exit",
            "",
        ])

    # -- PodBackend -----------------------------------------------------------------------------
    def create_pod(self, pod: PodRequest) -> None:
        folder = self.pod_dir(pod.namespace, pod.pod_name)
        if folder.exists():  # AlreadyExists: the deterministic name says it is this task's pod
            self._supervisor_ensure(folder)
            return
        try:
            plan = self._plan(pod)
        except ValueError as exc:
            raise DispatchPermanentError(f"the runtime plan is not JSON: {exc}") from exc
        if shutil.which(self.bwrap) is None:
            raise DispatchPermanentError(f"the local backend needs bubblewrap ({self.bwrap!r} is not on PATH)")
        binds = self._file_binds(pod, plan)
        staging = folder.with_name(f".{folder.name}.creating-{os.getpid()}")
        try:
            shutil.rmtree(staging, ignore_errors=True)
            for part in ("run", "sandbox/tmp", "sandbox/osmo/output", "sandbox/osmo/input"):
                (staging / part).mkdir(parents=True)
            (staging / "sandbox" / "tmp").chmod(0o1777)
            (staging / "run" / "plan.json").touch(mode=0o600)  # it may hold credentials
            (staging / "run" / "plan.json").write_text(json.dumps(plan))
            (staging / "run" / CLI_FOLDER).mkdir()
            (staging / "run" / CLI_FOLDER / "osmo").write_text(self._cli_launcher())
            (staging / "run" / CLI_FOLDER / "osmo").chmod(0o755)
            credential_dirs = self._credential_files(staging, pod)
            (staging / "request.json").write_text(json.dumps({
                "pod_name": pod.pod_name, "pool": pod.pool, "workflow_id": pod.workflow_id, "group": pod.group,
                "task": pod.task, "node": pod.node_name}))
            (staging / "supervisor.sh").write_text(self._supervisor(folder, credential_dirs, binds))
            try:
                staging.rename(folder)
            except OSError:
                if folder.exists():  # another worker created it first
                    shutil.rmtree(staging, ignore_errors=True)
                    return
                raise
            self._supervisor_start(folder)
        except (OSError, subprocess.SubprocessError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise DispatchTransientError(f"local pod {pod.pod_name}: {exc.__class__.__name__}: {exc}") from exc

    @staticmethod
    def _supervisor_start(folder: Path) -> None:
        subprocess.run(["setsid", "-f", "/bin/sh", str(folder / "supervisor.sh")], check=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30)

    def _supervisor_ensure(self, folder: Path) -> None:
        """Start the supervisor of an existing pod folder that no supervisor claimed (its creator was
        killed before starting it). Harmless when one is starting right now: only one claims the pod."""
        if (folder / "started").exists() or (folder / "pid").exists() or not (folder / "supervisor.sh").is_file():
            return
        try:
            self._supervisor_start(folder)
        except (OSError, subprocess.SubprocessError) as exc:
            raise DispatchTransientError(f"local pod {folder.name}: {exc.__class__.__name__}: {exc}") from exc

    def delete_pod(self, *, namespace: str, pod_name: str, grace_seconds: int | None = None) -> None:
        self._remove(self.pod_dir(namespace, pod_name),
                     DEFAULT_GRACE_SECONDS if grace_seconds is None else grace_seconds)

    def _remove(self, folder: Path, grace_seconds: float) -> None:
        if not folder.exists():
            return
        pid = self._pid(folder)
        if pid is not None and not (folder / "exit").exists():
            self._signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + grace_seconds
            while time.monotonic() < deadline and not (folder / "exit").exists() and alive(pid):
                time.sleep(0.05)
            self._signal(pid, signal.SIGKILL)
            # SIGKILL is delivered at once but a loaded machine takes a moment to end the processes:
            # the pod is gone only when none of them runs any more.
            deadline = time.monotonic() + KILL_WAIT_SECONDS
            while group_running(pid) and time.monotonic() < deadline:
                time.sleep(0.02)
        shutil.rmtree(folder, ignore_errors=True)

    @staticmethod
    def _signal(pid: int, signum: int) -> None:
        try:
            os.killpg(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    def gang_finished_pods_delete(self, *, namespace: str, pool: str, workflow_id: str, group: str) -> None:
        for folder, request in self._pods(namespace):
            if (request.get("pool"), request.get("workflow_id"), request.get("group")) == (pool, workflow_id, group) \
                    and (folder / "exit").exists():
                shutil.rmtree(folder, ignore_errors=True)

    def pods_list(self, *, namespace: str, pool: str) -> list[ListedPod]:
        listed = []
        for folder, request in self._pods(namespace):
            if request.get("pool") != pool:
                continue
            state = self._state(folder, now=datetime.now(tz=UTC))
            phase = {"Missing": "Failed"}.get(state.phase, state.phase)
            listed.append(ListedPod(name=str(request.get("pod_name")), phase=phase, node=request.get("node") or None))
        return listed

    def pods_observe(self, pods: Iterable[PodRequest], *, namespace: str, pool: str, now: datetime
                     ) -> tuple[list[ListedPod], dict[str, PodState]]:
        return self.pods_list(namespace=namespace, pool=pool), self.pod_states(pods, now=now)

    def pod_states(self, pods: Iterable[PodRequest], *, now: datetime) -> dict[str, PodState]:
        return {pod.pod_name: self._state(self.pod_dir(pod.namespace, pod.pod_name), now=now) for pod in pods}

    def pod_log(self, pod: PodRequest, *, tail: int, now: datetime) -> PodLog:
        folder = self.pod_dir(pod.namespace, pod.pod_name)
        if not folder.exists():
            raise DispatchPermanentError(f"pod {pod.pod_name} does not exist on the local backend")
        try:
            lines, truncated = tail_lines(folder / "log", tail)
        except FileNotFoundError as exc:
            raise DispatchPermanentError(f'container "task" in pod {pod.pod_name} is waiting to start') from exc
        return PodLog(tuple(lines), truncated=truncated)

    def pod_events(self, pods: Iterable[PodRequest], *, now: datetime) -> list[PodEvent]:
        events: list[PodEvent] = []
        for pod in pods:
            folder = self.pod_dir(pod.namespace, pod.pod_name)
            try:
                events.append(PodEvent(mtime(folder / "request.json"), pod.pod_name, "Scheduled",
                                       f"Assigned {pod.pod_name} to local slot {pod.node_name}"))
                if (folder / "pid").exists():
                    events.append(PodEvent(mtime(folder / "pid"), pod.pod_name, "Started",
                                           "Started the task's sandbox (bubblewrap)"))
                if (folder / "exit").exists():
                    state = self._state(folder, now=now)
                    reason = "Completed" if state.phase == "Succeeded" else "Error"
                    events.append(PodEvent(mtime(folder / "exit"), pod.pod_name, reason,
                                           f"exited with code {state.exit_code}" + (
                                               f": {state.message}" if state.message else "")))
            except FileNotFoundError:
                continue  # deleted meanwhile
        return events

    # -- helpers --------------------------------------------------------------------------------
    def _pods(self, namespace: str) -> list[tuple[Path, dict[str, Any]]]:
        base = self.root / kube_pod_name(namespace)
        found = []
        for folder in sorted(base.iterdir()) if base.is_dir() else ():
            if folder.name.startswith("."):
                continue
            try:
                found.append((folder, json.loads((folder / "request.json").read_text())))
            except (OSError, ValueError):
                continue
        return found

    @staticmethod
    def _pid(folder: Path) -> int | None:
        try:
            return int((folder / "pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def _state(self, folder: Path, *, now: datetime) -> PodState:
        if not folder.exists():
            return PodState("Missing")
        try:
            status = int((folder / "exit").read_text().strip())
        except FileNotFoundError:
            pid = self._pid(folder)
            if pid is None:
                waited = (now - mtime(folder / "request.json")).total_seconds()
                if waited > START_DEADLINE_SECONDS:
                    return PodState("Failed", None, f"the task's sandbox did not start within {waited:.0f} s",
                                    live=True)
                return PodState("Pending")
            if alive(pid):
                return PodState("Running")
            return PodState("Failed", None, "the task's process ended without an exit status (killed)")
        except ValueError:
            return PodState("Failed", None, "the task's exit status is unreadable")
        code, message = status, ""
        try:
            result = json.loads(read_regular(folder / "run" / "result.json", RESULT_MAX_BYTES))
            code, message = int(result["exit_code"]), str(result.get("message") or "")
        except (OSError, ValueError, KeyError, TypeError):
            if status:
                message = f"the sandbox exited with status {status} (no runtime result)"
        if code == 0 and status == 0:
            return PodState("Succeeded", 0)
        return PodState("Failed", code or status, message)
