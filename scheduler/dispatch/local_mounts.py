"""What a ``local`` backend's sandbox sees (:mod:`scheduler.dispatch.local`): the bubblewrap mount
arguments (the host's folders read-only on a tmpfs root, each mount made reachable for the task's
user, the service's folders covered), the worker's variables a sandbox keeps, the service's packages
bound into it, the folders a plan's ``file://`` URLs name, the account files bound over the host's and
the task's ``osmo`` command.

The service's own folders are not the tasks': the pod root (every pod's plan and credential files, in
clear for their own sandbox) and the ``hidden`` folders (the data folder: the SQLite database with
every API token, the broker's messages) are covered by an empty tmpfs in the sandbox, so a task of one
user cannot read another's credentials or the service's secrets there. A ``file://`` upload URL whose
folder holds one of them, lies inside the pod root or overlaps a ``sealed`` path (the database files,
the broker's and the metrics' folders) is refused (:class:`DispatchPermanentError`), never bound
writable; so is such a ``file://`` input, never bound read-only over the tmpfs. Upload folders must
lie in the ``writable`` folders (``OSMO_LOCAL_WRITABLE``), so a task cannot name ``/etc`` as an output.

Imports nothing from Django."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlsplit

from scheduler.dispatch.base import DispatchPermanentError
from scheduler.dispatch.local_sandbox import sandbox_gid, sandbox_uid
from scheduler.dispatch.pod.request import PodRequest

#: Where the sandbox sees the service's packages its runtime and its ``osmo`` command need (each bound
#: read-only from the service's installation: the rest of the checkout is not the task's to read).
SANDBOX_LIB = "/osmo/lib"
SANDBOX_PACKAGES = ("runtime", "cli", "parsing")


def package_folder(name: str) -> str:
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise DispatchPermanentError(f"the package {name!r} of the task runtime is not installed")
    return os.path.realpath(next(iter(spec.submodule_search_locations)))


def runtime_path() -> str:
    """The folder holding the service's packages (the supervisor's PYTHONPATH: it runs outside the sandbox)."""
    return str(Path(package_folder("scheduler")).parent)


def loopback_ports(url: str) -> tuple[int, ...]:
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


def file_url_folders(plan: dict[str, Any]) -> list[str]:
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


def within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it (both real, absolute paths)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


PRIVATE_TOP = frozenset({"tmp", "proc", "dev", "osmo", "run"})
#: What a sandbox keeps of the worker's environment (the rest holds the service's secrets: its secret
#: key, the credential store's keys, the database's and the broker's passwords): the programs' and
#: libraries' search paths, the GPUs' selection, the locale and time zone, proxies, and the storage
#: libraries' settings and credentials, which the runtime needs for a pool's artifact store
#: (docs/runtime.md).
SANDBOX_ENV_NAMES = frozenset({"PATH", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TZ", "TERM", "HTTP_PROXY",
                               "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
                               "GOOGLE_APPLICATION_CREDENTIALS"})
SANDBOX_ENV_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "AWS_", "AZURE_STORAGE_", "FSSPEC_")


def sandbox_env_names(environ: Mapping[str, str]) -> list[str]:
    """The names of the worker's variables a sandbox keeps (:data:`SANDBOX_ENV_NAMES`, the prefixes)."""
    return sorted(name for name in environ
                  if (name in SANDBOX_ENV_NAMES or name.startswith(SANDBOX_ENV_PREFIXES))
                  and name.replace("_", "").isalnum() and name.isascii())


def host_root() -> list[str]:
    """bwrap arguments showing the host's top-level folders read-only on the sandbox's own root (a
    tmpfs, where ``/osmo`` and ``/tmp`` can be made: the host's ``/`` itself is read-only)."""
    args: list[str] = []
    for entry in sorted(os.scandir("/"), key=lambda e: e.name):
        if entry.name in PRIVATE_TOP:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry.path), entry.path]
        elif entry.is_dir():
            args += ["--ro-bind", entry.path, entry.path]
    return args


def traversable(path: str, uid: int, gid: int) -> bool:
    """Whether the task's user may pass through the host's folder ``path`` (a missing one: yes)."""
    try:
        info = os.stat(path)
    except OSError:
        return True
    mode = info.st_mode
    return bool(mode & 0o001 or (info.st_gid == gid and mode & 0o010) or (info.st_uid == uid and mode & 0o100))


_WIDTH = {"--bind": 3, "--ro-bind": 3, "--tmpfs": 2, "--perms": 2, "--size": 2, "--symlink": 3, "--dir": 2}


