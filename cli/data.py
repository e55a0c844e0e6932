"""``osmo data upload | download | list | delete`` (OSMO's shape; docs/cli.md "Data").

The transfer runs here, on the caller's machine, through the task runtime's own storage layer
(:mod:`runtime.storage`: fsspec, every file of a command in one batched call, as a task's inputs and outputs
are moved). A remote URL's credential is the caller's data credential stored in the service, fetched for the
one command (``POST /api/data/credential/``), given to the storage library through this process's
environment the way a task's runtime gets it (:mod:`runtime.locations`), and dropped when the command ends.
``file://`` URLs are this machine's and need no credential (nor a login). Progress goes to stderr on a terminal.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import Any

import fsspec
import typer
from fsspec.callbacks import DEFAULT_CALLBACK, Callback
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from cli import render
from cli.errors import EXIT_ERROR, EXIT_USAGE, ApiError, CliError
from cli.main import JSON_OPTION, api_client, app
from cli.output import echo_json
from runtime import storage
from runtime.locations import CLEARED, Location, LocationError, parse, with_credential

data_app = typer.Typer(help="Copy data to and from storage URLs (s3://, gs://, azure://, tos://, swift://, "
                            "file://) with your data credentials.", no_args_is_help=True)
app.add_typer(data_app, name="data")

REGEX_OPTION = typer.Option("", "--regex", "-x", help="Only the paths this regular expression matches (re.search).")
PROCESSES_OPTION = typer.Option(None, "--processes", "-p", min=1, max=64,
                                help="With --threads: the transfers in flight at once are PROCESSES x THREADS "
                                     "(default: the storage library's own).")
THREADS_OPTION = typer.Option(None, "--threads", "-T", min=1, max=256,
                              help="Transfers in flight at once per process (see --processes).")


def _in_flight(processes: int | None, threads: int | None) -> int | None:
    """OSMO's ``--processes`` and ``--threads`` as one number, how many files the storage library moves at once
    (all of a command's files go in one asynchronous batch here, in one process); None: its default."""
    if processes is None and threads is None:
        return None
    return (processes or 1) * (threads or 1)


def _regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise CliError(f"--regex {pattern[:80]!r}: not a regular expression ({exc})", exit_code=EXIT_USAGE) from exc
    return pattern


def location(url: str) -> Location:
    """The URL with its credential: the caller's, from the service, for a remote URL."""
    try:
        place = parse(url)
    except LocationError as exc:
        raise CliError(f"URL: {exc}", exit_code=EXIT_USAGE) from exc
    if place.scheme == "file":
        return place
    with api_client() as api:
        _status, answer = api.post("/api/data/credential/", json={"url": place.url})
    return with_credential(place, answer.get("values") or {})


@contextmanager
def credential_environment(place: Location) -> Iterator[None]:
    """``place``'s credential in this process's environment for the transfer (and nothing else of the kind:
    no session token or profile of the caller's shell mixes in), the earlier values back afterwards. The
    storage libraries' cached clients are dropped before and after, so none outlives its credential."""
    if place.scheme == "file":
        yield
        return
    saved = {name: os.environ.get(name) for name in (*CLEARED, *place.env)}
    protocol = place.fsspec_url.split("://", 1)[0]
    try:
        for name in CLEARED:
            os.environ.pop(name, None)
        os.environ.update(place.env)
        _forget(protocol)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        _forget(protocol)


def _forget(protocol: str) -> None:
    try:
        fsspec.get_filesystem_class(protocol).clear_instance_cache()
    except (ImportError, ValueError):
        pass  # the library is not installed: the transfer says so


class ProgressCallback(Callback):
    """fsspec's per-file progress (one step a file) as a rich bar on stderr."""

    def __init__(self, progress: Progress, description: str) -> None:
        super().__init__()
        self.progress = progress
        self.task = progress.add_task(description, total=None)

    def call(self, *args: Any, **kwargs: Any) -> None:
        self.progress.update(self.task, total=self.size, completed=self.value)


@contextmanager
def progress_bar(description: str) -> Iterator[Callback]:
    """A progress bar on stderr when it is a terminal, else fsspec's silent callback."""
    console = Console(stderr=True)
    if not console.is_terminal:
        yield DEFAULT_CALLBACK
        return
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True) as progress:
        yield ProgressCallback(progress, description)


