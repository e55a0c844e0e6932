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
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also each task's GPU, CPU, memory and storage."),
    priority: list[str] = typer.Option(None, "--priority", help="Only workflows of these priorities: LOW, NORMAL, "
                                       "HIGH (several: --priority LOW HIGH)."),
    started_after: str = typer.Option(None, "--started-after", metavar="YYYY-MM-DD",
                                      help="Tasks started on or after this day."),
    started_before: str = typer.Option(None, "--started-before", metavar="YYYY-MM-DD",
                                       help="Tasks started before this day."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """Tasks of your workflows (OSMO's columns: user, workflow, task, status, pool, priority, node, start)."""
    if user and all_users:
        raise CliError("give either --user or --all-users, not both", exit_code=2)
    params: dict[str, Any] = {"status": list(status or TASK_DEFAULT_STATUSES), "limit": count, "offset": offset,
                              "order": order.value}
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
        answer = api.get("/api/tasks/", params=params)
    if wants_json(json_out, format_type):
        echo_json(answer)
        return
    tasks = results(answer)
    if not tasks:
        typer.echo("There are no tasks to view.")
        return
    headers = ["USER", "WORKFLOW ID", "TASK", "STATUS", "POOL", "PRIORITY", "NODE", "START TIME"]
    if verbose:
        headers += ["GPU", "CPU", "MEMORY", "STORAGE"]
    rows = []
    for item in tasks:
        row = [item.get("user"), item.get("workflow_id"), item.get("task_name"),
               render.status_style(str(item.get("status"))), item.get("pool"), item.get("priority"),
               item.get("node"), render.fmt_time(item.get("start_time"))]
        if verbose:
            row += [render.fmt_int(item.get("gpu")), render.fmt_cpu(item.get("cpu_millis")),
                    render.fmt_bytes(item.get("memory_bytes")), render.fmt_bytes(item.get("storage_bytes"))]
        rows.append(row)
    echo_lines(render.table(headers, rows))
    total = answer.get("count") if isinstance(answer, dict) else None
    if isinstance(total, int) and total > offset + len(tasks):
        typer.echo(f"({offset + 1}-{offset + len(tasks)} of {total}; see more with --offset {offset + len(tasks)})")


# ------------------------------------------------------------------------------------------------
# resource list / info
# ------------------------------------------------------------------------------------------------
RESOURCE_COLUMNS = (("GPU", "gpu", render.fmt_int), ("CPU", "cpu_millis", render.fmt_cpu),
                    ("MEMORY", "memory_bytes", render.fmt_bytes), ("STORAGE", "storage_bytes", render.fmt_bytes))


def _amount(node: dict[str, Any], key: str, fmt: Any, mode: Mode) -> str:
    capacity = (node.get("capacity") or {}).get(key)
    if mode is Mode.FREE:
        return str(fmt(max((node.get("free") or {}).get(key) or 0, 0)))
    taken = ((node.get("used") or {}).get(key) or 0) + ((node.get("reserved") or {}).get(key) or 0)
    return f"{fmt(taken)}/{fmt(capacity)}"


def _holders(node: dict[str, Any]) -> str:
    names = [str(item.get("workflow_id")) for item in node.get("workflows") or []]
    others = node.get("other_workflows") or 0
    if others:
        names.append(f"+{others} other{'s' if others != 1 else ''}")
    return ",".join(names)


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
    """Nodes with GPU, CPU, memory and storage (used/total, or free) and the workflows holding them."""
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
    headers = ["NODE", "POOL", "PLATFORM", *(name for name, _key, _fmt in RESOURCE_COLUMNS), "WORKFLOWS"]
    rows = [[node.get("node"), node.get("pool"), ",".join(node.get("platforms") or []),
             *(_amount(node, key, fmt, mode) for _name, key, fmt in RESOURCE_COLUMNS), _holders(node)]
            for node in nodes]
    total: list[Any] = ["", "", ""]
    for _name, key, fmt in RESOURCE_COLUMNS:
        if mode is Mode.FREE:
            total.append(fmt(sum(max((n.get("free") or {}).get(key) or 0, 0) for n in nodes)))
        else:
            taken = sum(((n.get("used") or {}).get(key) or 0) + ((n.get("reserved") or {}).get(key) or 0)
                        for n in nodes)
            total.append(f"{fmt(taken)}/{fmt(sum((n.get('capacity') or {}).get(key) or 0 for n in nodes))}")
    echo_lines(render.table(headers, [*rows, ["TOTAL", *total[1:], ""]]))


@resource_app.command("info")
def resource_info(
    node_name: str = typer.Argument(..., metavar="NODE", help="Name of the node."),
    pool: str = typer.Option(None, "--pool", "-p", help="Only in this pool."),
    json_out: bool = JSON_OPTION,
    format_type: FormatType = FORMAT_OPTION,
) -> None:
    """One node: its pools and platforms, labels, capacity, use and the workflows holding it."""
    with api_client() as api:
        answer = api.get(f"/api/resources/{q(node_name)}/", params={"pool": pool} if pool else None)
    if wants_json(json_out, format_type):
        echo_json(answer)
        return
    lines: list[str] = [f"Resource Name: {answer.get('node', node_name)}"]
    for node in answer.get("resources") or []:
        lines += ["", f"Pool: {node.get('pool')}   Platforms: {', '.join(node.get('platforms') or []) or '-'}   "
                      f"Schedulable: {'yes' if node.get('schedulable') else 'no (cordoned)'}"]
        labels = node.get("labels") or {}
        if labels:
            lines.append("Labels: " + ", ".join(f"{key}={value}" for key, value in sorted(labels.items())))
        rows = [[name, *(fmt((node.get(part) or {}).get(key)) for part in ("capacity", "used", "reserved", "free"))]
                for name, key, fmt in RESOURCE_COLUMNS]
        lines += ["", *render.table(["RESOURCE", "CAPACITY", "USED OUTSIDE", "RESERVED", "FREE"], rows)]
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


# ------------------------------------------------------------------------------------------------
# version
# ------------------------------------------------------------------------------------------------
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
        echo_json({"client": {"version": __version__}, **({"service": service} if service else {})})
    else:
        typer.echo(f"OSMO client version:  {__version__}")
        if service:
            typer.echo(f"OSMO service version: {service.get('version')}")
    if problem:
        typer.echo(f"warning: {problem}", err=True)
    elif service and service.get("version") != __version__:
        typer.echo(f"warning: the client ({__version__}) and the service ({service.get('version')}) differ: "
                   "install the client of the service's version", err=True)