def reachable(args: list[str], *, uid: int, gid: int) -> list[str]:
    """``args`` (bwrap mounts, in order) with what the task's user needs to reach each mount made first.
    bwrap makes the folders a mount needs owner-only, so each is made world-traversable beforehand
    (on the sandbox's root or one of its tmpfs: ``/tmp``, a hidden folder's cover); and a host folder
    on the way that the task's user may not pass (a ``mkdtemp`` folder, ``0700``) is covered with an
    empty tmpfs: its other contents were out of the task's reach anyway."""
    host_tops = {entry.name for entry in os.scandir("/")} - PRIVATE_TOP
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
                on_fresh = any(within(text, root) and text != root for root in fresh)
                if not on_fresh and Path(text).parts[1] not in host_tops:  # on the sandbox's own root
                    on_fresh = True
                if on_fresh:
                    out += ["--perms", "0755", "--dir", text]
                    made.add(text)
                elif not traversable(text, uid, gid):
                    out += ["--perms", "0755", "--tmpfs", text]
                    fresh.append(text)
                    made.add(text)
            if option == "--tmpfs":
                fresh.append(destination)
        out += args[index:index + width]
        index += width
    return out


def service_covers(needed: Sequence[str], hidden: Sequence[str]) -> list[str]:
    """bwrap arguments after the host's root: what runs (``needed``), bound back where the sandbox's own
    folders (``/tmp``) cover the host's; every ``hidden`` folder covered with an empty tmpfs wherever the
    sandbox would see it, then what runs bound back inside one (an interpreter under the worker's home);
    the host's ``/run`` (sockets of its servers) and the cgroup tree (every pod's name) covered."""
    args: list[str] = []
    bound_back = [path for path in needed if Path(path).parts[1:2] and Path(path).parts[1] in PRIVATE_TOP]
    for path in bound_back:
        args += ["--ro-bind", path, path]
    for folder in hidden:
        parts = Path(folder).parts
        shown = len(parts) > 1 and (parts[1] not in PRIVATE_TOP or any(within(folder, p) for p in bound_back))
        if not shown or not os.path.isdir(folder):
            continue
        args += ["--tmpfs", folder]
        for path in needed:
            if within(path, folder) and path != folder:
                args += ["--ro-bind", path, path]
    args += ["--tmpfs", "/run"]
    resolv = os.path.realpath("/etc/resolv.conf")
    if resolv.startswith("/run/") and os.path.isfile(resolv):  # a resolver's file under /run stays readable
        args += ["--ro-bind", resolv, resolv]
    if os.path.isdir("/sys/fs/cgroup"):
        args += ["--tmpfs", "/sys/fs/cgroup"]
    return args


def account_files(staging: Path, pod: PodRequest) -> None:
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


def account_binds(folder: Path) -> list[str]:
    return [arg for name in ("passwd", "group") if Path("/etc", name).is_file()
            for arg in ("--ro-bind", str(folder / "etc" / name), f"/etc/{name}")]


def credential_files(staging: Path, pod: PodRequest) -> dict[str, str]:
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


def cli_launcher(python: str) -> str:
    """The task's ``osmo`` command: the service's CLI with the worker's interpreter (docs/runtime.md,
    "The osmo command in a task"); ``OSMO_URL`` and ``OSMO_TOKEN`` come from the plan."""
    return "\n".join([
        "#!/bin/sh",
        "# The service's CLI in a local task (docs/runtime.md). PYTHONPATH is this process's only.",
        f"PYTHONPATH={SANDBOX_LIB}",
        "export PYTHONPATH",
        f'exec {shlex.quote(python)} -m cli "$@"',
        "",
    ])


def service_clash(path: str, *, root: str, hidden: Sequence[str], sealed: Sequence[str], code_root: str
                  ) -> str | None:
    """The service's folder a ``file://`` bind of ``path`` would show to the task, if any: one that
    ``path`` holds, the pod root's inside (other pods), or a sealed path it overlaps."""
    real = os.path.realpath(path)
    root = os.path.realpath(root)
    clash = next((kept for kept in hidden if within(kept, real)), None)
    clash = clash or (root if within(real, root) else None)
    clash = clash or next((kept for kept in sealed if within(kept, real) or within(real, kept)), None)
    in_code = within(real, code_root) and not any(within(real, kept) for kept in hidden)
    return clash or (code_root if in_code or within(code_root, real) else None)

def file_binds(plan: dict[str, Any], *, root: str, hidden: Sequence[str], sealed: Sequence[str], code_root: str,
               writable: Sequence[str] | None) -> tuple[list[str], list[str]]:
    """The plan's ``file://`` upload folders (bound writable) and existing input paths (bound
    read-only), each checked against the service's folders."""
    uploads = file_url_folders(plan)
    urls = [urlparse(entry.get("url", "")) for entry in plan.get("inputs") or ()]
    inputs = sorted({url.path for url in urls if url.scheme == "file" and url.path and os.path.exists(url.path)})
    for kind, paths in (("upload folder", uploads), ("input", inputs)):
        for path in paths:
            clash = service_clash(path, root=root, hidden=hidden, sealed=sealed, code_root=code_root)
            if clash is not None:
                raise DispatchPermanentError(f"the {kind} {path[:200]!r} may not be used by "
                                             f"a task: it overlaps the service's folder {clash!r}")
    if writable is not None:
        for path in uploads:
            if not any(within(os.path.realpath(path), folder) for folder in writable):
                raise DispatchPermanentError(
                    f"the upload folder {path[:200]!r} may not be used by a task: it is "
                    f"outside the folders tasks may write ({', '.join(writable)}; OSMO_LOCAL_WRITABLE)")
    return uploads, inputs
