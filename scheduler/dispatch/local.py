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

import contextlib
import fcntl
import json
import os
import select
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlsplit

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
    proc_stat,
    read_regular,
    tail_lines,
)
from scheduler.dispatch.local_sandbox import (
    DEFAULT_MAX_PROCESSES,
    DEFAULT_MEMORY_BYTES,
    DEFAULT_TMP_BYTES,
    Cgroups,
    LimitHit,
    Limits,
    SandboxSpec,
    WorkflowNetwork,
    bound_udp_ports,
    listening_ports,
    netns_connect,
    netns_key,
    netns_udp_socket,
    owned_folder_ready,
    pod_cgroup_name,
    sandbox_gid,
    sandbox_uid,
    seccomp_filter_write,
    setpriv_argv,
)
from scheduler.dispatch.pod.naming import kube_pod_name

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


#: Where the sandbox sees the service's packages its runtime and its ``osmo`` command need (each bound
#: read-only from the service's installation: the rest of the checkout is not the task's to read).
SANDBOX_LIB = "/osmo/lib"
SANDBOX_PACKAGES = ("runtime", "cli", "parsing")


def _package_folder(name: str) -> str:
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise DispatchPermanentError(f"the package {name!r} of the task runtime is not installed")
    return os.path.realpath(next(iter(spec.submodule_search_locations)))


def _runtime_path() -> str:
    """The folder holding the service's packages (the supervisor's PYTHONPATH: it runs outside the sandbox)."""
    return str(Path(_package_folder("scheduler")).parent)


def _loopback_ports(url: str) -> tuple[int, ...]:
    """The port of the service's address when it is on this machine's loopback (a workflow's network
    forwards exactly that one to the host)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if host not in ("localhost", "::1") and not host.startswith("127."):
        return ()
    try:
        return (parts.port or (443 if parts.scheme == "https" else 80),)
    except ValueError:
        return ()


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


_PRIVATE_TOP = frozenset({"tmp", "proc", "dev", "osmo", "run"})
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


def _traversable(path: str, uid: int, gid: int) -> bool:
    """Whether the task's user may pass through the host's folder ``path`` (a missing one: yes)."""
    try:
        info = os.stat(path)
    except OSError:
        return True
    mode = info.st_mode
    return bool(mode & 0o001 or (info.st_gid == gid and mode & 0o010) or (info.st_uid == uid and mode & 0o100))


_WIDTH = {"--bind": 3, "--ro-bind": 3, "--tmpfs": 2, "--perms": 2, "--size": 2, "--symlink": 3, "--dir": 2}


def _reachable(args: list[str], *, uid: int, gid: int) -> list[str]:
    """``args`` (bwrap mounts, in order) with what the task's user needs to reach each mount made first.
    bwrap makes the folders a mount needs owner-only, so each is made world-traversable beforehand
    (on the sandbox's root or one of its tmpfs: ``/tmp``, a hidden folder's cover); and a host folder
    on the way that the task's user may not pass (a ``mkdtemp`` folder, ``0700``) is covered with an
    empty tmpfs: its other contents were out of the task's reach anyway."""
    host_tops = {entry.name for entry in os.scandir("/")} - _PRIVATE_TOP
    fresh: list[str] = []
    made: set[str] = set()
    out: list[str] = []
    index = 0
    while index < len(args):
        option = args[index]
        width = _WIDTH.get(option, 1)
        if option in ("--bind", "--ro-bind", "--tmpfs"):
            destination = args[index + width - 1]
            for parent in reversed(Path(destination).parents):
                text = str(parent)
                if text == "/" or text in made:
                    continue
                on_fresh = any(_within(text, root) and text != root for root in fresh)
                if not on_fresh and Path(text).parts[1] not in host_tops:  # on the sandbox's own root
                    on_fresh = True
                if on_fresh:
                    out += ["--perms", "0755", "--dir", text]
                    made.add(text)
                elif not _traversable(text, uid, gid):
                    out += ["--perms", "0755", "--tmpfs", text]
                    fresh.append(text)
                    made.add(text)
            if option == "--tmpfs":
                fresh.append(destination)
        out += args[index:index + width]
        index += width
    return out


