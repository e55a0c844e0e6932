"""What confines a task of the ``local`` backend besides bubblewrap's namespaces (docs/runtime.md, "What a
task can and cannot do"): its user, its system calls, its resources and its network. Imports nothing
from Django; the supervisor (:mod:`scheduler.dispatch.local_supervisor`) applies it, the backend
(:mod:`scheduler.dispatch.local`) decides it.

* **User.** A uid per workflow (:data:`UID_BASE` + the workflow's database id) and a gid per submitter
  (:data:`UID_BASE` + the user's id): never root, never the service's user. Files a task writes are
  its workflow's; folders a task uploads to are group-writable with the set-gid bit, so the
  submitter's next workflow can replace them and another user's cannot. ``setpriv`` switches to them
  inside the sandbox with no capabilities, an empty bounding set and ``no_new_privs``.
* **System calls.** A seccomp filter (libseccomp through ``pyseccomp``, compiled once to a file that
  bwrap loads) refuses with ``EPERM`` what a task never needs and an escape would: mounting, new
  namespaces, ptrace and reading other processes' memory, kernel modules, kexec, reboot, swap, the
  clock, BPF, perf, keyrings, handle-based opens; ``clone3`` answers ``ENOSYS`` so the C library falls
  back to ``clone``, whose namespace flags the filter sees. Other architectures' calls kill the process.
* **Resources.** From the task's request: memory, processes and CPU by cgroups (v2 where the unified
  hierarchy has the controllers, else v1's memory, pids and cpu hierarchies), else by rlimits
  (``RLIMIT_DATA``, ``RLIMIT_NPROC``); ``/tmp`` is a tmpfs of a fixed size. Going over a limit ends the
  task: the kernel kills it out of memory, and the supervisor kills it when its process count or its
  ``/tmp`` reached the limit; :class:`LimitHit` says which, for the pod's status.
* **Network.** A network namespace per workflow, shared by its tasks (``{{host:...}}`` is their
  loopback), with pasta (Debian ``passt``) giving it the outside through user-mode NAT and the
  service's own port on the host's loopback, and nothing else of the host's loopback: not another
  workflow's ports, not PostgreSQL or Redis. The namespace lives while a task of the workflow runs.

It stays a little over 500 lines: the four confinements are one serialised instruction
(:class:`SandboxSpec`) that the supervisor and the backend both read, and each part is short.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scheduler.dispatch.proc_net import bound_udp_ports_parse, listening_ports_parse

#: Sandbox uids and gids start here: far above any account of the host (Debian's dynamic and
#: container ranges end below 2^31).
UID_BASE = 2_000_000_000
#: What a task gets when its request names no memory, and the default size of its /tmp.
DEFAULT_MEMORY_BYTES = 4 << 30
DEFAULT_TMP_BYTES = 1 << 30
DEFAULT_MAX_PROCESSES = 1024
CGROUP_ROOT = "/sys/fs/cgroup"
CGROUP_GROUP = "osmo-local"  # the folder holding every pod's cgroup, in each hierarchy


def pod_cgroup_name(folder: Path) -> str:
    """One cgroup per pod folder (pod names repeat across namespaces and pod roots)."""
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    return f"{folder.name[:40]}-{digest}"


def sandbox_uid(workflow_pk: int) -> int:
    return UID_BASE + max(workflow_pk, 0)


def sandbox_gid(owner_pk: int) -> int:
    return UID_BASE + max(owner_pk, 0)


# -- limits -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Limits:
    """A task's limits: bytes of memory, thousandths of a CPU (0: none), processes, bytes of /tmp."""

    memory_bytes: int = DEFAULT_MEMORY_BYTES
    cpu_millis: int = 0
    processes: int = DEFAULT_MAX_PROCESSES
    tmp_bytes: int = DEFAULT_TMP_BYTES


