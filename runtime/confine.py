"""``python -m runtime.confine FD [--tty] -- COMMAND...``: load the seccomp filter (a BPF program, as
libseccomp exports it) read from the file descriptor FD (``-``: none) into this process, then become
COMMAND. With ``--tty`` it first leads a new session whose controlling terminal is its stdin (inside
the sandbox's PID namespace, so the shell's job control works there). The local backend's exec
sessions run it inside a task's sandbox, after ``setpriv`` dropped every privilege (``no_new_privs`` is
set, so an unprivileged process may install a filter), so a session is confined as the task is
(docs/runtime.md, "What a task can and cannot do"). Pure: the standard library only.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import sys
import termios

PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def seccomp_load(program: bytes) -> None:
    """Install ``program`` (``struct sock_filter`` items, 8 bytes each) on this process."""
    if not program or len(program) % 8:
        raise ValueError("the seccomp program is empty or not whole sock_filter items")
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"loading the seccomp filter failed: {os.strerror(error)}")


def main(argv: list[str]) -> int:
    args = argv[1:]
    tty = "--tty" in args[:2]
    if "--" not in args or not args or not (args[0].isdigit() or args[0] == "-"):
        sys.stderr.write("usage: python -m runtime.confine FD|- [--tty] -- COMMAND [ARG...]\n")
        return 2
    command = args[args.index("--") + 1:]
    if not command:
        sys.stderr.write("runtime.confine: no command\n")
        return 2
    if tty:
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    if args[0] != "-":
        fd = int(args[0])
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        os.close(fd)
        seccomp_load(b"".join(chunks))
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"{command[0]}: {exc.strerror}\n")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
