"""Following workflows until they finish: progress lines (a spinner on a terminal), the final
summary and exit code, and ``osmo workflow list --watch``'s rows as statuses change."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer

from cli import render
from cli.api import Api, results, workflow_path
from cli.errors import EXIT_ERROR, EXIT_INTERRUPTED, ApiError, CliError
from cli.output import echo_json, echo_lines


def finish(workflow: dict[str, Any], *, json_out: bool) -> None:
    status = str(workflow.get("status"))
    if json_out:
        echo_json(workflow)
    else:
        typer.echo("")
        typer.echo(f"Workflow {workflow.get('id')} {render.status_style(status)}")
        if workflow.get("failure_message"):
            typer.echo(f"  failure: {workflow['failure_message']}")
        echo_lines(render.placement_lines(workflow))
    if status != "COMPLETED":
        raise typer.Exit(EXIT_ERROR)


class Progress:
    """Progress lines while waiting: a Rich spinner with the status on a terminal, plain lines otherwise."""

    def __init__(self, *, err: bool) -> None:
        self.err = err
        stream = sys.stderr if err else sys.stdout
        self.rich = stream.isatty() and os.environ.get("TERM") != "dumb"
        self._status: Any = None
        self._console: Any = None

    @contextmanager
    def running(self, text: str) -> Iterator[Progress]:
        if not self.rich:
            yield self
            return
        from rich.console import Console

        self._console = Console(stderr=self.err, highlight=False)
        with self._console.status(text) as status:
            self._status = status
            yield self
        self._status = None

    def line(self, text: str) -> None:
        if self._console is not None:
            from rich.text import Text

            self._console.print(Text.from_ansi(text))
        else:
            typer.echo(text, err=self.err)

    def update(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text)


def follow(api: Api, workflow_id: str, *, interval: float, timeout: float, first: dict[str, Any] | None,
           err: bool) -> dict[str, Any]:
    """Poll the workflow, reporting each change of status, wait reason or placement, until a terminal status."""
    start = time.monotonic()
    progress = Progress(err=err)
    seen: dict[object, Any] = {}
    failures = 0

    def stamp() -> str:
        return f"[{render.fmt_duration(time.monotonic() - start):>7}]"

    def report(workflow: dict[str, Any]) -> None:
        key = "workflow"
        status = workflow.get("status")
        if seen.get(key) != status:
            seen[key] = status
            progress.line(f"{stamp()} workflow {workflow_id}: {render.status_style(str(status))}")
        for group in workflow.get("groups") or []:
            name = group.get("name")
            group_status = group.get("status")
            if seen.get(("group", name)) != group_status:
                seen[("group", name)] = group_status
                progress.line(f"{stamp()}   group {name}: {render.status_style(str(group_status))}")
            reason = render.waiting_reason(group.get("unschedulable_reason"))
            if group_status in ("SCHEDULING", "WAITING") and reason and seen.get(("reason", name)) != reason:
                seen[("reason", name)] = reason
                progress.line(f"{stamp()}   group {name} waiting: {reason}")
            placed = {t.get("name"): t.get("node") for t in group.get("tasks") or [] if t.get("node")}
            if placed and seen.get(("placed", name)) != placed:
                seen[("placed", name)] = placed
                progress.line(f"{stamp()}   group {name} placed:")
                for task in group.get("tasks") or []:
                    if task.get("node"):
                        progress.line(f"{' ' * 13}{task.get('name')} -> {task.get('node')}  "
                                      f"{render.domains_text(task.get('domains'))}")
            if group.get("failure_message") and seen.get(("failure", name)) != group["failure_message"]:
                seen[("failure", name)] = group["failure_message"]
                progress.line(f"{stamp()}   group {name} failed: {group['failure_message']}")
        summary = ", ".join(f"{g.get('name')} {g.get('status')}" for g in workflow.get("groups") or [])
        progress.update(f"{workflow_id}: {status} ({summary}) · {render.fmt_duration(time.monotonic() - start)}")

    workflow = first
    try:
        with progress.running(f"waiting for {workflow_id}"):
            while True:
                if workflow is None:
                    try:
                        workflow = api.get(workflow_path(workflow_id), not_found=f"workflow {workflow_id} not found")
                        failures = 0
                    except ApiError:
                        raise
                    except CliError as exc:  # the server went away for a moment: keep trying a while
                        failures += 1
                        if failures > 5:
                            raise
                        progress.line(f"{stamp()} (poll failed, retrying: {exc.message})")
                        time.sleep(min(interval * failures, 10))
                        continue
                report(workflow)
                if workflow.get("status") in render.TERMINAL_WORKFLOW:
                    return workflow
                if timeout and time.monotonic() - start > timeout:
                    raise CliError(f"gave up waiting after {render.fmt_duration(timeout)}; workflow {workflow_id} is "
                                   f"{workflow.get('status')} and keeps going",
                                   hint=f"Follow it again with: osmo workflow wait {workflow_id}")
                workflow = None
                time.sleep(interval)
    except KeyboardInterrupt:
        typer.echo(f"\nStopped waiting; workflow {workflow_id} keeps going. Follow it again with: "
                   f"osmo workflow wait {workflow_id}", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


def watch_list(api: Api, params: dict[str, Any], items: list[dict[str, Any]], *, wide: bool, as_json: bool,
               interval: float, timeout: float) -> None:
    """kubectl's ``get -w``: the table once, then a row (or a JSON line) per workflow whose status changed."""
    seen = {item.get("id"): item.get("status") for item in items}
    rows = render.workflow_rows(items, wide=wide)
    if as_json:
        for item in items:
            typer.echo(json.dumps(item, ensure_ascii=False))
    else:
        echo_lines(rows if items else rows[:1])
    start = time.monotonic()
    try:
        while not timeout or time.monotonic() - start < timeout:
            time.sleep(interval)
            changed = [item for item in results(api.get("/api/workflows/", params=params))
                       if seen.get(item.get("id")) != item.get("status")]
            for item in reversed(changed):
                seen[item.get("id")] = item.get("status")
                if as_json:
                    typer.echo(json.dumps(item, ensure_ascii=False))
                else:
                    echo_lines(render.workflow_rows([item], wide=wide)[1:])
    except KeyboardInterrupt:
        raise typer.Exit(EXIT_INTERRUPTED) from None
