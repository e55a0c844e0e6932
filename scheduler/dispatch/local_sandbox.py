"""What confines a task of the ``local`` backend besides bubblewrap's namespaces (docs/runtime.md, "What a
task can and cannot do"), and the one instruction that carries it all (:class:`SandboxSpec`, which the
backend writes and the supervisor reads): its user and its system calls here, its resources in
:mod:`scheduler.dispatch.local_limits`, its network in :mod:`scheduler.dispatch.local_network`. Imports
nothing from Django; the supervisor (:mod:`scheduler.dispatch.local_supervisor`) applies it, the backend
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
* **Resources.** From the task's request: memory, processes and CPU by cgroups, else by rlimits
  (``RLIMIT_DATA``, ``RLIMIT_NPROC``); ``/tmp`` is a tmpfs of a fixed size. Going over a limit ends the
  task: the kernel kills it out of memory, and the supervisor kills it when its process count or its
  ``/tmp`` reached the limit (:mod:`scheduler.dispatch.local_limits`).
* **Network.** A network namespace per workflow, shared by its tasks, with pasta giving it the outside
  and the service's port, nothing else of the host's loopback (:mod:`scheduler.dispatch.local_network`).
"""

from __future__ import annotations

import errno
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from scheduler.dispatch.local_limits import Limits

# -- user -----------------------------------------------------------------------------------------

#: Sandbox uids and gids start here: far above any account of the host (Debian's dynamic and
#: container ranges end below 2^31).
UID_BASE = 2_000_000_000


def sandbox_uid(workflow_pk: int) -> int:
    return UID_BASE + max(workflow_pk, 0)


def sandbox_gid(owner_pk: int) -> int:
    return UID_BASE + max(owner_pk, 0)


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