@dataclass
class LocalExec:
    """A process started in a task's sandbox: ``terminal`` is the controlling side of its terminal (tty
    sessions), else its stdin, stdout and stderr are the process's pipes. Implements
    :class:`scheduler.dispatch.base.TaskExec`: :meth:`read` in one thread, the rest from any other."""

    process: subprocess.Popen[bytes]
    terminal: int | None = None
    _open: list[int] = field(default_factory=list)  # the output fds read() still waits on
    _closed: bool = False

    def __post_init__(self) -> None:
        if self.terminal is not None:
            self._open = [self.terminal]
        else:
            streams = (self.process.stdout, self.process.stderr)
            self._open = [stream.fileno() for stream in streams if stream is not None]

    @property
    def tty(self) -> bool:
        return self.terminal is not None

    def read(self) -> tuple[int, bytes]:
        while self._open and not self._closed:
            try:
                ready, _, _ = select.select(self._open, [], [], 0.5)
            except (OSError, ValueError):  # closed meanwhile (close() from another thread)
                break
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # EIO: a terminal whose every user closed it
                    data = b""
                if data:
                    stderr = self.process.stderr
                    return (2 if stderr is not None and fd == stderr.fileno() else 1), data
                self._open.remove(fd)
        return 0, b""

    def write(self, data: bytes) -> None:
        fd = self.terminal if self.terminal is not None else (self.process.stdin.fileno() if self.process.stdin
                                                              and not self.process.stdin.closed else None)
        view = memoryview(data)
        while fd is not None and view:
            view = view[os.write(fd, view):]

    def close_stdin(self) -> None:
        if self.terminal is not None:
            self.write(b"\x04")  # the terminal's EOF character (VEOF), as a keyboard's Ctrl-D
        elif self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()

    def resize(self, width: int, height: int) -> None:
        if self.terminal is not None:
            fcntl.ioctl(self.terminal, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        return 128 - code if code < 0 else code

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # a hangup, as a closed terminal gives: the command's processes end with it, except those detached
        # from it (nohup, or a trap of SIGHUP); SIGCONT wakes stopped ones to receive it. Then nsenter itself.
        for sig in (signal.SIGHUP, signal.SIGCONT):
            try:
                os.killpg(self.process.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(0.5)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(self.process.pid, signal.SIGKILL)
        if self.terminal is not None:
            os.close(self.terminal)  # hangs the terminal up: its session's processes get SIGHUP
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    env = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep:
            env[name.decode(errors="replace")] = value.decode(errors="replace")
    return env


# <asm-generic/ioctls.h> (Python's termios does not name them): lock/unlock a pty, its number.
_TIOCSPTLCK = 0x40045431
_TIOCGPTN = 0x80045430


def _sandbox_terminal(pid: int) -> tuple[int, int]:
    """A terminal made in the devpts of the sandbox ``pid`` is in (so the session sees its name under
    its own ``/dev/pts``): the controlling side and the session's side, both opened here."""
    controlling = os.open(f"/proc/{pid}/root/dev/pts/ptmx", os.O_RDWR | os.O_NOCTTY)
    try:
        fcntl.ioctl(controlling, _TIOCSPTLCK, struct.pack("i", 0))  # unlock
        number = struct.unpack("I", fcntl.ioctl(controlling, _TIOCGPTN, struct.pack("I", 0)))[0]
        session = os.open(f"/proc/{pid}/root/dev/pts/{number}", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        os.close(controlling)
        raise
    return controlling, session


def _task_command_pid(init: int) -> int | None:
    """The task's command (the runtime's first child, below the sandbox's init), or None."""
    children: dict[int, list[int]] = {}
    for stat_path in Path("/proc").glob("[0-9]*/stat"):
        fields = proc_stat(stat_path)
        if fields is not None and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(stat_path.parent.name))
    runtime = min(children.get(init, []), default=None)
    return min(children.get(runtime, []), default=None) if runtime is not None else None


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
        self.service_ports = _loopback_ports(service_url) if service_url else ()
        self.max_processes = max_processes
        self.pasta = pasta
        self.cgroups = Cgroups.detect() if cgroups is None else cgroups
        # The service's folders (module docstring): hidden from every sandbox; sealed ones never written
        # (the service's own code and interpreter are always sealed, wherever they are).
        self.hidden = tuple(sorted({os.path.realpath(str(path)) for path in (self.root, *hidden)}))
        self.sealed = tuple(sorted({os.path.realpath(path) for path in (*sealed, *self._needed())}))
        # The service's code: nothing of it is a task's to name, but for the hidden (data) folders in it.
        self.code_root = os.path.realpath(_runtime_path())
        # Where a file:// upload may go (None: anywhere the service's folders are not).
        self.writable = (tuple(sorted({os.path.realpath(str(path)) for path in writable}))
                         if writable is not None else None)

    def _needed(self) -> list[str]:
        """What the sandbox runs: the interpreter's installation (the virtualenv and its base)."""
        return sorted({os.path.realpath(path) for path in (sys.prefix, sys.base_prefix)})

    def _mounts(self) -> list[str]:
        """bwrap arguments after the host's root: what runs, bound back where the sandbox's own folders
        (``/tmp``) cover the host's; every hidden folder covered with an empty tmpfs wherever the sandbox
        would see it, then what runs bound back inside one (an interpreter under the worker's home);
        the host's ``/run`` (sockets of its servers) and the cgroup tree (every pod's name) covered."""
        needed = self._needed()
        args: list[str] = []
        bound_back = [path for path in needed if Path(path).parts[1:2] and Path(path).parts[1] in _PRIVATE_TOP]
        for path in bound_back:
            args += ["--ro-bind", path, path]
        for folder in self.hidden:
            parts = Path(folder).parts
            shown = len(parts) > 1 and (parts[1] not in _PRIVATE_TOP or any(_within(folder, p) for p in bound_back))
            if not shown or not os.path.isdir(folder):
                continue
            args += ["--tmpfs", folder]
            for path in needed:
                if _within(path, folder) and path != folder:
                    args += ["--ro-bind", path, path]
        args += ["--tmpfs", "/run"]
        resolv = os.path.realpath("/etc/resolv.conf")
        if resolv.startswith("/run/") and os.path.isfile(resolv):  # a resolver's file under /run stays readable
            args += ["--ro-bind", resolv, resolv]
        if os.path.isdir("/sys/fs/cgroup"):
            args += ["--tmpfs", "/sys/fs/cgroup"]
        return args

    def _service_clash(self, path: str) -> str | None:
        """The service's folder a ``file://`` bind of ``path`` would show to the task, if any: one that
        ``path`` holds, the pod root's inside (other pods), or a sealed path it overlaps."""
        real = os.path.realpath(path)
        root = os.path.realpath(self.root)
        clash = next((kept for kept in self.hidden if _within(kept, real)), None)
        clash = clash or (root if _within(real, root) else None)
        clash = clash or next((kept for kept in self.sealed if _within(kept, real) or _within(real, kept)), None)
        in_code = _within(real, self.code_root) and not any(_within(real, kept) for kept in self.hidden)
        return clash or (self.code_root if in_code or _within(self.code_root, real) else None)

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
            f"PYTHONPATH={SANDBOX_LIB}",
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
            binds += ["--ro-bind", _package_folder(name), f"{SANDBOX_LIB}/{name}"]
        for mount, where in sorted(credential_dirs.items()):
            binds += ["--ro-bind", str(folder / where), mount]
        uploads, inputs = file_binds
        for target in uploads:
            binds += ["--bind", target, target]
        for path in inputs:
            binds += ["--ro-bind", path, path]
        mounts = _reachable(["--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp",
                             "--bind", str(sandbox / "osmo"), "/osmo", "--bind", str(folder / "run"), SANDBOX_RUN,
                             *self._account_binds(folder),
                             *self._mounts(), *binds], uid=uid, gid=gid)
        argv = [self.bwrap, *_host_root(), "--dev", "/dev", "--proc", "/proc", *mounts,
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
        return SandboxSpec(argv=tuple(argv), env_names=tuple(_sandbox_env_names(os.environ)), limits=limits,
                           seccomp=self._seccomp_path(), cgroups=self.cgroups, network=network,
                           service_ports=self.service_ports, pasta=self.pasta, uid=uid, gid=gid)

    @staticmethod
    def _account_files(staging: Path, pod: PodRequest) -> None:
        """The host's ``/etc/passwd`` and ``/etc/group`` with the task's user and group added (``osmo``,
        home ``/tmp``), bound over the host's in the sandbox: programs that look their user up (a shell's
        prompt, ``whoami``, pip, ssh) find one."""
        uid, gid = sandbox_uid(pod.workflow_pk), sandbox_gid(pod.owner_pk)
        for name, line in (("passwd", f"osmo:x:{uid}:{gid}:OSMO task:/tmp:/bin/sh\n"), ("group", f"osmo:x:{gid}:\n")):
            try:
                text = Path("/etc", name).read_text()
            except OSError:
                continue
            (staging / "etc").mkdir(exist_ok=True)
            (staging / "etc" / name).write_text(text + ("" if text.endswith("\n") or not text else "\n") + line)

    @staticmethod
    def _account_binds(folder: Path) -> list[str]:
        return [arg for name in ("passwd", "group") if Path("/etc", name).is_file()
                for arg in ("--ro-bind", str(folder / "etc" / name), f"/etc/{name}")]

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
                self.writable is None or any(_within(real, root) for root in roots))
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
        binds = self._file_binds(pod, plan)
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
            (staging / "run" / CLI_FOLDER / "osmo").write_text(self._cli_launcher())
            (staging / "run" / CLI_FOLDER / "osmo").chmod(0o755)
            credential_dirs = self._credential_files(staging, pod)
            self._account_files(staging, pod)
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
        env = {**os.environ, "PYTHONPATH": _runtime_path()}
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
        """Start ``argv`` inside the running task's sandbox, as the task's user with its limits, system
        call filter, namespaces (files, processes, network), working folder and environment. With
        ``tty`` the process gets a terminal of the sandbox's own (``LocalExec.terminal`` is its other
        side) and leads a session there, else its stdin, stdout and stderr are pipes."""
        folder, spec, pid = self._running_sandbox(namespace, pod_name)
        command = _task_command_pid(pid) or pid
        try:
            env = _environ(command)
        except OSError:
            raise DispatchPermanentError(f"pod {pod_name} is not running on the local backend") from None
        cgroups = Cgroups.for_pod(pod_cgroup_name(folder), kind=spec.cgroups)
        terminal, child = _sandbox_terminal(command) if tty else (None, None)
        seccomp = os.open(spec.seccomp, os.O_RDONLY) if spec.seccomp else None
        confine = [self.python, "-c", f"import sys; sys.path.insert(0, {SANDBOX_LIB!r}); "
                                      "from runtime.confine import main; sys.exit(main(sys.argv))",
                   str(seccomp) if seccomp is not None else "-", *(["--tty"] if tty else [])]
        # the command's namespaces, root and working folder (nsenter reads both from its /proc entry)
        full = ["nsenter", f"--target={command}", "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wd",
                "--", *setpriv_argv(spec.uid, spec.gid), *confine, "--", *argv]

        def in_child() -> None:
            if cgroups.kind:
                cgroups.enter(os.getpid())
            os.setsid()  # its own session: the web server's signals and terminal are not its

        stdio: int = child if child is not None else subprocess.PIPE
        try:
            process = subprocess.Popen(full, stdin=stdio, stdout=stdio, stderr=stdio, env=env, preexec_fn=in_child,
                                       pass_fds=[seccomp] if seccomp is not None else [], cwd="/")
        finally:
            if seccomp is not None:
                os.close(seccomp)
            if child is not None:
                os.close(child)
        return LocalExec(process=process, terminal=terminal)

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
        try:
            hit = LimitHit.from_json(read_regular(folder / "limit.json", RESULT_MAX_BYTES).decode())
            return PodState("Failed", 137, hit.message)
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError):
            return PodState("Failed", 137, "the task went over a limit of its sandbox")
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
