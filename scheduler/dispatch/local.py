"""The ``local`` dispatch backend: every task is a real process on this machine, run by the task runtime
inside a bubblewrap sandbox (docs/runtime.md, "Local backend").

A pod is a folder ``<root>/<namespace>/<pod>/`` (``root``: ``OSMO_LOCAL_DIR``):

* ``request.json``: the pod's identity (pool, workflow, group, task, node), for listings;
* ``run/plan.json``: the runtime's plan; ``run/result.json``: its result (termination message);
  ``run/bin/osmo``: the task's ``osmo`` command (the service's CLI, at the end of the command's ``PATH``);
  ``run/workspace``: the task user's folder ``/osmo/run/workspace`` (``osmo workflow rsync``'s usual target);
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

The service's own folders are hidden from the sandbox and never bound writable
(:mod:`scheduler.dispatch.local_mounts`).

Phases are read from the folder: no ``pid`` yet -> Pending; a live ``pid`` and no ``exit`` ->
Running; ``exit`` -> Succeeded when the task's code (the result's, else the status) is 0, else Failed
with that code and the result's message. Deleting a pod signals the process group (SIGTERM, then
SIGKILL after the grace period) and removes the folder. Imports nothing from Django.

Beside this module: what the sandbox sees and the pod folder's files made for it
(:mod:`~scheduler.dispatch.local_mounts`), the sandbox's instructions (:mod:`~scheduler.dispatch.local_sandbox`),
its limits (:mod:`~scheduler.dispatch.local_limits`) and network (:mod:`~scheduler.dispatch.local_network`),
its supervisor (:mod:`~scheduler.dispatch.local_supervisor`), reading the pod's processes, files and phase
(:mod:`~scheduler.dispatch.local_files`) and sessions into a running task (:mod:`~scheduler.dispatch.local_exec`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runtime.environment import CLI_DIR_ENV, OWN_ENV
from scheduler.dispatch.base import (
    DispatchPermanentError,
    DispatchTransientError,
    ListedPod,
    PodEvent,
    PodLog,
    PodState,
)
from scheduler.dispatch.local_exec import LocalExec, exec_in_sandbox
from scheduler.dispatch.local_files import alive, group_running, mtime, pod_pid, pod_state, tail_lines
from scheduler.dispatch.local_limits import (
    DEFAULT_MAX_PROCESSES,
    DEFAULT_MEMORY_BYTES,
    DEFAULT_TMP_BYTES,
    Cgroups,
    Limits,
    pod_cgroup_name,
)
from scheduler.dispatch.local_mounts import (
    SANDBOX_LIB,
    SANDBOX_PACKAGES,
    account_binds,
    account_files,
    cli_launcher,
    credential_files,
    file_binds,
    host_root,
    loopback_ports,
    package_folder,
    reachable,
    runtime_path,
    sandbox_env_names,
    service_covers,
    within,
)
from scheduler.dispatch.local_network import (
    WorkflowNetwork,
    bound_udp_ports,
    listening_ports,
    netns_connect,
    netns_key,
    netns_udp_socket,
)
from scheduler.dispatch.local_sandbox import (
    SandboxSpec,
    owned_folder_ready,
    sandbox_gid,
    sandbox_uid,
    seccomp_filter_write,
    setpriv_argv,
)
from scheduler.dispatch.pod.naming import kube_pod_name
from scheduler.dispatch.pod.request import PodRequest

LOCAL_DIR_ENV = "OSMO_LOCAL_DIR"
SANDBOX_OUTPUT = "/osmo/output"
SANDBOX_INPUT = "/osmo/input"
SANDBOX_RUN = "/osmo/run"
#: The folder of ``run/`` holding the task's ``osmo`` command (``OSMO_CLI_DIR`` in the sandbox).
CLI_FOLDER = "bin"
DEFAULT_GRACE_SECONDS = 5
#: After SIGKILL, how long a delete waits for the pod's processes to have ended.
KILL_WAIT_SECONDS = 5


def default_root() -> Path:
    return Path(os.environ.get(LOCAL_DIR_ENV) or Path(tempfile.gettempdir()) / "osmo-local")


class LocalBackend:
    """Tasks as sandboxed processes on this machine (see the module docstring)."""

    name = "local"

    def __init__(self, root: Path | str | None = None, *, python: str | None = None, bwrap: str = "bwrap",
                 hidden: Iterable[str] = (), sealed: Iterable[str] = (), writable: Iterable[str] | None = None,
                 network: str = "workflow", service_url: str = "", max_processes: int = DEFAULT_MAX_PROCESSES,
                 pasta: str = "pasta", cgroups: str | None = None) -> None:
        self.root = Path(root) if root is not None else default_root()
        self.python = python or sys.executable
        self.bwrap = bwrap
        # "workflow": a network namespace per workflow (local_sandbox); "host": the host's network
        if network not in ("workflow", "host"):
            raise ValueError(f"network must be 'workflow' or 'host', not {network!r} (OSMO_LOCAL_NETWORK)")
        self.network = network
        self.service_ports = loopback_ports(service_url) if service_url else ()
        self.max_processes = max_processes
        self.pasta = pasta
        self.cgroups = Cgroups.detect() if cgroups is None else cgroups
        # The service's folders (module docstring): hidden from every sandbox; sealed ones never written
        # (the service's own code and interpreter are always sealed, wherever they are).
        self.hidden = tuple(sorted({os.path.realpath(str(path)) for path in (self.root, *hidden)}))
        self.sealed = tuple(sorted({os.path.realpath(path) for path in (*sealed, *self._needed())}))
        # The service's code: nothing of it is a task's to name, but for the hidden (data) folders in it.
        self.code_root = os.path.realpath(runtime_path())
        # Where a file:// upload may go (None: anywhere the service's folders are not).
        self.writable = (tuple(sorted({os.path.realpath(str(path)) for path in writable}))
                         if writable is not None else None)

    def _needed(self) -> list[str]:
        """What the sandbox runs: the interpreter's installation (the virtualenv and its base)."""
        return sorted({os.path.realpath(path) for path in (sys.prefix, sys.base_prefix)})

    def _mounts(self) -> list[str]:
        """bwrap arguments after the host's root (:func:`~scheduler.dispatch.local_mounts.service_covers`)."""
        return service_covers(self._needed(), self.hidden)

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

    def _limits(self, pod: PodRequest) -> Limits:
        return Limits(memory_bytes=pod.memory_bytes or DEFAULT_MEMORY_BYTES, cpu_millis=pod.cpu_millis,
                      processes=self.max_processes, tmp_bytes=pod.storage_bytes or DEFAULT_TMP_BYTES)

    def _seccomp_path(self) -> str:
        """The compiled seccomp filter (made once per pod root)."""
        path = self.root / ".sandbox" / "seccomp.bpf"
        if not path.exists():  # (a pod root removed under a running worker gets it again)
            path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
            seccomp_filter_write(path)
        return str(path)

    def _sandbox_spec(self, pod: PodRequest, folder: Path, credential_dirs: dict[str, str],
                      file_binds: tuple[list[str], list[str]]) -> SandboxSpec:
        """How the supervisor runs the pod (module docstring; :mod:`scheduler.dispatch.local_sandbox`)."""
        sandbox = folder / "sandbox"
        limits = self._limits(pod)
        uid, gid = sandbox_uid(pod.workflow_pk), sandbox_gid(pod.owner_pk)
        binds = []
        for name in SANDBOX_PACKAGES:
            binds += ["--ro-bind", package_folder(name), f"{SANDBOX_LIB}/{name}"]
        for mount, where in sorted(credential_dirs.items()):
            binds += ["--ro-bind", str(folder / where), mount]
        uploads, inputs = file_binds
        for target in uploads:
            binds += ["--bind", target, target]
        for path in inputs:
            binds += ["--ro-bind", path, path]
        mounts = reachable(["--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
                             "--bind", str(sandbox / "osmo"), "/osmo", "--bind", str(folder / "run"), SANDBOX_RUN,
                             *account_binds(folder),
                             *self._mounts(), *binds], uid=uid, gid=gid)
        argv = [self.bwrap, *host_root(), "--dev", "/dev", "--proc", "/proc", *mounts,
                "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
                "--chdir", "/tmp",
                "--setenv", "HOME", "/tmp", "--setenv", "TMPDIR", "/tmp", "--setenv", "PYTHONPATH", SANDBOX_LIB,
                "--setenv", "PYTHONUNBUFFERED", "1", "--setenv", "OSMO_RESULT_PATH", f"{SANDBOX_RUN}/result.json",
                # PYTHONPATH is the runtime's, not the command's; the command finds `osmo` in the CLI folder
                "--setenv", OWN_ENV, "PYTHONPATH", "--setenv", CLI_DIR_ENV, f"{SANDBOX_RUN}/{CLI_FOLDER}",
                "--", *setpriv_argv(uid, gid), self.python, "-m", "runtime", f"{SANDBOX_RUN}/plan.json"]
        network = ""
        if self.network == "workflow":
            network = str(self.root / ".sandbox" / "netns" / netns_key(pod.workflow_id))
        # The sandbox starts from an empty environment plus the kept variables, passed by name: their
        # values (storage credentials) are read from the supervisor's environment, never written down.
        return SandboxSpec(argv=tuple(argv), env_names=tuple(sandbox_env_names(os.environ)), limits=limits,
                           seccomp=self._seccomp_path(), cgroups=self.cgroups, network=network,
                           service_ports=self.service_ports, pasta=self.pasta, uid=uid, gid=gid)

    def _ownership(self, staging: Path, pod: PodRequest, uploads: list[str]) -> None:
        """The task's folders are its user's: its /osmo and run folder, its credential files, its upload
        folders (made or given to it, or refused when another user's tasks own them)."""
        uid, gid = sandbox_uid(pod.workflow_pk), sandbox_gid(pod.owner_pk)
        for path in (staging / "run", staging / "run" / "plan.json", staging / "run" / "workspace",
                     staging / "sandbox" / "osmo",
                     staging / "sandbox" / "osmo" / "output", staging / "sandbox" / "osmo" / "input",
                     *(staging / "credentials").rglob("*")):
            os.chown(path, uid, gid)
        roots = self.writable or ()
        for target in uploads:
            real = os.path.realpath(target)
            claimable = real not in roots and real not in ("/", "/tmp", "/var/tmp") and (
                self.writable is None or any(within(real, root) for root in roots))
            refusal = owned_folder_ready(target, uid=uid, gid=gid, claimable=claimable)
            if refusal is not None:
                raise DispatchPermanentError(f"the upload folder {target[:200]!r} may not be used by a task: {refusal}")

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
        for program, package in ((self.bwrap, "bubblewrap"), ("setpriv", "util-linux"),
                                 *([(self.pasta, "passt")] if self.network == "workflow" else [])):
            if shutil.which(program) is None:
                raise DispatchPermanentError(f"the local backend needs {program!r} (Debian package {package}), "
                                             "which is not on PATH")
        binds = file_binds(plan, root=str(self.root), hidden=self.hidden, sealed=self.sealed,
                           code_root=self.code_root, writable=self.writable)
        staging = folder.with_name(f".{folder.name}.creating-{os.getpid()}")
        try:
            shutil.rmtree(staging, ignore_errors=True)
            for part in ("run", "run/workspace", "sandbox/osmo/output", "sandbox/osmo/input",
                         *(f"sandbox{SANDBOX_LIB}/{name}" for name in SANDBOX_PACKAGES)):
                (staging / part).mkdir(parents=True, mode=0o755)
            staging.chmod(0o700)  # the pod's folder is the service's: the task sees only what is bound
            (staging / "run" / "plan.json").touch(mode=0o600)  # it may hold credentials
            (staging / "run" / "plan.json").write_text(json.dumps(plan))
            (staging / "run" / CLI_FOLDER).mkdir()
            (staging / "run" / CLI_FOLDER / "osmo").write_text(cli_launcher(self.python))
            (staging / "run" / CLI_FOLDER / "osmo").chmod(0o755)
            credential_dirs = credential_files(staging, pod)
            account_files(staging, pod)
            self._ownership(staging, pod, binds[0])
            (staging / "request.json").write_text(json.dumps({
                "pod_name": pod.pod_name, "pool": pod.pool, "workflow_id": pod.workflow_id, "group": pod.group,
                "task": pod.task, "node": pod.node_name}))
            (staging / "sandbox.json").write_text(self._sandbox_spec(pod, folder, credential_dirs, binds).to_json())
            try:
                staging.rename(folder)
            except OSError:
                if folder.exists():  # another worker created it first
                    shutil.rmtree(staging, ignore_errors=True)
                    return
                raise
            self._supervisor_start(folder)
        except DispatchPermanentError:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        except (OSError, subprocess.SubprocessError) as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise DispatchTransientError(f"local pod {pod.pod_name}: {exc.__class__.__name__}: {exc}") from exc

    def _supervisor_start(self, folder: Path) -> None:
        env = {**os.environ, "PYTHONPATH": runtime_path()}
        subprocess.run(["setsid", "-f", self.python, "-m", "scheduler.dispatch.local_supervisor", str(folder)],
                       check=True, env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=30)

    def _supervisor_ensure(self, folder: Path) -> None:
        """Start the supervisor of an existing pod folder that no supervisor claimed (its creator was
        killed before starting it). Harmless when one is starting right now: only one claims the pod."""
        if (folder / "started").exists() or (folder / "pid").exists() or not (folder / "sandbox.json").is_file():
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
        pid = pod_pid(folder)
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
            self._sandbox_cleanup(folder)
        shutil.rmtree(folder, ignore_errors=True)

    def _sandbox_cleanup(self, folder: Path) -> None:
        """What a supervisor killed before it could clean up leaves: the pod's cgroups, its place in its
        workflow's network (the network itself when it was the last task there)."""
        Cgroups.for_pod(pod_cgroup_name(folder), kind=self.cgroups).remove()
        try:
            workflow_id = str(json.loads((folder / "request.json").read_text())["workflow_id"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        if self.network == "workflow":
            WorkflowNetwork(self.root / ".sandbox" / "netns" / netns_key(workflow_id), self.service_ports, self.pasta
                            ).release(folder.name)

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

    def networks_sweep(self) -> None:
        """Remove the workflows' networks no live supervisor uses any more: one whose last supervisor was
        killed while a delete gave up waiting for it (a loaded machine) would otherwise keep its
        namespace and its pasta. The periodic status sync calls it (through :meth:`pods_list`)."""
        base = self.root / ".sandbox" / "netns"
        for folder in sorted(base.iterdir()) if base.is_dir() else ():
            if folder.is_dir():
                try:
                    WorkflowNetwork(folder, self.service_ports, self.pasta).release()
                except OSError:
                    continue

    def pods_list(self, *, namespace: str, pool: str) -> list[ListedPod]:
        if self.network == "workflow":
            self.networks_sweep()
        listed = []
        for folder, request in self._pods(namespace):
            if request.get("pool") != pool:
                continue
            state = pod_state(folder, now=datetime.now(tz=UTC))
            phase = {"Missing": "Failed"}.get(state.phase, state.phase)
            listed.append(ListedPod(name=str(request.get("pod_name")), phase=phase, node=request.get("node") or None))
        return listed

    def pods_observe(self, pods: Iterable[PodRequest], *, namespace: str, pool: str, now: datetime
                     ) -> tuple[list[ListedPod], dict[str, PodState]]:
        return self.pods_list(namespace=namespace, pool=pool), self.pod_states(pods, now=now)

    def pod_states(self, pods: Iterable[PodRequest], *, now: datetime) -> dict[str, PodState]:
        return {pod.pod_name: pod_state(self.pod_dir(pod.namespace, pod.pod_name), now=now) for pod in pods}

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
                    state = pod_state(folder, now=now)
                    reason = "Completed" if state.phase == "Succeeded" else "Error"
                    events.append(PodEvent(mtime(folder / "exit"), pod.pod_name, reason,
                                           f"exited with code {state.exit_code}" + (
                                               f": {state.message}" if state.message else "")))
            except FileNotFoundError:
                continue  # deleted meanwhile
        return events

    # -- sessions into a running task (exec, port-forward) ---------------------------------------
    def _running_sandbox(self, namespace: str, pod_name: str) -> tuple[Path, SandboxSpec, int]:
        """The pod's folder, its sandbox's instructions and its init's pid, or DispatchPermanentError when
        the task is not running."""
        folder = self.pod_dir(namespace, pod_name)
        try:
            spec = SandboxSpec.from_json((folder / "sandbox.json").read_text())
            pid = int((folder / "sandbox.pid").read_text().strip())
        except (OSError, ValueError, KeyError):
            raise DispatchPermanentError(f"pod {pod_name} is not running on the local backend") from None
        if (folder / "exit").exists() or not alive(pid):
            raise DispatchPermanentError(f"pod {pod_name} is not running on the local backend")
        return folder, spec, pid

    def exec_start(self, *, namespace: str, pod_name: str, argv: Sequence[str], tty: bool = False) -> LocalExec:
        """Start ``argv`` inside the running task's sandbox (:func:`~scheduler.dispatch.local_exec.exec_in_sandbox`)."""
        folder, spec, pid = self._running_sandbox(namespace, pod_name)
        return exec_in_sandbox(python=self.python, folder=folder, spec=spec, pid=pid, pod_name=pod_name, argv=argv,
                               tty=tty)

    def task_ports(self, *, namespace: str, pod_name: str) -> dict[int, str]:
        """The TCP ports the running task listens on (its user's sockets in its workflow's network), each
        with the address to connect to."""
        _folder, spec, pid = self._running_sandbox(namespace, pod_name)
        return listening_ports(pid, spec.uid)

    def port_connect(self, *, namespace: str, pod_name: str, port: int, timeout: float = 10.0) -> socket.socket:
        """A TCP connection to a port the running task listens on, made inside its network (nothing else:
        not the service's forward, not another workflow's port, not the host's loopback)."""
        _folder, spec, pid = self._running_sandbox(namespace, pod_name)
        ports = listening_ports(pid, spec.uid)
        if port not in ports:
            listed = ", ".join(str(p) for p in sorted(ports)) or "none"
            raise DispatchPermanentError(f"the task does not listen on port {port} (it listens on: {listed})")
        return netns_connect(pid, ports[port], port, timeout=timeout)

    def task_udp_ports(self, *, namespace: str, pod_name: str) -> dict[int, str]:
        """The UDP ports the running task's user is bound to in its network (``port-forward --udp``)."""
        _folder, spec, pid = self._running_sandbox(namespace, pod_name)
        return bound_udp_ports(pid, spec.uid)

    def udp_connect(self, *, namespace: str, pod_name: str, port: int) -> socket.socket:
        """A UDP socket inside the running task's network, connected to a port the task is bound to."""
        _folder, spec, pid = self._running_sandbox(namespace, pod_name)
        ports = bound_udp_ports(pid, spec.uid)
        if port not in ports:
            listed = ", ".join(str(p) for p in sorted(ports)) or "none"
            raise DispatchPermanentError(f"the task has no UDP socket bound to port {port} (its UDP ports: {listed})")
        return netns_udp_socket(pid, ports[port], port)

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
