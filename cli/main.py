"""``osmo``: submit and follow workflows, look at pools. A client of the REST API (docs/design.md §7).

Every read takes ``--json`` (the API's answer, unchanged). Errors are the user's to fix and are said
so on stderr, without tracebacks; exit codes: 0 ok, 1 error (or a workflow that failed), 2 usage or
invalid input, 130 interrupted.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable
from enum import StrEnum
from typing import Any

import typer
from typer.core import TyperGroup

from cli import __version__, render
from cli.api import Api, q, results, workflow_path
from cli.config import (
    ENV_TOKEN,
    ENV_URL,
    SSO_ENTRIES,
    config_delete,
    config_path,
    config_read,
    config_write,
    normalize_url,
    settings_load,
)
from cli.device import device_login
from cli.errors import EXIT_USAGE, ApiError, CliError, NotLoggedInError, one_line
from cli.follow import finish, follow, watch_list
from cli.output import echo_json, echo_lines
from cli.specs import (
    annotate_spec_errors,
    label_fields,
    read_spec,
    spec_to_send,
    submission_pool,
    template_fields,
    warnings_print,
)
from cli.spread import StatusValuesCommand, TemplateValuesCommand


class OsmoGroup(TyperGroup):
    """Turns expected errors into a message on stderr and an exit code (no traceback)."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]  # typer's stubs name its own click copy
        try:
            return super().invoke(ctx)
        except CliError as exc:
            for line in exc.lines():
                typer.echo(line, err=True)
            raise typer.Exit(exc.exit_code) from None


HELP = "Client of the OSMO-style workflow service: submit workflows, follow them, inspect pools."
app = typer.Typer(cls=OsmoGroup, help=HELP, no_args_is_help=True, pretty_exceptions_enable=False,
                  add_completion=False, context_settings={"help_option_names": ["-h", "--help"]})
pool_app = typer.Typer(help="Pools: topology keys, capacity, nodes.", no_args_is_help=True)
workflow_app = typer.Typer(help="Submit, list, inspect, wait for and cancel workflows.", no_args_is_help=True)
backend_app = typer.Typer(help="Backends: the clusters (or machine, or simulation) pools run on.",
                          no_args_is_help=True)
app.add_typer(backend_app, name="backend")
app.add_typer(pool_app, name="pool")
app.add_typer(workflow_app, name="workflow")

JSON_OPTION = typer.Option(False, "--json", help="Print the API's JSON answer unchanged (same as -t json).")
FORMAT_OPTION = typer.Option(None, "--format-type", "-t", case_sensitive=False,
                             help="Output format: text (default) or json (the API's answer unchanged).")
OUTPUT_OPTION = typer.Option(None, "--output", "-o", case_sensitive=False,
                             help="kubectl style: json, or wide (more columns).")


class FormatType(StrEnum):
    TEXT = "text"
    JSON = "json"


class Output(StrEnum):
    TEXT = "text"
    JSON = "json"
    WIDE = "wide"


def wants_json(json_out: bool, format_type: FormatType | None = None, output: Output | None = None) -> bool:
    """``--json``, ``-t json`` and ``-o json`` all mean the API's JSON answer."""
    return bool(json_out or format_type == FormatType.JSON or output == Output.JSON)


class Priority(StrEnum):
    LOW = "LOW"
    NORMAL = "NORMAL"
    HIGH = "HIGH"


