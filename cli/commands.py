"""OSMO's other workflow commands (docs/design.md §11): ``validate``, ``logs``, ``events``, ``spec``,
``restart``, and ``osmo profile`` with a default pool. Registered on the apps of :mod:`cli.main`."""

from __future__ import annotations

import os
import uuid
from typing import Any

import typer

from cli import render
from cli.api import q, workflow_path
from cli.config import ENV_POOL, config_path, config_read, config_write, settings_load
from cli.errors import EXIT_USAGE, ApiError, CliError
from cli.main import (
    FORMAT_OPTION,
    JSON_OPTION,
    LABEL_OPTION,
    OUTPUT_OPTION,
    SET_ENV_OPTION,
    SET_OPTION,
    SET_STRING_OPTION,
    FormatType,
    Output,
    api_client,
    app,
    wants_json,
    workflow_app,
)
from cli.output import echo_json, echo_lines
from cli.specs import (
    label_fields,
    label_refusal,
    read_spec,
    spec_to_send,
    spec_validate,
    submission_pool,
    template_fields,
)
from cli.spread import TemplateValuesCommand

profile_app = typer.Typer(help="Your profile: server, user and default pool.", no_args_is_help=True)
app.add_typer(profile_app, name="profile")
PROFILE_KEYS = ("pool",)


# ------------------------------------------------------------------------------------------------
# validate
# ------------------------------------------------------------------------------------------------
@workflow_app.command("validate", cls=TemplateValuesCommand)
def workflow_validate(
    file: str = typer.Argument(..., help="Workflow spec (YAML, a Jinja template); - reads stdin."),
    pool: str = typer.Option(None, "--pool", "-p", help="Pool to validate against (default: the profile's pool)."),
    set_values: list[str] = SET_OPTION,
    set_strings: list[str] = SET_STRING_OPTION,
    set_env: list[str] = SET_ENV_OPTION,
    labels: list[str] = LABEL_OPTION,
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
    output: Output = OUTPUT_OPTION,
) -> None:
    """Check a spec against a pool without submitting anything.

    Exit 0 when valid; 2 when invalid (every problem with its line) or when a gang can never fit the pool."""
    text, label = read_spec(file)
    chosen_pool = submission_pool(pool, text)
    sent, origins = spec_to_send(text, file, label)
    with api_client() as api:
        answer = spec_validate(api, text=text, label=label, pool=chosen_pool,
                               template={**template_fields(set_values, set_strings, set_env),
                                         **label_fields(labels)},
                               sent=sent, origins=origins)
    if wants_json(json_out, format_type, output):
        echo_json(answer)
        return
    groups = answer.get("groups") or []
    tasks = sum(len((g.get("constraint_tree") or {}).get("tasks") or []) + _tree_tasks(g.get("constraint_tree"))
                for g in groups)
    typer.echo(f"{label} is valid for pool {answer.get('pool', chosen_pool)}: workflow {answer.get('workflow')}, "
               f"{len(groups)} group(s), {tasks} task(s).")
    for group in groups:
        placement = group.get("placement") or {}
        typer.echo(f"  {group.get('name')}: placement now {placement.get('status', '?')}"
                   f"{': ' + str(placement.get('message')) if placement.get('status') != 'placed' else ''}")
    if answer.get("template_values"):
        values = ", ".join(f"{k}={v}" for k, v in sorted(answer["template_values"].items()))
        typer.echo(f"  template values: {values}")


def _tree_tasks(tree: Any) -> int:
    """Tasks under the tree's constraint nodes (the root's own unconstrained tasks are counted apart)."""
    if not isinstance(tree, dict):
        return 0
    total = 0
    for child in tree.get("children") or []:
        if isinstance(child, dict):
            total += len(child.get("tasks") or []) + _tree_tasks(child)
    return total


# ------------------------------------------------------------------------------------------------
# logs / events
# ------------------------------------------------------------------------------------------------
def _task_or_format(task: str | None, short_t: str | None,
                    format_type: FormatType | None) -> tuple[str | None, FormatType | None]:
    """OSMO's ``-t`` of ``logs`` and ``events`` is the task; ``-t text|json`` stays the output format."""
    if short_t is None:
        return task, format_type
    if short_t.lower() in (FormatType.TEXT, FormatType.JSON):
        return task, format_type or FormatType(short_t.lower())
    if task and task != short_t:
        raise CliError(f"two tasks given: --task {task} and -t {short_t} (-t is OSMO's --task, or the output "
                       "format text|json)", exit_code=EXIT_USAGE)
    return short_t, format_type


