"""Object storage through fsspec: downloads of inputs, uploads of outputs with a commit marker.

Any URL fsspec knows works (``file://`` built in, ``s3://`` through s3fs; gcs/azure with their
packages installed). Credentials come from the environment the way each library reads them
(``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_ENDPOINT_URL_S3`` for S3): the runtime never
takes them as arguments, and every error text it reports has their values masked.

**Commit.** An upload writes the files first, then ``.osmo-manifest.json`` (the list of files) last,
after deleting the previous manifest. A reader that honours the manifest (``committed_only``: every
upstream-task input) reads exactly the listed files and refuses a prefix without one, so a task
killed during its upload never leaves a half output visible to downstream tasks: the files already
written are not listed anywhere until the manifest is.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.asyn import AsyncFileSystem
from fsspec.callbacks import DEFAULT_CALLBACK, Callback
from fsspec.core import url_to_fs

MANIFEST = ".osmo-manifest.json"
#: Environment variables whose values are never shown (plus any name with these parts).
_SECRET_NAME_PARTS = ("SECRET", "TOKEN", "PASSWORD", "ACCESS_KEY", "ACCOUNT_KEY", "CREDENTIAL", "SESSION")


class StorageError(Exception):
    """A storage operation failed; ``str()`` is the storage library's text with credentials masked."""

    def __init__(self, text: str) -> None:
        super().__init__(mask(text))


