"""Run a function in a separate process bounded by the operating system (docs/spec.md, "Templates").

Pure: stdlib only. The sandbox's own checks (:mod:`workflows.spec.template`) refuse what they can see
coming; this is the second line, for what they cannot: memory (``RLIMIT_AS``: an allocation past it
fails with ``MemoryError``), CPU (``RLIMIT_CPU``: the kernel stops the process with ``SIGXCPU``, and
``SIGKILL`` one second later) and wall-clock time (the caller kills the process). Whatever the
function does, the calling process's memory and CPU are not spent on it.

Processes come from a fork server (``multiprocessing``'s ``forkserver`` start method): one small
single-threaded process, started once per calling process with ``PRELOAD`` imported, forks a child
per call. Forking a threaded web worker itself could copy a lock held by another thread; the fork
server has no other threads, and its children start with the renderer already imported.
"""

from __future__ import annotations

import multiprocessing
import resource
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

# "__main__" first: imported once in the fork server, so its children need not run the main script again.
PRELOAD = ["__main__", "workflows.spec.template"]
_context_lock = threading.Lock()
_context: Any = None


@dataclass(frozen=True, slots=True)
class ProcessLimits:
    """Bounds of one isolated call: address space in bytes, CPU seconds, wall-clock seconds."""

    max_memory_bytes: int = 256 * 1024 * 1024
    max_cpu_seconds: int = 5
    max_wall_seconds: float = 10.0


class ProcessLimitError(Exception):
    """The call went past one of its :class:`ProcessLimits` (``limit``: memory, cpu, wall, crash)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.message = message


def _forkserver() -> Any:
    global _context
    with _context_lock:
        if _context is None:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
            _context = context
        return _context


def _child(conn: Connection, function: Callable[..., Any], args: tuple[Any, ...], limits: ProcessLimits) -> None:
    """In the child: set the limits, run, send ``("ok", result)`` or ``("memory", None)``."""
    resource.setrlimit(resource.RLIMIT_AS, (limits.max_memory_bytes, limits.max_memory_bytes))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(usage.ru_utime + usage.ru_stime) + limits.max_cpu_seconds
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    try:
        result = ("ok", function(*args))
    except MemoryError:
        result = ("memory", None)
    conn.send(result)
    conn.close()


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB"


def run_isolated(function: Callable[..., Any], args: tuple[Any, ...], limits: ProcessLimits) -> Any:
    """``function(*args)`` in a child process under ``limits``; its return value (it must pickle).
    Raises :class:`ProcessLimitError` naming the limit it went past. ``function`` must be importable
    by name (a module-level function) and should turn its own errors into return values."""
    context = _forkserver()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(sender, function, args, limits), daemon=True)
    process.start()
    sender.close()
    try:
        if not receiver.poll(limits.max_wall_seconds):
            process.kill()
            process.join()
            raise ProcessLimitError("wall", f"took longer than its time limit ({limits.max_wall_seconds:g} s)")
        try:
            kind, value = receiver.recv()
        except EOFError:
            kind, value = "died", None
    finally:
        receiver.close()
    process.join(limits.max_wall_seconds)
    if kind == "ok":
        return value
    if kind == "memory":
        raise ProcessLimitError("memory", f"needs more memory than its limit ({_mib(limits.max_memory_bytes)})")
    process.join()
    if process.exitcode in (-signal.SIGXCPU, -signal.SIGKILL):
        raise ProcessLimitError("cpu", f"used more CPU time than its limit ({limits.max_cpu_seconds} s)")
    raise ProcessLimitError("crash", f"stopped abnormally (exit status {process.exitcode}; its memory limit is "
                                     f"{_mib(limits.max_memory_bytes)})")