def _storage_error(exc: storage.StorageError) -> CliError:
    return CliError(str(exc))


def upload_pairs(paths: list[str], regex: str) -> tuple[list[tuple[str, str]], list[str]]:
    """What ``upload`` sends: ``(local file, path below the URL)`` for each file, and what is left out. A file
    goes to ``URL/<its name>``, a folder to ``URL/<its name>/...``, ``folder/*`` its contents to ``URL/...``."""
    pairs: list[tuple[str, str]] = []
    skipped: list[str] = []
    for raw in paths:
        contents = raw.endswith("/*")
        path = os.path.abspath(raw[:-2] if contents else raw)
        if os.path.isfile(path) and not contents:
            name = os.path.basename(path)
            if not regex or _regex_search(regex, name):
                pairs.append((path, name))
        elif os.path.isdir(path):
            files, left_out = storage.local_files(path, regex=regex)
            prefix = "" if contents else os.path.basename(path.rstrip("/"))
            pairs += [(os.path.join(path, *name.split("/")), f"{prefix}/{name}" if prefix else name) for name in files]
            skipped += [os.path.join(path, name) for name in left_out]
        else:
            raise CliError(f"PATH {raw}: no such file or folder", exit_code=EXIT_USAGE)
    return pairs, skipped


def _regex_search(regex: str, text: str) -> bool:
    return re.search(regex, text) is not None


@data_app.command("upload")
def data_upload(
    url: str = typer.Argument(..., metavar="URL", help="Where to: s3://bucket/prefix, file:///folder, ..."),
    paths: list[str] = typer.Argument(..., metavar="PATH...", help="Files and folders (folder/* : its contents)."),
    regex: str = REGEX_OPTION,
    processes: int = PROCESSES_OPTION,
    threads: int = THREADS_OPTION,
) -> None:
    """Upload files and folders to a storage URL (a folder keeps its name: URL/folder/...)."""
    regex = _regex(regex)
    pairs, skipped = upload_pairs(paths, regex)
    place = location(url)
    started = time.perf_counter()
    with credential_environment(place), progress_bar(f"upload to {place.url}") as callback:
        try:
            sent = storage.put(pairs, place.fsspec_url, callback=callback, batch_size=_in_flight(processes, threads))
        except storage.StorageError as exc:
            raise _storage_error(exc) from None
    typer.echo(f"Uploaded {sent.files} file(s), {render.fmt_bytes(sent.bytes)}B, to {place.url} in "
               f"{render.fmt_duration(time.perf_counter() - started)}.")
    if skipped:
        typer.echo(f"Not uploaded (links leading out of their folder, or not files): {', '.join(skipped)}", err=True)


@data_app.command("download")
def data_download(
    url: str = typer.Argument(..., metavar="URL", help="An object or a prefix."),
    path: str = typer.Argument(..., metavar="PATH", help="The local folder to download into (made if missing)."),
    regex: str = REGEX_OPTION,
    resume: bool = typer.Option(False, "--resume", "-r", help="Resume a download: a file already there with "
                                "the remote size is not fetched again."),
    processes: int = PROCESSES_OPTION,
    threads: int = THREADS_OPTION,
) -> None:
    """Download an object, or every object under a prefix, into a local folder (paths kept below the URL)."""
    regex = _regex(regex)
    place = location(url)
    started = time.perf_counter()
    with credential_environment(place), progress_bar(f"download from {place.url}") as callback:
        try:
            got = storage.download(place.fsspec_url, path, regex=regex, callback=callback, resume=resume,
                                   batch_size=_in_flight(processes, threads))
        except storage.StorageError as exc:
            raise _storage_error(exc) from None
    already = f" ({got.present} already there)" if resume else ""
    typer.echo(f"Downloaded {got.files} file(s){already}, {render.fmt_bytes(got.bytes)}B, from {place.url} to {path} "
               f"in {render.fmt_duration(time.perf_counter() - started)}.")
    if got.skipped:
        typer.echo(f"Not downloaded (links leading out of the folder): {', '.join(got.skipped)}", err=True)