def mask(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with the value of every credential-like environment variable replaced by ``****``
    (values of 8 characters and more: real keys are 20 and 40; shorter ones would mangle ordinary words)."""
    environ = os.environ if environ is None else environ
    secrets = sorted({value for name, value in environ.items()
                      if value and len(value) >= 8 and any(part in name.upper() for part in _SECRET_NAME_PARTS)},
                     key=len, reverse=True)
    for secret in secrets:
        text = text.replace(secret, "****")
    return text


def _fs(url: str) -> tuple[fsspec.AbstractFileSystem, str]:
    try:
        fs, path = url_to_fs(url)
    except (ValueError, ImportError) as exc:
        raise StorageError(mask(f"{url}: {exc}")) from exc
    fs.invalidate_cache()  # listings must be fresh: another task may just have committed
    return fs, str(path).rstrip("/")


def _describe(exc: BaseException) -> str:
    text = str(exc) or exc.__class__.__name__
    return mask(f"{exc.__class__.__name__}: {text}")


def _selected(names: Iterable[str], regex: str) -> list[str]:
    pattern = re.compile(regex) if regex else None
    return sorted(name for name in names if pattern is None or pattern.search(name))


@dataclass(frozen=True, slots=True)
class Transfer:
    files: int
    bytes: int
    # What was left out: a link leading out of the folder (or the prefix, on a local file system), or
    # something not a file (a pipe, a socket). Relative paths.
    skipped: tuple[str, ...] = ()
    present: int = 0  # a download with ``resume``: files already here with the remote size, not fetched again


def _escapes(path: str, root: str) -> bool:
    """Whether ``path`` (in the folder ``root``) is a link leading out of it, or no regular file."""
    real, real_root = os.path.realpath(path), os.path.realpath(root)
    return not (real.startswith(real_root.rstrip("/") + "/") and os.path.isfile(real))


def _batch(fs: fsspec.AbstractFileSystem, batch_size: int | None) -> dict[str, int]:
    """The keyword giving an asynchronous store (s3fs, adlfs) how many requests to keep in flight at once
    (``None``: the library's default); nothing for a store without one."""
    return {"batch_size": batch_size} if batch_size and isinstance(fs, AsyncFileSystem) else {}


def download(url: str, dest: str, *, regex: str = "", committed_only: bool = False,
             callback: Callback = DEFAULT_CALLBACK, resume: bool = False, batch_size: int | None = None) -> Transfer:
    """Copy the object (or every object under the prefix) at ``url`` into the folder ``dest``, keeping
    relative paths; ``regex`` keeps the relative paths it matches (``re.search``); ``callback`` (fsspec's)
    hears of each file. From a local folder,
    a link leading out of it is not followed (left out, named in ``skipped``). With
    ``committed_only`` only a committed upload is read: the files its manifest lists. With ``resume`` a
    file already in ``dest`` with the remote size is not fetched again (counted in ``present``). Raises
    :class:`StorageError` (missing, denied, not committed). ``batch_size``: see :func:`_batch`."""
    fs, root = _fs(url)
    os.makedirs(dest, exist_ok=True)
    try:
        if committed_only:
            try:
                with fs.open(f"{root}/{MANIFEST}", "rb") as handle:
                    listed = json.loads(handle.read().decode())["files"]
            except FileNotFoundError as exc:
                raise StorageError(f"{url}: no committed output there (no {MANIFEST}; the upstream task's upload "
                                   f"did not finish): {_describe(exc)}") from exc
            relative = [str(name) for name in listed]
        else:
            if not fs.exists(root):
                raise StorageError(f"{url}: no such file or prefix")
            if fs.isfile(root):
                relative = [root.rsplit("/", 1)[-1]]
                root = root.rsplit("/", 1)[0]
            else:
                relative = [path[len(root) + 1:] for path in fs.find(root)
                            if path.rsplit("/", 1)[-1] != MANIFEST]
                if not relative:
                    fs.ls(root, detail=False)  # a folder find() walked silently (unreadable) raises here
        chosen = _selected(relative, regex)
        skipped: tuple[str, ...] = ()
        if "file" in _protocols(fs):  # a link in a local folder may lead anywhere on this file system
            skipped = tuple(name for name in chosen if _escapes(f"{root}/{name}", root))
            chosen = [name for name in chosen if name not in skipped]
        present = 0
        if resume and chosen:
            sizes = _sizes(fs, root, chosen)
            kept = [name for name in chosen if not _same_size(os.path.join(dest, *name.split("/")), sizes.get(name))]
            present, chosen = len(chosen) - len(kept), kept
        if not chosen:
            return Transfer(0, 0, skipped, present)
        local = [os.path.join(dest, *name.split("/")) for name in chosen]
        for path in {os.path.dirname(p) for p in local}:
            os.makedirs(path, exist_ok=True)
        fs.get([f"{root}/{name}" for name in chosen], local, callback=callback, **_batch(fs, batch_size))
    except StorageError:
        raise
    except (OSError, ValueError, RuntimeError, KeyError) as exc:
        raise StorageError(f"{url}: {_describe(exc)}") from exc
    return Transfer(len(chosen), sum(os.path.getsize(p) for p in local), skipped, present)


def _sizes(fs: fsspec.AbstractFileSystem, root: str, names: list[str]) -> dict[str, int]:
    """The remote sizes of ``names`` below ``root``: one listing (one request per file only for a single one)."""
    if len(names) == 1:
        return {names[0]: int(fs.size(f"{root}/{names[0]}") or 0)}
    return {path[len(root) + 1:]: int(info.get("size") or 0) for path, info in fs.find(root, detail=True).items()}


def _same_size(path: str, size: int | None) -> bool:
    return size is not None and os.path.isfile(path) and os.path.getsize(path) == size


def upload(src: str, url: str, *, regex: str = "") -> Transfer:
    """Copy every file under the folder ``src`` (``regex`` as for :func:`download`) to ``url`` and
    commit it (see the module docstring). A link leading out of ``src`` is not followed: it is left
    out and named in the result's ``skipped``, as is anything not a regular file. An empty or missing
    ``src`` commits an empty manifest.
    Raises :class:`StorageError`."""
    chosen, skipped = local_files(src, regex=regex)
    fs, root = _fs(url)
    manifest = f"{root}/{MANIFEST}"
    try:
        if fs.exists(manifest):
            fs.rm(manifest)
    except (OSError, ValueError, RuntimeError) as exc:
        raise StorageError(f"{url}: {_describe(exc)}") from exc
    sent = put([(os.path.join(src, *name.split("/")), name) for name in chosen], url, fs=(fs, root))
    try:
        body = json.dumps({"files": chosen}).encode()
        with fs.open(manifest, "wb") as handle:
            handle.write(body)
    except (OSError, ValueError, RuntimeError) as exc:
        raise StorageError(f"{url}: {_describe(exc)}") from exc
    return Transfer(sent.files, sent.bytes, tuple(sorted(skipped)))


def local_files(src: str, *, regex: str = "") -> tuple[list[str], list[str]]:
    """The files under the folder ``src`` as relative paths (``regex`` as for :func:`download`), and what is
    left out: a link leading out of it, or something not a regular file. Missing: nothing."""
    relative: list[str] = []
    skipped: list[str] = []
    if os.path.isdir(src):
        for folder, _dirs, names in os.walk(src):
            for name in names:
                path = os.path.join(folder, name)
                (skipped if _escapes(path, src) else relative).append(os.path.relpath(path, src).replace(os.sep, "/"))
    return _selected(relative, regex), skipped


def put(pairs: list[tuple[str, str]], url: str, *, callback: Callback = DEFAULT_CALLBACK,
        fs: tuple[fsspec.AbstractFileSystem, str] | None = None, batch_size: int | None = None) -> Transfer:
    """Copy local files to ``url``: each pair is ``(local path, path relative to url)``, all in one batched
    fsspec ``put`` (on S3, s3fs sends them concurrently, ``batch_size`` at once: see :func:`_batch`). No
    manifest: :func:`upload` adds one. Raises :class:`StorageError`."""
    fs_, root = fs if fs is not None else _fs(url)
    try:
        if pairs:
            if "file" in _protocols(fs_):
                for folder in {f"{root}/{name}".rsplit("/", 1)[0] for _local, name in pairs}:
                    fs_.makedirs(folder, exist_ok=True)
            fs_.put([local for local, _name in pairs], [f"{root}/{name}" for _local, name in pairs],
                    callback=callback, **_batch(fs_, batch_size))
        elif "file" in _protocols(fs_):
            fs_.makedirs(root, exist_ok=True)
    except (OSError, ValueError, RuntimeError) as exc:
        raise StorageError(f"{url}: {_describe(exc)}") from exc
    return Transfer(len(pairs), sum(os.path.getsize(local) for local, _name in pairs))


@dataclass(frozen=True, slots=True)
class Entry:
    path: str  # relative to the URL listed ("" for the object the URL itself names)
    size: int
    folder: bool = False


def listing(url: str, *, regex: str = "", recursive: bool = True) -> list[Entry]:
    """What is at ``url``: the object it names, or what lies under the prefix (every object when
    ``recursive``, else the first level, folders as entries with ``folder``). Relative paths, sorted;
    ``regex`` as for :func:`download`. A prefix with nothing under it is an empty list.
    Raises :class:`StorageError`."""
    fs, root = _fs(url)
    try:
        if fs.isfile(root):
            return [Entry(root.rsplit("/", 1)[-1], int(fs.size(root) or 0))]
        if recursive:
            found = fs.find(root, detail=True)
            entries = [Entry(path[len(root) + 1:], int(info.get("size") or 0)) for path, info in found.items()
                       if path != root]
        elif fs.isdir(root):
            entries = [Entry(str(info["name"]).rstrip("/")[len(root) + 1:], int(info.get("size") or 0),
                             folder=info.get("type") == "directory") for info in fs.ls(root, detail=True)]
        else:
            entries = []
    except (OSError, ValueError, RuntimeError) as exc:
        raise StorageError(f"{url}: {_describe(exc)}") from exc
    pattern = re.compile(regex) if regex else None
    return sorted((entry for entry in entries if entry.path and (pattern is None or pattern.search(entry.path))),
                  key=lambda entry: entry.path)


def remove(url: str, *, regex: str = "", callback: Callback = DEFAULT_CALLBACK, batch: int = 1000) -> int:
    """Delete the object ``url`` names, or every object under the prefix (``regex`` keeps those it
    matches), ``batch`` at a time (one request each on S3); how many were deleted.
    Raises :class:`StorageError`."""
    fs, root = _fs(url)
    entries = listing(url, regex=regex)
    try:
        single = fs.isfile(root)
    except (OSError, ValueError, RuntimeError) as exc:
        raise StorageError(f"{url}: {_describe(exc)}") from exc
    paths = [root] if single and entries else [f"{root}/{entry.path}" for entry in entries]
    callback.set_size(len(paths))
    try:
        for start in range(0, len(paths), batch):
            chunk = paths[start:start + batch]
            fs.rm(chunk)
            callback.relative_update(len(chunk))
    except (OSError, ValueError, RuntimeError) as exc:
        raise StorageError(f"{url}: {_describe(exc)}") from exc
    return len(paths)


#: What ``osmo data check`` may be asked (OSMO's access types).
ACCESS_TYPES = ("READ", "WRITE", "DELETE")
#: The name of the object a write or delete check puts (and removes) below the URL: never a name of yours.
PROBE_PREFIX = ".osmo-access-check-"


def access_check(url: str, access: str = "READ") -> None:
    """Whether this process's credential may ``access`` (:data:`ACCESS_TYPES`) the data at ``url``, by doing
    it: ``READ`` reads what is there (a prefix with nothing under it passes when its bucket is reachable),
    ``WRITE`` writes an object below the URL, reads it back and deletes it, ``DELETE`` deletes an object
    below the URL that is not there (the store refuses it without the right; on a local folder, it writes
    one and deletes it). Nothing is left behind. Raises :class:`StorageError` saying what failed."""
    if access not in ACCESS_TYPES:
        raise StorageError(f"access type {access[:40]!r}: one of {', '.join(ACCESS_TYPES)}")
    fs, root = _fs(url)
    local = "file" in _protocols(fs)
    try:
        if access == "READ":
            _read_check(fs, root, local)
            return
        folder = _existing_folder(fs, root) if local else root
        probe = f"{folder}/{PROBE_PREFIX}{uuid.uuid4().hex}"
        if access == "DELETE" and not local:
            fs.rm_file(probe)
            return
        fs.pipe_file(probe, b"osmo access check")
        try:
            if fs.cat_file(probe) != b"osmo access check":
                raise OSError(f"{probe}: read back other bytes than were written")
        finally:
            fs.rm_file(probe)
    except (OSError, ValueError, RuntimeError) as exc:
        raise StorageError(f"{url}: {access.lower()} access: {_describe(exc)}") from exc


def _read_check(fs: fsspec.AbstractFileSystem, root: str, local: bool) -> None:
    if local:
        if fs.isdir(root):
            fs.ls(root, detail=False)
        else:
            fs.cat_file(root, start=0, end=1)  # FileNotFoundError when nothing is there
        return
    try:
        fs.info(root)  # the object, or the first key under the prefix
    except FileNotFoundError:
        bucket = root.split("/", 1)[0]
        if bucket == root or not fs.exists(bucket):
            raise FileNotFoundError(f"bucket {bucket!r} does not exist or is not reachable") from None


def _existing_folder(fs: fsspec.AbstractFileSystem, root: str) -> str:
    """The local folder ``root`` names, or the nearest one above it that exists (a check makes no folder)."""
    folder = root
    while folder and not fs.isdir(folder):
        folder = folder.rsplit("/", 1)[0]
    return folder or "/"


def _protocols(fs: Any) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def committed_files(url: str) -> list[str] | None:
    """The files of the committed upload at ``url``, or None when nothing is committed there."""
    fs, root = _fs(url)
    try:
        with fs.open(f"{root}/{MANIFEST}", "rb") as handle:
            return [str(name) for name in json.loads(handle.read().decode())["files"]]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError) as exc:
        raise StorageError(f"{url}: {_describe(exc)}") from exc
