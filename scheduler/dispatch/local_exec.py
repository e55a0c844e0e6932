"""Sessions into a running ``local`` task (:mod:`scheduler.dispatch.local`): :func:`exec_in_sandbox`
starts a process in the task's sandbox (its namespaces, user, limits and system call filter) through
``nsenter``, with a terminal made in the sandbox's own devpts for tty sessions, and :class:`LocalExec`
is that process as :class:`scheduler.dispatch.base.TaskExec`. Imports nothing from Django."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scheduler.dispatch.base import DispatchPermanentError
from scheduler.dispatch.local_files import proc_stat
from scheduler.dispatch.local_limits import Cgroups, pod_cgroup_name
from scheduler.dispatch.local_mounts import SANDBOX_LIB
from scheduler.dispatch.local_sandbox import SandboxSpec, setpriv_argv


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


def process_environ(pid: int) -> dict[str, str]:
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


def sandbox_terminal(pid: int) -> tuple[int, int]:
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


def task_command_pid(init: int) -> int | None:
    """The task's command (the runtime's first child, below the sandbox's init), or None."""
    children: dict[int, list[int]] = {}
    for stat_path in Path("/proc").glob("[0-9]*/stat"):
        fields = proc_stat(stat_path)
        if fields is not None and len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(stat_path.parent.name))
    runtime = min(children.get(init, []), default=None)
    return min(children.get(runtime, []), default=None) if runtime is not None else None


def exec_in_sandbox(*, python: str, folder: Path, spec: SandboxSpec, pid: int, pod_name: str,
                    argv: Sequence[str], tty: bool) -> LocalExec:
    """Start ``argv`` inside the running sandbox ``pid`` (the pod's ``folder``, run by ``spec``), as the
    task's user with its limits, system call filter, namespaces (files, processes, network), working
    folder and environment. With ``tty`` the process gets a terminal of the sandbox's own
    (``LocalExec.terminal`` is its other side) and leads a session there, else its stdin, stdout and
    stderr are pipes."""
    command = task_command_pid(pid) or pid
    try:
        env = process_environ(command)
    except OSError:
        raise DispatchPermanentError(f"pod {pod_name} is not running on the local backend") from None
    cgroups = Cgroups.for_pod(pod_cgroup_name(folder), kind=spec.cgroups)
    terminal, child = sandbox_terminal(command) if tty else (None, None)
    seccomp = os.open(spec.seccomp, os.O_RDONLY) if spec.seccomp else None
    confine = [python, "-c", f"import sys; sys.path.insert(0, {SANDBOX_LIB!r}); "
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