FORMAT_LONG_OPTION = typer.Option(None, "--format-type", case_sensitive=False,
                                  help="Output format: text (default) or json (the API's answer unchanged).")
SHORT_T_OPTION = typer.Option(None, "-t", metavar="TASK|text|json",
                              help="OSMO's -t: a task (as --task); text or json: the output format.")


@workflow_app.command("logs")
def workflow_logs(
    workflow_id: str = typer.Argument(..., metavar="ID"),
    # Help is Rich markup: an unescaped "[task]" would be read as a style tag and dropped.
    task: str | None = typer.Option(None, "--task", help="Only this task's log (default: every task's, each line "
                                                  "prefixed \\[task])."),
    tail: int = typer.Option(None, "--tail", "-n", min=1, help="Only the last N lines (of each task)."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType | None = FORMAT_LONG_OPTION,
    short_t: str | None = SHORT_T_OPTION,
    output: Output = OUTPUT_OPTION,
) -> None:
    """The workflow's pod logs: every task's, each line prefixed with its task, or one task's (--task, -t)."""
    task, format_type = _task_or_format(task, short_t, format_type)
    params: dict[str, Any] = {}
    if task:
        params["task"] = task
    if tail:
        params["tail"] = tail
    with api_client() as api:
        answer = api.get(workflow_path(workflow_id, "logs/"), params=params,
                         not_found=f"workflow {workflow_id} not found")
    if wants_json(json_out, format_type, output):
        echo_json(answer)
        return
    echo_lines([str(line) for line in answer.get("lines") or []])
    if answer.get("task") is not None:
        if answer.get("truncated"):
            typer.echo(f"(log of task {answer.get('task')}, pod {answer.get('pod')}, truncated: only the last lines "
                       "are shown)", err=True)
        return
    for entry in answer.get("tasks") or []:
        if isinstance(entry, dict) and entry.get("error"):
            typer.echo(f"(task {entry.get('task')}: {entry['error']})", err=True)
    if answer.get("truncated"):
        typer.echo("(truncated: only the last lines of each task are shown)", err=True)
    if answer.get("tasks_omitted"):
        typer.echo(f"({answer['tasks_omitted']} more tasks are not shown: the answer is capped; name one with "
                   "--task)", err=True)


@workflow_app.command("events")
def workflow_events(
    workflow_id: str = typer.Argument(..., metavar="ID"),
    task: str | None = typer.Option(None, "--task", help="Only this task's events (its transitions and its pod's)."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType | None = FORMAT_LONG_OPTION,
    short_t: str | None = SHORT_T_OPTION,
    output: Output = OUTPUT_OPTION,
) -> None:
    """What happened to a workflow: the service's transitions and the backend's pod events, in time order."""
    task, format_type = _task_or_format(task, short_t, format_type)
    with api_client() as api:
        answer = api.get(workflow_path(workflow_id, "events/"), not_found=f"workflow {workflow_id} not found")
    if task:
        answer = {**answer, "events": [e for e in answer.get("events") or [] if isinstance(e, dict)
                                       and e.get("task") == task]}
    if wants_json(json_out, format_type, output):
        echo_json(answer)
        return
    events = answer.get("events") or []
    if not events:
        what = f"task {task} of workflow" if task else "workflow"
        typer.echo(f"No events for {what} {answer.get('workflow', workflow_id)} yet.")
        return
    rows = [[render.fmt_time(e.get("time")), e.get("source"), e.get("task"), e.get("kind"), e.get("message")]
            for e in events if isinstance(e, dict)]
    echo_lines(render.table(["TIME", "SOURCE", "TASK", "KIND", "MESSAGE"], rows))


# ------------------------------------------------------------------------------------------------
# spec / restart
# ------------------------------------------------------------------------------------------------
@workflow_app.command("spec")
def workflow_spec(
    workflow_id: str = typer.Argument(..., metavar="ID"),
    values: bool = typer.Option(False, "--values", help="Print the template values instead of the spec."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
    output: Output = OUTPUT_OPTION,
) -> None:
    """The spec a workflow runs (as rendered from its template), ready to edit and submit again."""
    with api_client() as api:
        answer = api.get(workflow_path(workflow_id, "spec/"), not_found=f"workflow {workflow_id} not found")
    if wants_json(json_out, format_type, output):
        echo_json(answer)
        return
    if values:
        template_values = answer.get("template_values") or {}
        echo_lines([f"{key}={value}" for key, value in sorted(template_values.items())] or
                   [f"(workflow {workflow_id} was not rendered from a template)"])
        return
    typer.echo(str(answer.get("spec") or ""), nl=False)


@workflow_app.command("restart")
def workflow_restart(
    workflow_id: str = typer.Argument(..., metavar="ID"),
    pool: str = typer.Option(None, "--pool", "-p", help="Run in another pool (default: the same one)."),
    labels: list[str] = typer.Option(None, "--label", metavar="KEY=VALUE",
                                     help="Set a label over the workflow's (repeat for several)."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """Submit a workflow's stored spec again, as a new workflow (same pool, priority and template values
    unless told; the stored spec, rendered already, is not rendered again)."""
    with api_client() as api:
        try:
            _status, answer = api.post(workflow_path(workflow_id, "restart/"),
                                       json={**({"pool": pool} if pool else {}), **label_fields(labels)},
                                       headers={"Idempotency-Key": str(uuid.uuid4())},
                                       not_found=f"workflow {workflow_id} not found")
        except ApiError as exc:
            label_refusal(exc)
            raise
    if wants_json(json_out, format_type):
        echo_json(answer)
        return
    typer.echo(f"Restarted {workflow_id} as workflow {answer.get('id')} in pool {answer.get('pool')} "
               f"(priority {answer.get('priority')}): {answer.get('status')}")
    typer.echo(f"Follow it with: osmo workflow query {answer.get('id')}   (or osmo workflow wait)")


# ------------------------------------------------------------------------------------------------
# profile
# ------------------------------------------------------------------------------------------------
@profile_app.command("list")
def profile_list(json_out: bool = JSON_OPTION, format_type: FormatType = FORMAT_OPTION,
                 output: Output = OUTPUT_OPTION) -> None:
    """The server, user and default pool in use, and where each comes from."""
    stored = config_read()
    settings = settings_load()
    with api_client() as api:
        me = api.get("/api/me/")
    pool = os.environ.get(ENV_POOL) or stored.get("default_pool")
    pool_source = ENV_POOL if os.environ.get(ENV_POOL) else (str(config_path()) if pool else "")
    profile = {"url": settings.url, "user": me.get("username"), "is_staff": bool(me.get("is_staff")),
               "default_pool": pool, "url_source": settings.url_source, "pool_source": pool_source or None}
    if wants_json(json_out, format_type, output):
        echo_json(profile)
        return
    rows = [["server", settings.url, settings.url_source],
            ["user", f"{me.get('username')}{' (staff)' if me.get('is_staff') else ''}", settings.token_source],
            ["pool", pool or "(none: pass --pool, or osmo profile set pool NAME)", pool_source]]
    echo_lines(render.table(["SETTING", "VALUE", "FROM"], rows))


@profile_app.command("set")
def profile_set(
    key: str = typer.Argument(..., metavar="KEY", help="pool"),
    value: str = typer.Argument(..., metavar="VALUE"),
) -> None:
    """Set a profile value: `osmo profile set pool NAME` (the default of --pool).

    The pool is checked against the server's pools first."""
    if key not in PROFILE_KEYS:
        raise CliError(f"unknown profile key {key!r}; known: {', '.join(PROFILE_KEYS)}", exit_code=EXIT_USAGE)
    with api_client() as api:
        api.get(f"/api/pools/{q(value)}/", not_found=f"pool {value} not found (see osmo pool list)")
    path = config_write({**config_read(), "default_pool": value})
    typer.echo(f"Default pool: {value} (saved to {path}).")
