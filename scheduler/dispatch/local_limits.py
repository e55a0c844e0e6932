"""A task's resources on the ``local`` backend (docs/runtime.md, "What a task can and cannot do"): its
:class:`Limits` from the task's request, the pod's cgroups that hold them (v2 where the unified hierarchy
has the controllers, else v1's memory, pids and cpu hierarchies; neither: rlimits, set by the supervisor),
and :class:`LimitHit`, which limit a task went over, for the pod's status. Imports nothing from Django.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path

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

