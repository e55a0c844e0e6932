"""The embedded default's secret key (``osmo.settings.local``, docs/operations.md "Secrets"): random,
made on the first start and kept in the data folder, so no two installations share one and none is
printed in the repository.

The key lives in ``<data folder>/secrets/secret_key`` (folder 0700, file 0600). Web, worker and beat
start at once under ``make run`` and each may be the first: a process writes a new key to a private
temporary file and hard-links it to the final name, which fails if another process got there first;
then every process reads the one file that won. No process ever reads a partly written key.
Stdlib only: the settings import it before Django is set up.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

FOLDER = "secrets"
FILE = "secret_key"
MIN_LENGTH = 50


class SecretFileError(RuntimeError):
    """The key file exists but holds no usable key."""


def secret_key_path(data_dir: Path) -> Path:
    return data_dir / FOLDER / FILE


def secret_key_load_or_create(data_dir: Path) -> str:
    """The key kept under ``data_dir``, made on the first call (any process's, however many race)."""
    folder = data_dir / FOLDER
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _restrict(folder, 0o700)
    path = folder / FILE
    if not path.exists():
        _create(folder, path)
    _restrict(path, 0o600)
    key = path.read_text().strip()
    if len(key) < MIN_LENGTH:
        raise SecretFileError(f"{path} holds no secret key (fewer than {MIN_LENGTH} characters): delete it to make "
                              "a new one (sessions and task tokens signed with the old one stop working), or set "
                              "DJANGO_SECRET_KEY")
    return key


def _create(folder: Path, path: Path) -> None:
    temporary = folder / f".{FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(secrets.token_urlsafe(64) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        # link() refuses an existing name: the first process's key stays, the others read it
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def _restrict(path: Path, mode: int) -> None:
    """Tighten a folder or file that someone opened up (a copy, an umask); never loosen it."""
    if stat.S_IMODE(path.stat().st_mode) & ~mode:
        path.chmod(mode)


__all__ = ["SecretFileError", "secret_key_load_or_create", "secret_key_path"]