class Status(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    FAILED_CANCELED = "FAILED_CANCELED"
    FAILED_BACKEND_ERROR = "FAILED_BACKEND_ERROR"
    FAILED_QUEUE_TIMEOUT = "FAILED_QUEUE_TIMEOUT"
    FAILED_UPSTREAM = "FAILED_UPSTREAM"
    FAILED_SERVER_ERROR = "FAILED_SERVER_ERROR"
    FAILED_PREEMPTED = "FAILED_PREEMPTED"
    FAILED_EVICTED = "FAILED_EVICTED"
    FAILED_IMAGE_PULL = "FAILED_IMAGE_PULL"
    FAILED_START_ERROR = "FAILED_START_ERROR"
    FAILED_START_TIMEOUT = "FAILED_START_TIMEOUT"
    FAILED_EXEC_TIMEOUT = "FAILED_EXEC_TIMEOUT"


def _version(value: bool) -> None:
    if value:
        typer.echo(f"osmo {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Server and token come from `osmo login` (a config file) or OSMO_URL / OSMO_TOKEN."""


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------
def api_client() -> Api:
    settings = settings_load()
    return Api(settings.url, settings.token)


# ------------------------------------------------------------------------------------------------
# login / logout
# ------------------------------------------------------------------------------------------------
@app.command()
def login(
    url: str = typer.Argument(..., help="The service, e.g. http://localhost:8000"),
    token: str | None = typer.Option(None, "--token", help="API token (python manage.py drf_create_token USER); "
                                     "asked for (or read from a pipe) when neither it nor --device is given."),
    device: bool = typer.Option(False, "--device", help="Sign in through the organisation's identity provider "
                                "(single sign-on): prints an address and a code to open in a browser, then waits."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Check the token against the server first."),
) -> None:
    """Store the server URL and token (mode 0600), after checking them with GET /api/me/ and /api/pools/."""
    url = normalize_url(url)
    entries: dict[str, str] = {}
    if device and token is not None:
        raise CliError("give either --token or --device, not both", exit_code=EXIT_USAGE)
    if device:
        entries = device_login(url, echo=typer.echo)
        token = entries["token"]
    elif token is None and not sys.stdin.isatty():
        # Piped (echo $TOKEN | osmo login URL): read it as is; getpass would warn, quoting its own source.
        token = sys.stdin.readline()
        if not token.strip():
            raise CliError("no token on standard input: pass --token TOKEN, or pipe it (echo $TOKEN | osmo login URL)",
                           exit_code=EXIT_USAGE)
    elif token is None:
        token = typer.prompt("Token", hide_input=True)
    token = token.strip()
    if not token:
        raise CliError("the token is empty", exit_code=EXIT_USAGE)
    pools: list[dict[str, Any]] = []
    me: dict[str, Any] = {}
    if verify:
        with Api(url, token) as api:
            try:
                me = api.get("/api/me/")
                pools = results(api.get("/api/pools/", params={"limit": 500}))
            except NotLoggedInError as exc:
                raise CliError(f"{url} rejected this token", hint="Ask an admin for a token "
                               "(python manage.py drf_create_token USER), then run osmo login again.") from exc
    kept = {key: value for key, value in config_read().items() if key not in SSO_ENTRIES}
    path = config_write({**kept, "url": url, "token": token, **entries})
    if verify:
        names = ", ".join(str(p.get("name")) for p in pools) or "none yet"
        who = f" as {me.get('username')}{' (staff)' if me.get('is_staff') else ''}" if me.get("username") else ""
        typer.echo(f"Logged in to {url}{who}: {'signed in' if device else 'token accepted'}; pools visible: {names}.")
    else:
        typer.echo(f"Saved {url} without checking the token.")
    typer.echo(f"Saved to {path} (mode 0600).")
    overriding = [name for name in (ENV_URL, ENV_TOKEN) if os.environ.get(name)]
    if overriding:
        typer.echo(f"Note: {' and '.join(overriding)} set in the environment override the saved values.", err=True)


@app.command()
def logout() -> None:
    """Forget the saved server and token (deletes the config file)."""
    path = config_path()
    stored = config_read(path)
    if config_delete(path):
        typer.echo(f"Logged out of {stored.get('url', 'the server')} (deleted {path}).")
    else:
        typer.echo(f"Not logged in ({path} does not exist).")
    if os.environ.get(ENV_TOKEN):
        typer.echo(f"Note: {ENV_TOKEN} is still set in the environment and is used until you unset it.", err=True)


# ------------------------------------------------------------------------------------------------
# backend
# ------------------------------------------------------------------------------------------------
@backend_app.command("list")
def backend_list(json_out: bool = JSON_OPTION, format_type: FormatType = FORMAT_OPTION,
                 output: Output = OUTPUT_OPTION) -> None:
    """Backends with their kind, status, last contact, pools and nodes (admins manage them)."""
    _list_print("/api/backends/", render.backend_rows, "No backends.", wants_json(json_out, format_type, output))


# ------------------------------------------------------------------------------------------------
# pool
# ------------------------------------------------------------------------------------------------
@pool_app.command("list")
def pool_list(json_out: bool = JSON_OPTION, format_type: FormatType = FORMAT_OPTION,
              output: Output = OUTPUT_OPTION) -> None:
    """Pools with their topology keys and GPU capacity / used / free."""
    _list_print("/api/pools/", render.pool_rows,
                "No pools. An admin adds them (python manage.py import_pool FILE, or the admin site).",
                wants_json(json_out, format_type, output))


def _list_print(path: str, rows: Any, empty: str, as_json: bool) -> None:
    """A list of the API (its first 500) as the API's JSON, or as the table ``rows`` draws, or ``empty``."""
    with api_client() as api:
        answer = api.get(path, params={"limit": 500})
    if as_json:
        echo_json(answer)
        return
    found = results(answer)
    if not found:
        typer.echo(empty)
        return
    echo_lines(rows(found))


@pool_app.command("show")
def pool_show(name: str = typer.Argument(..., help="Pool name."), json_out: bool = JSON_OPTION,
              format_type: FormatType = FORMAT_OPTION, output: Output = OUTPUT_OPTION) -> None:
    """One pool: keys in order, capacity / reserved / external / free, and a summary per domain of each key."""
    with api_client() as api:
        answer = api.get(f"/api/pools/{q(name)}/", not_found=f"pool {name} not found")
    if wants_json(json_out, format_type, output):
        echo_json(answer)
        return
    echo_lines(render.pool_lines(answer))


@pool_app.command("nodes")
def pool_nodes(name: str = typer.Argument(..., help="Pool name."), json_out: bool = JSON_OPTION,
               format_type: FormatType = FORMAT_OPTION, output: Output = OUTPUT_OPTION) -> None:
    """A pool's nodes with their domains and GPUs (every page; --json prints the list of all nodes)."""
    with api_client() as api:
        nodes = list(api.get_all(f"/api/pools/{q(name)}/nodes/", not_found=f"pool {name} not found"))
    if wants_json(json_out, format_type, output):
        echo_json(nodes)
        return
    if not nodes:
        typer.echo(f"Pool {name} has no nodes.")
        return
    echo_lines(render.node_rows(nodes))


# ------------------------------------------------------------------------------------------------
# workflow submit / wait
# ------------------------------------------------------------------------------------------------
SET_OPTION = typer.Option(None, "--set", metavar="NAME=VALUE",
                          help="Template value (numbers are cast to int/float); several: --set a=1 b=2, or repeat it.")
SET_STRING_OPTION = typer.Option(None, "--set-string", metavar="NAME=VALUE", help="Template value kept as text.")
SET_ENV_OPTION = typer.Option(None, "--set-env", metavar="NAME=VALUE",
                              help="Environment variable set on every task.")
LABEL_OPTION = typer.Option(None, "--label", metavar="KEY=VALUE",
                            help="Set a workflow label (repeat for several); overrides the spec's workflow.labels.")


@workflow_app.command("submit", cls=TemplateValuesCommand)
def workflow_submit(
    file: str = typer.Argument(..., help="Workflow spec (YAML, a Jinja template); - reads stdin."),
    pool: str = typer.Option(None, "--pool", "-p", help="Pool to run in (default: the profile's pool)."),
    set_values: list[str] = SET_OPTION,
    set_strings: list[str] = SET_STRING_OPTION,
    set_env: list[str] = SET_ENV_OPTION,
    labels: list[str] = LABEL_OPTION,
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate, print constraint trees and a placement "
                                 "preview; submit nothing."),
    priority: Priority = typer.Option(Priority.NORMAL, "--priority", case_sensitive=False),
    team: str = typer.Option(None, "--team", help="The team whose GPU quota in the pool it counts against "
                             "(default: your one team with a quota there)."),
    wait: bool = typer.Option(False, "--wait", help="Follow the workflow until it finishes; exit 0 on COMPLETED, "
                              "1 on FAILED*."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="Seconds between polls with --wait."),
    timeout: float = typer.Option(0, "--timeout", min=0, help="Give up waiting after this many seconds (0: never)."),
    json_out: bool = typer.Option(False, "--json", help="Print the API's JSON answer (with --wait: the final "
                                  "workflow; progress goes to stderr)."),
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """Submit a workflow spec to a pool (or dry-run it)."""
    json_out = wants_json(json_out, format_type)
    text, label = read_spec(file)
    chosen_pool = submission_pool(pool, text)
    sent, origins = spec_to_send(text, file, label)
    body = {**({"pool": chosen_pool} if chosen_pool else {}), "spec": sent,
            "priority": priority.value, "dry_run": dry_run,
            **template_fields(set_values, set_strings, set_env), **({"team": team} if team else {}),
            **label_fields(labels)}
    headers = {} if dry_run else {"Idempotency-Key": str(uuid.uuid4())}
    with api_client() as api:
        try:
            status_code, answer = api.post("/api/workflows/", json=body, headers=headers)
        except ApiError as exc:
            if exc.status == 400:
                raise annotate_spec_errors(exc, text, label, origins) from None
            raise
        warnings_print(answer, label)
        if dry_run:
            if json_out:
                echo_json(answer)
            else:
                echo_lines(render.dry_run_lines(answer, pool=str(answer.get("pool") or chosen_pool)))
            return
        workflow_id = str(answer.get("id"))
        if json_out and not wait:
            echo_json(answer)
            return
        again = " (already submitted with this key)" if status_code == 200 else ""
        typer.echo(f"Submitted workflow {workflow_id} to pool {answer.get('pool', chosen_pool)} "
                   f"(priority {answer.get('priority', priority.value)}): {answer.get('status')}{again}",
                   err=json_out)
        if not wait:
            typer.echo(f"Follow it with: osmo workflow query {workflow_id}   (or --wait)")
            return
        final = follow(api, workflow_id, interval=interval, timeout=timeout, first=answer, err=json_out)
    finish(final, json_out=json_out)


@workflow_app.command("wait")
def workflow_wait(
    workflow_id: str = typer.Argument(..., metavar="ID"),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="Seconds between polls."),
    timeout: float = typer.Option(0, "--timeout", min=0, help="Give up after this many seconds (0: never)."),
    json_out: bool = typer.Option(False, "--json", help="Print the final workflow as JSON; progress to stderr."),
    format_type: FormatType = FORMAT_OPTION,
    output: Output = OUTPUT_OPTION,
) -> None:
    """Follow a submitted workflow until it finishes (exit 0 on COMPLETED, 1 on FAILED*)."""
    json_out = wants_json(json_out, format_type, output)
    with api_client() as api:
        final = follow(api, workflow_id, interval=interval, timeout=timeout, first=None, err=json_out)
    finish(final, json_out=json_out)


# ------------------------------------------------------------------------------------------------
# workflow list / query / cancel
# ------------------------------------------------------------------------------------------------
@workflow_app.command("list", cls=StatusValuesCommand)
def workflow_list(
    status: list[Status] = typer.Option(None, "--status", "-s", case_sensitive=False,
                                        help="Only these statuses: --status RUNNING PENDING, or repeat the option."),
    pool: list[str] = typer.Option(None, "--pool", "-p", help="Only these pools (several: --pool a b)."),
    user: list[str] = typer.Option(None, "--user", "-u", help="Only these submitters (staff see everyone's; "
                                   "several: --user a b)."),
    name: str = typer.Option(None, "--name", "-n", help="Name contains this (case-insensitive)."),
    label: list[str] = typer.Option(None, "--label", metavar="KEY=SELECTOR",
                                    help="Label matches: an exact value, * wildcards or (a|b) alternatives, e.g. "
                                    "project=(sim_*|hil_*); repeat to require all."),
    no_label: list[str] = typer.Option(None, "--no-label", metavar="KEY",
                                       help="Has no label KEY; repeat to require every key absent."),
    tag_names: list[str] = typer.Option(None, "--tags", help="Carries the tag(s): --tags a b, or repeat it."),
    priority: list[str] = typer.Option(None, "--priority", help="Of these priorities: LOW, NORMAL, HIGH (several: "
                                       "--priority LOW HIGH)."),
    submitted_after: str = typer.Option(None, "--submitted-after", metavar="YYYY-MM-DD",
                                        help="Submitted on or after this day."),
    submitted_before: str = typer.Option(None, "--submitted-before", metavar="YYYY-MM-DD",
                                         help="Submitted before this day."),
    app_ref: str = typer.Option(None, "--app", "-P", metavar="APP[:VERSION]",
                                help="Started from this app (a version of it: APP:VERSION)."),
    limit: int = typer.Option(20, "--limit", "--count", "-c", min=1, max=500,
                              help="At most this many, newest first (--count, -c: OSMO's name)."),
    offset: int = typer.Option(0, "--offset", "-f", min=0, help="Skip this many first."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
    output: Output = OUTPUT_OPTION,
    watch: bool = typer.Option(False, "--watch", "-w", help="Keep listing: print each workflow again when its "
                               "status changes (Ctrl-C stops)."),
    interval: float = typer.Option(2.0, "--interval", min=0.05, help="Seconds between polls with --watch."),
    timeout: float = typer.Option(0, "--timeout", min=0, help="Stop watching after this many seconds (0: never)."),
) -> None:
    """Workflows, newest first."""
    params: dict[str, Any] = {"limit": limit, "offset": offset}
    if status:
        params["status"] = [s.value for s in status]
    for key, value in (("name", name), ("submitted_after", submitted_after), ("submitted_before", submitted_before),
                       ("app", app_ref)):
        if value:
            params[key] = value
    for key, names in (("pool", pool), ("user", user)):
        if names:
            params[key] = list(names)
    if priority:
        params["priority"] = [value.upper() for value in priority]
    for key, values in (("label", label), ("no_label", no_label), ("tag", tag_names)):
        if values:
            params[key] = list(values)
    as_json = wants_json(json_out, format_type, output)
    wide = output == Output.WIDE
    with api_client() as api:
        try:
            answer = api.get("/api/workflows/", params=params)
        except ApiError as exc:
            raise one_line(exc) if exc.status == 400 else exc from None
        if as_json and not watch:
            echo_json(answer)
            return
        items = results(answer)
        if not items and not watch:
            for one in pool or []:  # a pool that does not exist matches nothing: say that, not "no workflows"
                api.get(f"/api/pools/{q(one)}/", not_found=f"pool {one} not found (osmo pool list shows them)")
            typer.echo("No workflows match." if len(params) > 2 or offset else "No workflows yet.")
            return
        if watch:
            watch_list(api, params, items, wide=wide, as_json=as_json, interval=interval, timeout=timeout)
            return
    echo_lines(render.workflow_rows(items, wide=wide))
    total = answer.get("count") if isinstance(answer, dict) else None
    if isinstance(total, int) and total > offset + len(items):
        typer.echo(f"({offset + 1}-{offset + len(items)} of {total}; see more with --offset {offset + len(items)})")


@workflow_app.command("query")
def workflow_query(workflow_id: str = typer.Argument(..., metavar="ID"), json_out: bool = JSON_OPTION,
                   format_type: FormatType = FORMAT_OPTION, output: Output = OUTPUT_OPTION) -> None:
    """One workflow: groups, constraint trees, tasks with status / node / domains, why queued gangs wait, times."""
    with api_client() as api:
        answer = api.get(workflow_path(workflow_id), not_found=f"workflow {workflow_id} not found")
    if wants_json(json_out, format_type, output):
        echo_json(answer)
        return
    echo_lines(render.workflow_lines(answer))


@workflow_app.command("cancel")
def workflow_cancel(workflow_ids: list[str] = typer.Argument(..., metavar="ID..."), json_out: bool = JSON_OPTION,
                    format_type: FormatType = FORMAT_OPTION) -> None:
    """Cancel workflows (several IDs, as OSMO's): unfinished groups become FAILED_CANCELED, their capacity is freed.

    Each ID is cancelled on its own: one that cannot be (not found, finished) is said on stderr and the
    others still are; the exit code is then 1."""
    paths = [(workflow_id, workflow_path(workflow_id, "cancel/")) for workflow_id in workflow_ids]
    answers, failed = [], 0
    as_json = wants_json(json_out, format_type)
    with api_client() as api:
        for workflow_id, path in paths:
            try:
                _status, answer = api.post(path, not_found=f"workflow {workflow_id} not found")
            except ApiError as exc:
                failed = max(failed, exc.exit_code)
                for line in exc.lines():
                    typer.echo(line, err=True)
                continue
            answers.append(answer)
            if not as_json:
                typer.echo(f"Cancelled workflow {answer.get('id', workflow_id)}: "
                           f"{render.status_style(str(answer.get('status')))}")
    if as_json and answers:
        echo_json(answers[0] if len(workflow_ids) == 1 else answers)
    if failed:
        raise typer.Exit(failed)


# Register validate, logs, events, spec, restart, profile (commands), credential and token set/list/delete, app,
# data, task and resource lists, version, tag, rsync, exec and port-forward.
from cli import access_token, apps, commands, credential, data, lists, rsync, tagging  # noqa: E402,F401
from cli.sessions import exec_command, port_forward  # noqa: E402,F401


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``osmo = "cli.main:main"``)."""
    command: Callable[..., Any] = typer.main.get_command(app)
    command(args=argv, prog_name="osmo")
