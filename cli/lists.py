"""OSMO's list commands around workflows (docs/cli.md): ``osmo task list``, ``osmo resource list|info`` and
``osmo version``, over ``/api/tasks/``, ``/api/resources/`` and ``/api/version/``. Registered on the app of
:mod:`cli.main`."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Any

import typer
from typer.core import TyperCommand

from cli import __version__, render
from cli.api import Api, q, results
from cli.config import ENV_POOL, config_read, settings_load
from cli.errors import CliError, NotLoggedInError
from cli.main import FORMAT_OPTION, JSON_OPTION, OUTPUT_OPTION, FormatType, Output, api_client, app, wants_json
from cli.output import echo_json, echo_lines
from cli.spread import is_value, option_values_spread

task_app = typer.Typer(help="Tasks across your workflows.", no_args_is_help=True)
resource_app = typer.Typer(help="Nodes of the pools you may use: capacity, use and who holds them.",
                           no_args_is_help=True)
app.add_typer(task_app, name="task")
app.add_typer(resource_app, name="resource")

#: OSMO's default statuses of ``task list``: what is under way.
TASK_DEFAULT_STATUSES = ("SCHEDULING", "INITIALIZING", "RUNNING")
TASK_LIST_MANY = ("--status", "-s", "--pool", "-p", "--node", "-n", "--user", "-u", "--priority")
RESOURCE_LIST_MANY = ("--pool", "-p", "--platform")


class SpreadCommand(TyperCommand):
    """OSMO's ``nargs='+'`` options of these lists: ``--pool a b`` read as ``--pool a --pool b``."""

    many: tuple[str, ...] = ()

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, option_values_spread(args, self.many, is_value))


class TaskListCommand(SpreadCommand):
    many = TASK_LIST_MANY


class ResourceListCommand(SpreadCommand):
    many = RESOURCE_LIST_MANY


class Order(StrEnum):
    ASC = "asc"
    DESC = "desc"


class Mode(StrEnum):
    USED = "used"
    FREE = "free"