@data_app.command("list")
def data_list(
    url: str = typer.Argument(..., metavar="URL", help="An object or a prefix."),
    local_path: str = typer.Argument(None, metavar="[LOCAL_PATH]", help="Write the list to this file instead."),
    regex: str = REGEX_OPTION,
    prefix: str = typer.Option("", "--prefix", "-p", help="A prefix (folder) below the URL to list."),
    recursive: bool = typer.Option(False, "--recursive", "-r", help="Every object below, not just the first level."),
    no_pager: bool = typer.Option(False, "--no-pager", help="Accepted for OSMO's CLI: the list is never paged."),
    json_out: bool = JSON_OPTION,
) -> None:
    """List the objects at a storage URL, one path (relative to it) a line; folders end with /."""
    regex = _regex(regex)
    place = location(f"{url.rstrip('/')}/{prefix.strip('/')}" if prefix.strip("/") else url)
    with credential_environment(place):
        try:
            entries = storage.listing(place.fsspec_url, regex=regex, recursive=recursive)
        except storage.StorageError as exc:
            raise _storage_error(exc) from None
    if json_out:
        echo_json([{"path": e.path, "size": e.size, "folder": e.folder} for e in entries])
        return
    lines = [f"{entry.path}/" if entry.folder else entry.path for entry in entries]
    if local_path:
        with open(local_path, "w", encoding="utf-8") as handle:
            handle.writelines(f"{line}\n" for line in lines)
    else:
        for line in lines:
            typer.echo(line)
    typer.echo(f"\nTotal {len(entries)} objects found", err=bool(local_path))


@data_app.command("delete")
def data_delete(
    url: str = typer.Argument(..., metavar="URL", help="An object or a prefix."),
    regex: str = REGEX_OPTION,
) -> None:
    """Delete an object, or every object under a prefix (those --regex matches)."""
    regex = _regex(regex)
    place = location(url)
    with credential_environment(place), progress_bar(f"delete under {place.url}") as callback:
        try:
            count = storage.remove(place.fsspec_url, regex=regex, callback=callback)
        except storage.StorageError as exc:
            raise _storage_error(exc) from None
    typer.echo(f"Deleted {count} object(s) at {place.url}.")


class AccessType(StrEnum):
    READ = "READ"
    WRITE = "WRITE"
    DELETE = "DELETE"


@data_app.command("check")
def data_check(
    url: str = typer.Argument(..., metavar="URL", help="The storage URL whose access to check."),
    access_type: AccessType = typer.Option(AccessType.READ, "--access-type", "-a", case_sensitive=False,
                                           help="READ (default): read what is there; WRITE: write, read back "
                                                "and delete an object below the URL; DELETE: delete one."),
) -> None:
    """Check that your data credential gives access to a storage URL, by trying it: prints
    {"status": "pass"}, or {"status": "fail", "error": ...} and exits 1."""
    try:
        place = location(url)
    except ApiError as exc:
        if exc.status != 400 or not any(error.get("path") == "url" for error in exc.errors):
            raise
        _check_answer(" ".join(str(error.get("message")) for error in exc.errors if error.get("path") == "url"))
        return
    with credential_environment(place):
        try:
            storage.access_check(place.fsspec_url, access_type.value)
        except storage.StorageError as exc:
            _check_answer(str(exc).replace(place.fsspec_url, place.url, 1))
            return
    _check_answer("")


def _check_answer(error: str) -> None:
    """OSMO's answer of ``data check``, one line of JSON: pass, or fail with why (exit 1)."""
    typer.echo(json.dumps({"status": "fail", "error": error} if error else {"status": "pass"}))
    if error:
        raise typer.Exit(EXIT_ERROR)
