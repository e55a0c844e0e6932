"""The supervisor of one ``local`` pod: ``python -m scheduler.dispatch.local_supervisor <pod folder>``,
started with ``setsid -f`` by the backend (:mod:`scheduler.dispatch.local`), so it outlives the worker
and is nobody's child. It claims the pod (``started``: only one supervisor of a pod runs it), writes
its pid, puts the sandbox in the pod's cgroups (:mod:`scheduler.dispatch.local_limits`) and its
workflow's network (:mod:`scheduler.dispatch.local_network`) as its instruction
(:mod:`scheduler.dispatch.local_sandbox`) says, runs bubblewrap with the seccomp filter, watches the
limits the kernel does not end a task for (processes, ``/tmp``), and when the sandbox ended removes
the cgroups, leaves the network and writes ``limit.json`` (a limit it went over) and ``exit`` (the
sandbox's exit status), in that order. SIGTERM and SIGINT (a delete signals the process group) are
left to the sandbox: the supervisor waits for it and cleans up. Imports nothing from Django.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

from scheduler.dispatch.local_limits import Cgroups, LimitHit, limit_message, pod_cgroup_name
from scheduler.dispatch.local_network import WorkflowNetwork
from scheduler.dispatch.local_sandbox import SandboxSpec

POLL_SECONDS = 0.25


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(f"{path.name}.tmp")
    temporary.write_text(text)
    temporary.replace(path)


def _tmp_full(child_pid: int | None) -> bool:
    """Whether the sandbox's /tmp (seen through its init's root) has no room left."""
    if child_pid is None:
        return False
    try:
        stats = os.statvfs(f"/proc/{child_pid}/root/tmp")
    except OSError:
        return False
    return stats.f_bavail == 0


def run(folder: Path) -> int:
    os.chdir(folder)
    try:
        os.mkdir("started")
    except FileExistsError:
        return 0  # another supervisor of this pod runs it
    _write_atomic(folder / "pid", f"{os.getpid()}\n")
    spec = SandboxSpec.from_json((folder / "sandbox.json").read_text())
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: None)  # the sandbox gets it too (process group); wait for it

    cgroups = Cgroups.for_pod(pod_cgroup_name(folder), kind=spec.cgroups)
    network = WorkflowNetwork(Path(spec.network), spec.service_ports, spec.pasta) if spec.network else None
    hit: LimitHit | None = None
    status = 1
    try:
        cgroups.create(spec.limits)
        if network is not None:
            network.acquire(folder.name)
            network.enter()
        env = {name: os.environ[name] for name in spec.env_names if name in os.environ}
        info_read, info_write = os.pipe()
        argv = list(spec.argv)
        fds = [info_write]
        seccomp_fd = None
        if spec.seccomp:
            seccomp_fd = os.open(spec.seccomp, os.O_RDONLY)
            fds.append(seccomp_fd)
            argv[1:1] = ["--seccomp", str(seccomp_fd)]
        argv[1:1] = ["--info-fd", str(info_write)]

        def in_child() -> None:
            os.umask(0o002)  # the submitter's group may replace what its workflows upload
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if cgroups.kind:
                cgroups.enter(os.getpid())
            else:  # no cgroup to use: the same limits as rlimits (the process count is the workflow's uid's)
                resource.setrlimit(resource.RLIMIT_DATA, (spec.limits.memory_bytes, spec.limits.memory_bytes))
                resource.setrlimit(resource.RLIMIT_NPROC, (spec.limits.processes, spec.limits.processes))

        with open(folder / "log", "ab") as log:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env,
                                       pass_fds=fds, preexec_fn=in_child, cwd=folder)
        os.close(info_write)
        if seccomp_fd is not None:
            os.close(seccomp_fd)
        child_pid = _child_pid(info_read)
        if child_pid is not None:  # the sandbox's init: exec sessions join its namespaces (local.py)
            _write_atomic(folder / "sandbox.pid", f"{child_pid}\n")
        while True:
            try:
                status = process.wait(timeout=POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                pass
            if hit is None and cgroups.process_limit_hits() > 0:
                hit = limit_message("processes", spec.limits)
            elif hit is None and _tmp_full(child_pid):
                hit = limit_message("tmp", spec.limits)
            if hit is not None:
                _kill_sandbox(process, cgroups, child_pid)
        if status < 0:
            status = 128 - status
        if hit is None and cgroups.oom_kills() > 0:
            hit = limit_message("memory", spec.limits)
        elif hit is None and status != 0 and cgroups.process_limit_hits() > 0:  # it failed for want of a fork
            hit = limit_message("processes", spec.limits)
    except (OSError, subprocess.SubprocessError, ValueError, KeyError) as exc:
        with open(folder / "log", "a") as text_log:
            text_log.write(f"[osmo] the task's sandbox could not run: {exc.__class__.__name__}: {exc}\n")
        status = 1
    finally:
        cgroups.remove(keep=os.getpid())
        if network is not None:
            try:
                network.release(folder.name)
            except OSError:
                pass
    if hit is not None:
        _write_atomic(folder / "limit.json", hit.to_json())
    _write_atomic(folder / "exit", f"{status}\n")
    return 0


def _child_pid(info_read: int) -> int | None:
    """The sandbox's init (host pid) from bwrap's ``--info-fd`` JSON, or None."""
    chunks = []
    with os.fdopen(info_read, "rb") as handle:
        while True:
            chunk = handle.read(4096)
            if not chunk:
                break
            chunks.append(chunk)
            try:
                return int(json.loads(b"".join(chunks))["child-pid"])
            except (ValueError, KeyError, TypeError):
                continue
    return None


def _kill_sandbox(process: subprocess.Popen[bytes], cgroups: Cgroups, child_pid: int | None) -> None:
    """SIGKILL to the sandbox's init ends its whole PID namespace; the cgroups' processes too."""
    for pid in (child_pid, process.pid):
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid in cgroups.pids():
        if pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python -m scheduler.dispatch.local_supervisor POD_FOLDER\n")
        return 2
    return run(Path(argv[1]))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