# ------------------------------------------------------------------------------------------------
# task list
# ------------------------------------------------------------------------------------------------
@task_app.command("list", cls=TaskListCommand)
def task_list(
    status: list[str] = typer.Option(None, "--status", "-s", metavar="STATUS",
                                     help="Only these statuses (several: -s RUNNING FAILED); default SCHEDULING, "
                                          "INITIALIZING and RUNNING."),
    workflow_id: str = typer.Option(None, "--workflow-id", "-w", help="Only workflows whose id contains this."),
    user: list[str] = typer.Option(None, "--user", "-u", help="Only these submitters (staff see everyone's)."),
    all_users: bool = typer.Option(False, "--all-users", "-a", help="Every submitter you may see (default: you)."),
    pool: list[str] = typer.Option(None, "--pool", "-p", help="Only these pools."),
    node: list[str] = typer.Option(None, "--node", "-n", help="Only tasks placed on these nodes."),
    count: int = typer.Option(20, "--count", "-c", min=1, max=500, help="At most this many."),
    offset: int = typer.Option(0, "--offset", "-f", min=0, help="Skip this many first."),
    order: Order = typer.Option(Order.ASC, "--order", "-o", case_sensitive=False,
                                help="By start time: asc, the latest last; desc, the latest first."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also each task's storage, CPU, memory and GPU "
                                 "request, with a TOTAL row."),
    summary: bool = typer.Option(False, "--summary", "-S", help="The requests added up per user, pool and "
                                 "priority (not with --verbose)."),
    by_workflow: bool = typer.Option(False, "--aggregate-by-workflow", "-W",
                                     help="The requests added up per workflow (user, workflow, pool, priority)."),
    priority: list[str] = typer.Option(None, "--priority", help="Only workflows of these priorities: LOW, NORMAL, "
                                       "HIGH (several: --priority LOW HIGH)."),
    started_after: str = typer.Option(None, "--started-after", metavar="YYYY-MM-DD",
                                      help="Tasks started on or after this day."),
    started_before: str = typer.Option(None, "--started-before", metavar="YYYY-MM-DD",
                                       help="Tasks started before this day."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """Tasks of your workflows (OSMO's columns: user, workflow, task, status, pool, priority, node, start), or
    their requests added up (--summary, --aggregate-by-workflow)."""
    if user and all_users:
        raise CliError("give either --user or --all-users, not both", exit_code=2)
    if verbose and summary:
        raise CliError("give either --verbose or --summary, not both", exit_code=2)
    params: dict[str, Any] = {"status": list(status or TASK_DEFAULT_STATUSES), "limit": count, "offset": offset}
    if not (summary or by_workflow):
        params["order"] = order.value
    elif not summary:
        params["aggregate_by_workflow"] = "true"
    for key, values in (("pool", pool), ("node", node), ("user", user)):
        if values:
            params[key] = list(values)
    if workflow_id:
        params["workflow"] = workflow_id
    if priority:
        params["priority"] = list(priority)
    for key, value in (("started_after", started_after), ("started_before", started_before)):
        if value:
            params[key] = value
    if all_users:
        params["all_users"] = "true"
    with api_client() as api:
        answer = api.get("/api/tasks/summary/" if summary or by_workflow else "/api/tasks/", params=params)
    if wants_json(json_out, format_type):
        echo_json(answer)
        return
    items = results(answer)
    if summary or by_workflow:
        keys = [("USER", "user"), *([] if summary else [("WORKFLOW ID", "workflow_id")]), ("POOL", "pool"),
                ("PRIORITY", "priority")]
        empty, requests = ("There are no summaries to view." if summary else "There are no workflows to view."), True
    else:
        keys = [("USER", "user"), ("WORKFLOW ID", "workflow_id"), ("TASK", "task_name"), ("STATUS", "status"),
                ("POOL", "pool"), ("PRIORITY", "priority"), ("NODE", "node"), ("START TIME", "start_time")]
        empty, requests = "There are no tasks to view.", verbose
    if not items:
        typer.echo(empty)
        return
    headers = [name for name, _key in keys]
    rows = [[_cell(item, key) for _name, key in keys] for item in items]
    if requests:  # each row's requests, and a TOTAL row adding them up (OSMO's)
        headers += [name for name, _key, _fmt in REQUEST_COLUMNS]
        rows = [row + _requests(item) for row, item in zip(rows, items, strict=True)]
        sums = {key: sum(item.get(key) or 0 for item in items) for _name, key, _fmt in REQUEST_COLUMNS}
        rows.append(["TOTAL", *[""] * (len(keys) - 1), *_requests(sums)])
    echo_lines(render.table(headers, rows))
    total = answer.get("count") if isinstance(answer, dict) else None
    if isinstance(total, int) and total > offset + len(items):
        typer.echo(f"({offset + 1}-{offset + len(items)} of {total}; see more with --offset {offset + len(items)})")


#: A request's columns in OSMO's order (storage, CPU, memory, GPU): header, API key, format.
REQUEST_COLUMNS = (("STORAGE", "storage_bytes", render.fmt_bytes), ("CPU", "cpu_millis", render.fmt_cpu),
                   ("MEMORY", "memory_bytes", render.fmt_bytes), ("GPU", "gpu", render.fmt_int))


def _cell(item: dict[str, Any], key: str) -> Any:
    if key == "status":
        return render.status_style(str(item.get(key)))
    return render.fmt_time(item.get(key)) if key == "start_time" else item.get(key)


def _requests(item: dict[str, Any]) -> list[str]:
    return [fmt(item.get(key)) for _name, key, fmt in REQUEST_COLUMNS]


# ------------------------------------------------------------------------------------------------
# resource list / info
# ------------------------------------------------------------------------------------------------
RESOURCE_COLUMNS = (("GPU", "gpu", render.fmt_int), ("CPU", "cpu_millis", render.fmt_cpu),
                    ("MEMORY", "memory_bytes", render.fmt_bytes), ("STORAGE", "storage_bytes", render.fmt_bytes))
#: ``resource list``'s amounts in OSMO's order and units: header, API key, the API's units in one shown unit.
AMOUNT_COLUMNS = (("STORAGE [Gi]", "storage_bytes", 2**30), ("CPU [#]", "cpu_millis", 1000),
                  ("MEMORY [Gi]", "memory_bytes", 2**30), ("GPU [#]", "gpu", 1))


def _amounts(node: dict[str, Any], key: str, unit: int) -> tuple[int, int]:
    """``(taken, capacity)`` of one resource in whole units, as OSMO rounds them: what is taken (used outside
    the service and held by its tasks) up, the capacity down, and never more taken than there is."""
    capacity = ((node.get("capacity") or {}).get(key) or 0) // unit
    taken = ((node.get("used") or {}).get(key) or 0) + ((node.get("reserved") or {}).get(key) or 0)
    return min(-(-taken // unit), capacity), capacity


def _shown(amounts: tuple[int, int], mode: Mode) -> str:
    taken, capacity = amounts
    return str(capacity - taken) if mode is Mode.FREE else f"{taken}/{capacity}"


def _holders(node: dict[str, Any]) -> str:
    names = [str(item.get("workflow_id")) for item in node.get("workflows") or []]
    others = node.get("other_workflows") or 0
    if others:
        names.append(f"+{others} other{'s' if others != 1 else ''}")
    return ",".join(names)


def resource_rows(nodes: list[dict[str, Any]], mode: Mode) -> list[str]:
    """OSMO's resource table: a row per node and platform (the node's name, type, amounts and holders on its
    first), each amount ``taken/capacity`` or (``free``) what is left, and a TOTAL row counting each node once."""
    headers = ["NODE", "POOL", "PLATFORM", "TYPE", *(name for name, _key, _unit in AMOUNT_COLUMNS), "WORKFLOWS"]
    rows: list[list[Any]] = []
    sums = {key: [0, 0] for _name, key, _unit in AMOUNT_COLUMNS}
    for node in nodes:
        amounts = {key: _amounts(node, key, unit) for _name, key, unit in AMOUNT_COLUMNS}
        for key, (taken, capacity) in amounts.items():
            sums[key][0] += taken
            sums[key][1] += capacity
        for index, platform in enumerate(node.get("platforms") or [""]):
            first = index == 0
            rows.append([node.get("node") if first else "", node.get("pool"), platform,
                         node.get("resource_type") if first else "",
                         *((_shown(amount, mode) if first else "") for amount in amounts.values()),
                         _holders(node) if first else ""])
    rows.append(["TOTAL", "", "", "", *(_shown((taken, capacity), mode) for taken, capacity in sums.values()), ""])
    return render.table(headers, rows)


@resource_app.command("list", cls=ResourceListCommand)
def resource_list(
    pool: list[str] = typer.Option(None, "--pool", "-p", help="These pools (default: your profile's pool, "
                                   "else every pool you may use)."),
    platform: list[str] = typer.Option(None, "--platform", help="Only nodes of these platforms."),
    all_pools: bool = typer.Option(False, "--all", "-a", help="Every pool you may use."),
    mode: Mode = typer.Option(Mode.USED, "--mode", "-m", case_sensitive=False,
                              help="used: used/total per resource (default); free: what is free."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
    output: Output = OUTPUT_OPTION,
) -> None:
    """Nodes with storage, memory (Gi), CPU and GPU (used/total, or free), a row per platform, and the
    workflows holding them."""
    pools = [] if all_pools else list(pool or [])
    if not pools and not all_pools:
        default = os.environ.get(ENV_POOL) or config_read().get("default_pool")
        pools = [default] if default else []
    params: dict[str, Any] = {"pool": pools} if pools else {}
    if platform:
        params["platform"] = list(platform)
    with api_client() as api:
        nodes = list(api.get_all("/api/resources/", params=params))
    if wants_json(json_out, format_type, output):
        echo_json(nodes)
        return
    if not nodes:
        typer.echo("There are no resources to view.")
        return
    echo_lines(resource_rows(nodes, mode))


@resource_app.command("info")
def resource_info(
    node_name: str = typer.Argument(..., metavar="NODE", help="Name of the node."),
    pool: str = typer.Option(None, "--pool", "-p", help="Only in this pool."),
    platform: str = typer.Option(None, "--platform", "-pl", help="Only where it is a node of this platform."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """One node: its pools and platforms, labels, capacity, use and the workflows holding it."""
    with api_client() as api:
        params = {key: value for key, value in (("pool", pool), ("platform", platform)) if value}
        answer = api.get(f"/api/resources/{q(node_name)}/", params=params or None)
    if wants_json(json_out, format_type):
        echo_json(answer)
        return
    lines: list[str] = [f"Resource Name: {answer.get('node', node_name)}"]
    for node in answer.get("resources") or []:
        lines += ["", f"Pool: {node.get('pool')}   Platforms: {', '.join(node.get('platforms') or []) or '-'}   "
                      f"Type: {node.get('resource_type') or '-'}   "
                      f"Schedulable: {'yes' if node.get('schedulable') else 'no (cordoned)'}"]
        labels = node.get("labels") or {}
        if labels:
            lines.append("Labels: " + ", ".join(f"{key}={value}" for key, value in sorted(labels.items())))
        rows = [[name, *(fmt((node.get(part) or {}).get(key)) for part in ("capacity", "used", "reserved", "free"))]
                for name, key, fmt in RESOURCE_COLUMNS]
        lines += ["", *render.table(["RESOURCE", "CAPACITY", "USED OUTSIDE", "RESERVED", "FREE"], rows)]
        for config in node.get("platform_configs") or []:
            mounts = ", ".join(config.get("allowed_mounts") or []) or "-"
            lines += ["", f"Task configurations of platform {config.get('platform')}:",
                      f"  Host Network Allowed: {_yes(config.get('host_network'))}",
                      f"  Privileged Mode Allowed: {_yes(config.get('privileged'))}",
                      f"  Allowed Mounts: {mounts}"]
        holders = node.get("workflows") or []
        if holders or node.get("other_workflows"):
            lines += ["", *render.table(["WORKFLOW ID", "USER", "TASKS", "GPU"],
                                        [[h.get("workflow_id"), h.get("user"), h.get("tasks"), h.get("gpu")]
                                         for h in holders])]
            if node.get("other_workflows"):
                lines.append(f"(and {node['other_workflows']} workflow(s) of other users)")
        else:
            lines += ["", "No workflow holds it."]
    echo_lines(lines)


def _yes(value: Any) -> str:
    return "yes" if value else "no"


# ------------------------------------------------------------------------------------------------
# version
# ------------------------------------------------------------------------------------------------
def _version_fields(text: str) -> dict[str, Any]:
    """A version as OSMO's ``version -t json`` gives it (``major``, ``minor``, ``revision``), beside its text,
    in the shape of the service's ``/api/version/``."""
    from packaging.version import InvalidVersion, Version

    try:
        parsed = Version(text)
    except InvalidVersion:
        return {"version": text}
    return {"version": text, "major": parsed.major, "minor": parsed.minor, "revision": parsed.micro}


@app.command("version")
def version(json_out: bool = JSON_OPTION, format_type: FormatType = FORMAT_OPTION) -> None:
    """The client's version and the service's (a warning on stderr when they differ)."""
    service: dict[str, Any] | None = None
    problem = ""
    try:
        settings = settings_load()
        with Api(settings.url, settings.token) as api:
            service = api.get("/api/version/")
    except NotLoggedInError:
        problem = "not logged in: the service's version is unknown"
    except CliError as exc:
        problem = f"the service's version is unknown: {exc.message}"
    if wants_json(json_out, format_type):
        echo_json({"client": _version_fields(__version__), **({"service": service} if service else {})})
    else:
        typer.echo(f"OSMO client version:  {__version__}")
        if service:
            typer.echo(f"OSMO service version: {service.get('version')}")
    if problem:
        typer.echo(f"warning: {problem}", err=True)
    elif service and service.get("version") != __version__:
        typer.echo(f"warning: the client ({__version__}) and the service ({service.get('version')}) differ: "
                   "install the client of the service's version", err=True)
