"""A workflow's network on the ``local`` backend (docs/runtime.md, "What a task can and cannot do"): a
network namespace per workflow, shared by its tasks (``{{host:...}}`` is their loopback), with pasta
(Debian ``passt``) giving it the outside through user-mode NAT and the service's own port on the host's
loopback, and nothing else of the host's loopback: not another workflow's ports, not PostgreSQL or Redis.
The namespace lives while a task of the workflow runs. Also what the backend reads and opens in a task's
namespace: the ports its processes listen on, and connections to them (port-forward). Imports nothing
from Django.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from scheduler.dispatch.proc_net import bound_udp_ports_parse, listening_ports_parse

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


@contextlib.contextmanager
def _in_network(pid: int) -> Iterator[None]:
    """The calling thread inside the network namespace of ``pid`` for the block, then back in its own
    (sockets made in the block stay in the namespace they were made in)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "could not enter the task's network")
        try:
            yield
        finally:
            if _libc.setns(own, CLONE_NEWNET) != 0:  # a thread left in the task's network would be a leak
                raise OSError(ctypes.get_errno(), "could not leave the task's network")
    finally:
        os.close(target)
        os.close(own)


def netns_udp_socket(pid: int, host: str, port: int) -> socket.socket:
    """A UDP socket made inside the network namespace of ``pid`` and connected to ``host:port`` there (its
    datagrams go to that port only, and only that port's come back)."""
    with _in_network(pid):
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_DGRAM)
        sock.connect((host, port))
        return sock


def netns_connect(pid: int, host: str, port: int, *, timeout: float) -> socket.socket:
    """A TCP connection to ``host:port`` made from inside the network namespace of ``pid``: the calling
    thread enters it, connects, and goes back (the socket stays in the namespace it was made in)."""
    with _in_network(pid):
        return socket.create_connection((host, port), timeout=timeout)