def human_bytes(value: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if value >= 1 << shift and value % (1 << shift) == 0:
            return f"{value >> shift} {unit}"
    return f"{value} bytes"


@dataclass(frozen=True, slots=True)
class LimitHit:
    """The limit a task went over, as its pod reports it (``limit.json`` in the pod's folder)."""

    limit: str  # memory, processes, tmp
    message: str

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> LimitHit:
        data = json.loads(text)
        return cls(limit=str(data["limit"]), message=str(data["message"]))


def limit_message(limit: str, limits: Limits) -> LimitHit:
    if limit == "memory":
        return LimitHit("memory", f"OOMKilled: the task went over its memory limit of "
                                  f"{human_bytes(limits.memory_bytes)} and was killed")
    if limit == "processes":
        return LimitHit("processes", f"the task went over its limit of {limits.processes} processes "
                                     "(OSMO_LOCAL_MAX_PROCESSES) and was ended")
    return LimitHit("tmp", f"the task filled its /tmp, limited to {human_bytes(limits.tmp_bytes)} (its storage "
                           "request), and was ended")


class Cgroups:
    """One pod's cgroups: ``kind`` is ``v2``, ``v1`` or ``""`` (none usable: rlimits instead)."""

    def __init__(self, kind: str, paths: dict[str, Path]) -> None:
        self.kind = kind
        self.paths = paths  # controller ("memory", "pids", "cpu"; "all" on v2) -> folder

    @staticmethod
    def detect(root: str = CGROUP_ROOT) -> str:
        """``v2`` when the unified hierarchy at ``root`` offers memory and pids, ``v1`` when the v1
        memory and pids hierarchies are writable there, else ``""``."""
        controllers = Path(root, "cgroup.controllers")
        try:
            offered = controllers.read_text().split()
        except OSError:
            offered = []
        if {"memory", "pids"} <= set(offered) and os.access(root, os.W_OK):
            return "v2"
        if all(os.access(Path(root, name), os.W_OK) for name in ("memory", "pids")):
            return "v1"
        return ""

    @classmethod
    def for_pod(cls, name: str, *, kind: str, root: str = CGROUP_ROOT) -> Cgroups:
        if kind == "v2":
            return cls(kind, {"all": Path(root, CGROUP_GROUP, name)})
        if kind == "v1":
            paths = {c: Path(root, c, CGROUP_GROUP, name) for c in ("memory", "pids", "cpu")
                     if os.access(Path(root, c), os.W_OK)}
            return cls(kind, paths)
        return cls("", {})

    def create(self, limits: Limits) -> None:
        """Make the folders and write the limits (an existing folder, from an earlier try, is reused)."""
        if self.kind == "v2":
            folder = self.paths["all"]
            parent = folder.parent
            parent.mkdir(exist_ok=True)
            for holder in (parent.parent, parent):  # let the pods' folders use the controllers
                wanted = [c for c in ("memory", "pids", "cpu")
                          if c in (holder / "cgroup.controllers").read_text().split()]
                _write(holder / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted), missing_ok=True)
            folder.mkdir(exist_ok=True)
            _write(folder / "memory.max", str(limits.memory_bytes))
            _write(folder / "memory.swap.max", "0", missing_ok=True)
            _write(folder / "pids.max", str(limits.processes))
            if limits.cpu_millis > 0:
                _write(folder / "cpu.max", f"{limits.cpu_millis * 100} 100000", missing_ok=True)
            return
        for controller, folder in self.paths.items():
            folder.mkdir(parents=True, exist_ok=True)
            if controller == "memory":
                _write(folder / "memory.limit_in_bytes", str(limits.memory_bytes))
                _write(folder / "memory.memsw.limit_in_bytes", str(limits.memory_bytes), missing_ok=True)
            elif controller == "pids":
                _write(folder / "pids.max", str(limits.processes))
            elif controller == "cpu" and limits.cpu_millis > 0:
                _write(folder / "cpu.cfs_period_us", "100000")
                _write(folder / "cpu.cfs_quota_us", str(limits.cpu_millis * 100))

    def enter(self, pid: int) -> None:
        for folder in self.paths.values():
            _write(folder / "cgroup.procs", str(pid))

    def _counter(self, controller: str, filename: str, key: str) -> int:
        folder = self.paths.get("all" if self.kind == "v2" else controller)
        if folder is None:
            return 0
        try:
            for line in (folder / filename).read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def oom_kills(self) -> int:
        return self._counter("memory", "memory.events" if self.kind == "v2" else "memory.oom_control", "oom_kill")

    def process_limit_hits(self) -> int:
        return self._counter("pids", "pids.events", "max")

    def pids(self) -> list[int]:
        found: set[int] = set()
        for folder in self.paths.values():
            try:
                found.update(int(line) for line in (folder / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                continue
        return sorted(found)

    def remove(self, *, keep: int | None = None, timeout: float = 5.0) -> None:
        """Kill what still runs in them (but ``keep``) and remove the folders."""
        deadline = time.monotonic() + timeout
        while True:
            left = [pid for pid in self.pids() if pid != keep]
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        for folder in self.paths.values():
            for _ in range(50):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY while the last processes are being reaped
                    time.sleep(0.02)


def _write(path: Path, value: str, *, missing_ok: bool = False) -> None:
    try:
        with open(path, "w") as handle:
            handle.write(value)
    except FileNotFoundError:
        if not missing_ok:
            raise
    except OSError as exc:
        if not (missing_ok and exc.errno in (errno.EINVAL, errno.ENOTSUP, errno.EPERM, errno.EACCES)):
            raise


# -- system calls -------------------------------------------------------------------------------

#: Refused with EPERM (see the module docstring).
DENIED_SYSCALLS = (
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    "mount_setattr", "unshare", "setns", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
    "swapoff", "acct", "syslog", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "bpf",
    "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "open_by_handle_at",
    "name_to_handle_at", "lookup_dcookie", "quotactl", "iopl", "ioperm", "vhangup", "uselib", "nfsservctl",
)
#: ``clone`` flags that make namespaces: each refused (CLONE_NEWTIME, NS, CGROUP, UTS, IPC, USER, PID, NET).
NAMESPACE_FLAGS = (0x80, 0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)


def seccomp_filter_write(path: Path) -> None:
    """Compile the filter to ``path`` (a BPF program for bwrap's ``--seccomp``), atomically."""
    import pyseccomp as seccomp  # type: ignore[import-untyped]  # libseccomp through ctypes, for the backend only

    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            rules.add_rule(seccomp.ERRNO(errno.EPERM), name)
        except (RuntimeError, ValueError, OSError):  # a call this architecture does not have
            continue
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for flag in NAMESPACE_FLAGS:
        rules.add_rule(seccomp.ERRNO(errno.EPERM), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    temporary = path.with_name(f".{path.name}.{os.getpid()}")
    with open(temporary, "wb") as handle:
        rules.export_bpf(handle)
    os.replace(temporary, path)


# -- network ------------------------------------------------------------------------------------

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def netns_key(workflow_id: str) -> str:
    return hashlib.sha256(workflow_id.encode()).hexdigest()[:24]


@dataclass(frozen=True, slots=True)
class WorkflowNetwork:
    """A workflow's network namespace: ``<root>/.netns/<key>/`` holds ``ns`` (the namespace, bound
    there), ``pasta.pid`` and ``members/<pod>`` (``pid starttime`` of each supervisor using it)."""

    folder: Path
    service_ports: tuple[int, ...] = ()
    pasta: str = "pasta"

    @property
    def ns(self) -> Path:
        return self.folder / "ns"

    def _lock(self) -> int:
        self.folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        handle = os.open(f"{self.folder}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(handle, fcntl.LOCK_EX)
        return handle

    def acquire(self, member: str) -> None:
        """Join (making it, with its pasta, when it is the workflow's first task) and register ``member``."""
        lock = self._lock()
        try:
            self._prune()
            if not os.path.ismount(self.ns):
                self._create()
            (self.folder / "members").mkdir(exist_ok=True)
            (self.folder / "members" / member).write_text(_process_identity(os.getpid()))
        finally:
            os.close(lock)

    def enter(self) -> None:
        """Move the calling (single-threaded) process into the namespace."""
        handle = os.open(self.ns, os.O_RDONLY)
        try:
            if _libc.setns(handle, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into the workflow's network failed")
        finally:
            os.close(handle)

    def release(self, member: str | None = None) -> None:
        """Unregister ``member``; remove the namespace when no live member is left."""
        if not self.folder.exists():
            return
        lock = self._lock()
        try:
            if member is not None:
                (self.folder / "members" / member).unlink(missing_ok=True)
            if not self._prune():
                self._destroy()
        finally:
            os.close(lock)

    def _prune(self) -> list[str]:
        """The live members (entries of supervisors that ended without leaving are removed)."""
        live = []
        members = self.folder / "members"
        for entry in sorted(members.iterdir()) if members.is_dir() else ():
            try:
                pid_text = entry.read_text()
                pid = int(pid_text.split()[0])
            except (OSError, ValueError, IndexError):
                entry.unlink(missing_ok=True)
                continue
            if _process_identity(pid) == pid_text:
                live.append(entry.name)
            else:
                entry.unlink(missing_ok=True)
        return live

    def _create(self) -> None:
        self.folder.mkdir(mode=0o700, exist_ok=True)
        self.ns.touch()
        subprocess.run(["unshare", f"--net={self.ns}", "true"], check=True, timeout=30,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        forwards: list[str] = []
        for port in self.service_ports:
            forwards += ["-T", str(port)]
        # pasta as root keeps the rights to enter the namespace (as "nobody" it cannot: the namespace is
        # root's) and confines itself (its own namespaces, no capabilities left, a seccomp filter).
        subprocess.run([self.pasta, "--quiet", "--runas", "0", "--netns", str(self.ns), "--config-net",
                        "--no-map-gw", "-t", "none", "-u", "none", "-U", "none", *(forwards or ["-T", "none"]),
                        "-P", str(self.folder / "pasta.pid")],
                       check=True, timeout=30, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)

    def _destroy(self) -> None:
        try:
            pid = int((self.folder / "pasta.pid").read_text().split()[0])
            os.kill(pid, signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            pass
        if os.path.ismount(self.ns):
            subprocess.run(["umount", "--lazy", str(self.ns)], check=False, timeout=30,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.folder, ignore_errors=True)
        Path(f"{self.folder}.lock").unlink(missing_ok=True)


def _process_identity(pid: int) -> str:
    """``pid starttime``: a pid alone may be reused by another process once its owner ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return ""
    if fields[0] == "Z":
        return ""
    return f"{pid} {fields[19]}"


# -- the supervisor's instructions ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SandboxSpec:
    """What the supervisor runs and how (``sandbox.json`` in the pod's folder, written by the backend)."""

    argv: tuple[str, ...]  # bwrap's command line, without --seccomp and --info-fd (the supervisor adds them)
    env_names: tuple[str, ...]  # the worker's variables the sandbox keeps (their values never written down)
    limits: Limits = field(default_factory=Limits)
    seccomp: str = ""  # the compiled filter's path ("" none)
    cgroups: str = ""  # v2, v1 or "" (rlimits)
    network: str = ""  # the workflow's WorkflowNetwork folder ("" the host's network)
    service_ports: tuple[int, ...] = ()
    pasta: str = "pasta"
    uid: int = UID_BASE
    gid: int = UID_BASE

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> SandboxSpec:
        data = json.loads(text)
        return cls(argv=tuple(data["argv"]), env_names=tuple(data["env_names"]), limits=Limits(**data["limits"]),
                   seccomp=data["seccomp"], cgroups=data["cgroups"], network=data["network"],
                   service_ports=tuple(data["service_ports"]), pasta=data["pasta"],
                   uid=int(data.get("uid", UID_BASE)), gid=int(data.get("gid", UID_BASE)))


def setpriv_argv(uid: int, gid: int) -> list[str]:
    """Inside the sandbox: become the task's user with nothing of root's left."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs", "--"]


def owned_folder_ready(path: str, *, uid: int, gid: int, claimable: bool) -> str | None:
    """Make the upload folder ``path`` writable by the task (uid, gid): a folder the dispatch made, or
    one of the service's user (``claimable``), is given to it (owner uid, group gid, set-gid, group
    writable). Returns why it cannot be used (another user's tasks own it), or None."""
    made = not os.path.exists(path)
    os.makedirs(path, exist_ok=True)
    info = os.stat(path)
    writable = (info.st_mode & 0o002) or (info.st_uid == uid and info.st_mode & 0o200) or (
        info.st_gid == gid and info.st_mode & 0o020)
    if writable:
        return None
    if made or (claimable and info.st_uid == os.getuid()):
        os.chown(path, uid, gid)
        os.chmod(path, 0o2775)
        return None
    return f"it belongs to another user (uid {info.st_uid}, gid {info.st_gid}) and the task's may not write there"



def _proc_net(pid: int, protocol: str) -> str:
    """The /proc/net tables of ``protocol`` (``tcp``, ``udp``; IPv4 then IPv6) in the network namespace of
    ``pid``, joined (a table that cannot be read is left out)."""
    texts = []
    for table in (protocol, f"{protocol}6"):
        try:
            texts.append(Path(f"/proc/{pid}/net/{table}").read_text())
        except OSError:
            continue
    return "".join(texts)


def listening_ports(pid: int, uid: int) -> dict[int, str]:
    """The TCP ports that processes of ``uid`` listen on in the network namespace of ``pid``, with the
    address to connect to each (the loopback for a wildcard)."""
    return listening_ports_parse(_proc_net(pid, "tcp"), uid)


def bound_udp_ports(pid: int, uid: int) -> dict[int, str]:
    """The UDP ports that processes of ``uid`` are bound to in the network namespace of ``pid``, with the
    address to send to each."""
    return bound_udp_ports_parse(_proc_net(pid, "udp"), uid)


def netns_udp_socket(pid: int, host: str, port: int) -> socket.socket:
    """A UDP socket made inside the network namespace of ``pid`` and connected to ``host:port`` there (its
    datagrams go to that port only, and only that port's come back)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "could not enter the task's network")
        try:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_DGRAM)
            sock.connect((host, port))
            return sock
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:  # a thread left in the task's network would be a leak
                raise OSError(ctypes.get_errno(), "could not leave the task's network")
    finally:
        os.close(target)
        os.close(own)


def netns_connect(pid: int, host: str, port: int, *, timeout: float) -> socket.socket:
    """A TCP connection to ``host:port`` made from inside the network namespace of ``pid``: the calling
    thread enters it, connects, and goes back (the socket stays in the namespace it was made in)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "could not enter the task's network")
        try:
            return socket.create_connection((host, port), timeout=timeout)
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:  # a thread left in the task's network would be a leak
                raise OSError(ctypes.get_errno(), "could not leave the task's network")
    finally:
        os.close(target)
        os.close(own)
