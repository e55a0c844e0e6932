"""Plain-text views of API answers. Pure functions from JSON to lines: easy to test, no terminal tricks.

Tolerant by design: unknown fields are ignored and missing ones shown as ``-``, so a server that
grows its answers does not break the client.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import typer

from parsing.natural import natural_key  # the one natural order, shared with the pages

TERMINAL_WORKFLOW = {"COMPLETED", "FAILED", "FAILED_CANCELED", "FAILED_BACKEND_ERROR", "FAILED_QUEUE_TIMEOUT",
                     "FAILED_UPSTREAM", "FAILED_SERVER_ERROR", "FAILED_PREEMPTED", "FAILED_EVICTED",
                     "FAILED_IMAGE_PULL", "FAILED_START_ERROR", "FAILED_START_TIMEOUT", "FAILED_EXEC_TIMEOUT"}
DASH = "-"


# ------------------------------------------------------------------------------------------------
# Values
# ------------------------------------------------------------------------------------------------
def status_style(status: str) -> str:
    """A status coloured for terminals (typer.echo strips the colour when output is not a terminal)."""
    if status == "COMPLETED":
        return typer.style(status, fg="green")
    if status.startswith("FAILED"):
        return typer.style(status, fg="red", bold=True)
    if status in ("RUNNING", "INITIALIZING"):
        return typer.style(status, fg="blue")
    if status in ("SCHEDULING", "RESCHEDULED"):
        return typer.style(status, fg="yellow")
    return status


def fmt_time(value: Any) -> str:
    """An API timestamp in local time, to the second."""
    if not value:
        return DASH
    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return str(value)
    if moment.tzinfo is not None:
        moment = moment.astimezone()
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def fmt_duration(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


QUEUED_AGAIN = ("PENDING", "WAITING", "SCHEDULING")


def span(start: Any, end: Any, status: Any = None) -> str:
    """``started -> finished (duration)`` for an object's status times; one that started and is queued
    again (a LOW gang preempted) says so instead of "running"."""
    if not start:
        return DASH
    text = fmt_time(start)
    if end:
        try:
            seconds = (datetime.fromisoformat(str(end).replace("Z", "+00:00"))
                       - datetime.fromisoformat(str(start).replace("Z", "+00:00"))).total_seconds()
            return f"{text} -> {fmt_time(end)} ({fmt_duration(seconds)})"
        except ValueError:
            return f"{text} -> {fmt_time(end)}"
    return f"{text} -> (queued again)" if status in QUEUED_AGAIN else f"{text} -> (running)"


def fmt_bytes(value: Any) -> str:
    """Bytes as a Kubernetes-style binary quantity: 960Gi, 4Ti, 512Mi."""
    if not isinstance(value, (int, float)):
        return DASH
    amount = float(value)
    for unit in ("", "Ki", "Mi", "Gi", "Ti", "Pi"):
        if abs(amount) < 1024 or unit == "Pi":
            text = f"{amount:.1f}".rstrip("0").rstrip(".")
            return f"{text}{unit}"
        amount /= 1024
    return str(value)  # pragma: no cover


def fmt_cpu(millis: Any) -> str:
    if not isinstance(millis, (int, float)):
        return DASH
    cores = millis / 1000
    return f"{cores:g}"


def fmt_int(value: Any) -> str:
    return str(value) if isinstance(value, (int, float)) else DASH


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], indent: str = "") -> list[str]:
    """Left-aligned columns separated by two spaces; the last column is not padded."""
    body = [[DASH if cell is None or cell == "" else str(cell) for cell in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in body:
        for index, cell in enumerate(row):
            widths[index] = max(widths[index], len(cell))

    def line(cells: Sequence[str]) -> str:
        padded = [cell.ljust(widths[i]) if i < len(cells) - 1 else cell for i, cell in enumerate(cells)]
        return (indent + "  ".join(padded)).rstrip()

    return [line(list(headers)), *(line(row) for row in body)]


def domains_text(domains: Any) -> str:
    if not isinstance(domains, dict) or not domains:
        return DASH
    return " ".join(f"{key}={value if value is not None else '?'}" for key, value in domains.items())


# ------------------------------------------------------------------------------------------------
# Constraint trees and placements
# ------------------------------------------------------------------------------------------------
def _node_label(node: dict[str, Any]) -> str:
    label = f"{node.get('key', '?')}={node.get('group', '?')} ({node.get('requirement', 'required')})"
    tasks = sorted(map(str, node.get("tasks") or []), key=natural_key)  # trees stored before were in string order
    return f"{label}: {', '.join(tasks)}" if tasks else label


def tree_outline(tree: Any, *, name: str = "") -> list[str]:
    """The same outline the server's ``tree_to_outline`` writes, from the tree's JSON form."""
    if not isinstance(tree, dict) or not tree:
        return [name or DASH]
    lines = [str(tree.get("group") or name or DASH)]
    entries: list[Any] = []
    if tree.get("tasks"):
        entries.append(f"(no topology): {', '.join(sorted(map(str, tree['tasks']), key=natural_key))}")
    entries.extend(tree.get("children") or [])

    def emit(items: Sequence[Any], prefix: str) -> None:
        for index, item in enumerate(items):
            last = index == len(items) - 1
            branch = "└─ " if last else "├─ "
            if isinstance(item, str):
                lines.append(f"{prefix}{branch}{item}")
                continue
            lines.append(f"{prefix}{branch}{_node_label(item)}")
            emit(item.get("children") or [], prefix + ("   " if last else "│  "))

    emit(entries, "")
    return lines


def report_lines(report: Any, indent: str = "") -> list[str]:
    """Per constraint node: where it was met (a preferred one may be met at a coarser level, or not)."""
    if not isinstance(report, list) or not report:
        return []
    rows = []
    for item in report:
        if not isinstance(item, dict):
            continue
        requirement = item.get("requirement", "required")
        key = item.get("key", "?")
        met_key = item.get("met_key")
        if item.get("met"):
            outcome = "met"
        elif met_key:
            outcome = f"met at {met_key} (not at {key})"
        else:
            outcome = "not met (spread over several domains)"
        used = ["/".join(str(v) for v in domain if v is not None) for domain in item.get("domains") or []]
        rows.append([item.get("display_name") or DASH, key, requirement, outcome, ", ".join(used) or DASH])
    return table(["CONSTRAINT", "KEY", "TYPE", "RESULT", "DOMAINS"], rows, indent=indent)


def reason_message(reason: Any) -> str:
    """The one-line explanation of an unschedulable/undecided reason (dict with "message"), or ``""``."""
    if not reason:
        return ""
    if isinstance(reason, dict):
        message = reason.get("message") or reason.get("detail") or ""
        if not message and isinstance(reason.get("reason"), dict):
            message = reason["reason"].get("message", "")
        status = reason.get("status")
        text = str(message or reason.get("code") or "")
        return f"{status}: {text}" if status and text and not text.startswith(str(status)) else text
    return str(reason)


def waiting_reason(reason: Any) -> str:
    """:func:`reason_message` after a "waiting:" label (a reason of status ``waiting``, such as a pool
    that is not ONLINE, would say "waiting: waiting: ...")."""
    return reason_message(reason).removeprefix("waiting: ")


def dry_run_lines(answer: dict[str, Any], *, pool: str) -> list[str]:
    groups = answer.get("groups") or []
    name = answer.get("workflow")
    what = f"workflow {name}" if name else "the spec"
    lines = [f"Dry run: {what} is valid for pool {answer.get('pool') or pool}; nothing was submitted.",
             f"{len(groups)} group(s); placement previewed on the pool's current free capacity."]
    if answer.get("team"):
        lines.append(f"It would count against team {answer['team']}'s quota.")
    if answer.get("pool_status") not in (None, "ONLINE"):
        lines.append(f"Pool {answer.get('pool') or pool} is {answer['pool_status']}: nothing is placed there now.")
    for group in groups:
        lines.append("")
        upstream = group.get("upstream") or []
        after = f" (after {', '.join(upstream)})" if upstream else ""
        lines.append(f"Group {group.get('name', '?')}{after}")
        lines.append("  Constraint tree:")
        outline = group.get("constraint_outline")
        tree = outline.splitlines() if isinstance(outline, str) and outline else tree_outline(
            group.get("constraint_tree"), name=str(group.get("name", "")))
        lines.extend(f"    {line}" for line in tree)
        placement = group.get("placement") or {}
        status = str(placement.get("status", "?"))
        message = placement.get("message")
        tasks = placement.get("tasks") or {}
        if status == "placed":
            lines.append(f"  Placement preview: {message or status}")
            lines.extend(table(["TASK", "NODE"], sorted(tasks.items(), key=lambda kv: natural_key(kv[0])),
                               indent="    "))
            report = report_lines(placement.get("report"), indent="    ")
            if report:
                lines.append("  Constraints:")
                lines.extend(report)
        else:
            lines.append(f"  Placement preview: {status}")
            lines.append(f"    {message or reason_message(placement.get('reason')) or 'cannot place now'}")
            lines.extend(f"    {line}" for line in group.get("waiting_lines") or [])
            if upstream:
                lines.append("    (previewed on today's capacity; it only starts after its upstream groups)")
    return lines


# ------------------------------------------------------------------------------------------------
# Workflows
# ------------------------------------------------------------------------------------------------
def workflow_rows(items: list[dict[str, Any]], *, wide: bool = False) -> list[str]:
    rows = [
        [w.get("id"), w.get("status"), w.get("pool"), w.get("priority"), w.get("submitted_by"),
         fmt_int(w.get("task_count")), fmt_time(w.get("submitted_at"))]
        + ([fmt_time(w.get("started_at")), fmt_time(w.get("finished_at")), labels_text(w.get("labels")),
            ", ".join(w.get("tags") or []) or DASH, w.get("failure_message")] if wide else [])
        for w in items
    ]
    headers = ["ID", "STATUS", "POOL", "PRIORITY", "USER", "TASKS", "SUBMITTED"]
    return table(headers + (["STARTED", "FINISHED", "LABELS", "TAGS", "FAILURE"] if wide else []), rows)


def labels_text(labels: Any) -> str:
    """``key=value, ...`` sorted by key, or a dash (OSMO's list column)."""
    if not isinstance(labels, dict) or not labels:
        return DASH
    return ", ".join(f"{key}={value}" for key, value in sorted(labels.items()))


def node_text(task: dict[str, Any]) -> Any:
    """The task's node: its name, ``"a1 (removed)"`` once the node was deleted."""
    return f"{task['node']} (removed)" if task.get("node") and task.get("node_removed") else task.get("node")


def task_rows(tasks: list[dict[str, Any]], indent: str = "") -> list[str]:
    rows = []
    for task in sorted(tasks, key=lambda t: natural_key(t.get("name"))):
        name = f"{task.get('name', '?')}{' (lead)' if task.get('lead') else ''}"
        rows.append([name, task.get("status"), node_text(task), domains_text(task.get("domains")),
                     span(task.get("started_at"), task.get("finished_at"), task.get("status"))])
    return table(["TASK", "STATUS", "NODE", "DOMAINS", "RAN"], rows, indent=indent)


def workflow_lines(workflow: dict[str, Any]) -> list[str]:
    status = str(workflow.get("status", "?"))
    lines = [
        f"Workflow {workflow.get('id', '?')}  {status_style(status)}",
        f"  pool {workflow.get('pool', DASH)} · priority {workflow.get('priority', DASH)}"
        f" · submitted by {workflow.get('submitted_by', DASH)}",
        f"  submitted {fmt_time(workflow.get('submitted_at'))}",
        f"  ran       {span(workflow.get('started_at'), workflow.get('finished_at'), workflow.get('status'))}",
    ]
    if workflow.get("failure_message"):
        lines.append(f"  failure: {workflow['failure_message']}")
    if workflow.get("labels"):
        lines.append(f"  labels: {domains_text(workflow['labels'])}")
    if workflow.get("tags"):
        lines.append(f"  tags: {', '.join(workflow['tags'])}")
    app = workflow.get("app")
    if isinstance(app, dict):
        lines.append(f"  app {app.get('name')} version {app.get('version')}")
    for group in workflow.get("groups") or []:
        lines.append("")
        lines.extend(group_lines(group))
    history = workflow.get("history") or []
    if history:
        lines.append("")
        lines.append("History:")
        rows = [[fmt_time(h.get("at")), h.get("subject"), f"{h.get('from_status') or DASH} -> {h.get('to_status')}",
                 h.get("message") or ""] for h in history]
        lines.extend(table(["TIME", "SUBJECT", "CHANGE", "MESSAGE"], rows, indent="  "))
    return lines


def group_lines(group: dict[str, Any]) -> list[str]:
    status = str(group.get("status", "?"))
    upstream = group.get("upstream") or []
    after = f"  (after {', '.join(upstream)})" if upstream else ""
    lines = [f"Group {group.get('name', '?')}  {status_style(status)}{after}",
             f"  ran {span(group.get('started_at'), group.get('finished_at'), group.get('status'))}"]
    if group.get("preemptions"):
        lines.append(f"  preempted {group['preemptions']} time(s): a LOW gang restarts whole when higher-priority "
                     "work needs its GPUs")
    if group.get("retries"):
        lines.append(f"  retried {group['retries']} time(s): rescheduled by an exit action or after the "
                     "infrastructure lost one of its pods (the pool's max_retries bounds it)")
    if group.get("requeues"):
        lines.append(f"  queued again {group['requeues']} time(s): the cluster refused to schedule its pods on "
                     "the nodes chosen")
    waiting = group.get("waiting") if isinstance(group.get("waiting"), dict) else None
    reason = waiting_reason(group.get("unschedulable_reason"))
    if waiting and waiting.get("lines"):
        lines.append("  Waiting:")
        lines.extend(f"    {line}" for line in waiting["lines"])
    elif reason and status in ("SCHEDULING", "WAITING"):
        lines.append(f"  waiting: {reason}")
    if group.get("failure_message"):
        lines.append(f"  failure: {group['failure_message']}")
    lines.append("  Constraint tree:")
    lines.extend(f"    {line}" for line in tree_outline(group.get("constraint_tree"), name=str(group.get("name"))))
    lines.extend(task_rows(group.get("tasks") or [], indent="  "))
    report = report_lines(group.get("placement_report"), indent="    ")
    if report:
        lines.append("  Constraints:")
        lines.extend(report)
    return lines


def placement_lines(workflow: dict[str, Any]) -> list[str]:
    """Final placement: task -> node with domains, per group."""
    lines = []
    for group in workflow.get("groups") or []:
        tasks = sorted(group.get("tasks") or [], key=lambda t: natural_key(t.get("name")))
        rows = [[t.get("name"), node_text(t), domains_text(t.get("domains")), t.get("status")] for t in tasks]
        lines.append(f"Group {group.get('name', '?')}  {status_style(str(group.get('status', '?')))}")
        lines.extend(table(["TASK", "NODE", "DOMAINS", "STATUS"], rows, indent="  "))
        if group.get("failure_message"):
            lines.append(f"  failure: {group['failure_message']}")
    return lines


# ------------------------------------------------------------------------------------------------
# Pools
# ------------------------------------------------------------------------------------------------
def _gpu(totals: Any, part: str) -> Any:
    if not isinstance(totals, dict) or not isinstance(totals.get(part), dict):
        return None
    return totals[part].get("gpu")


def gpu_in_use(totals: Any) -> Any:
    """GPUs in use: reserved by this service's tasks plus used outside it."""
    reserved, used = _gpu(totals, "reserved"), _gpu(totals, "used")
    if reserved is None and used is None:
        return None
    return (reserved or 0) + (used or 0)


def keys_text(pool: dict[str, Any]) -> str:
    keys = sorted((k for k in pool.get("topology_keys") or [] if isinstance(k, dict)),
                  key=lambda k: k.get("position", 0))
    return " > ".join(str(k.get("key")) for k in keys) or DASH


def pool_rows(pools: list[dict[str, Any]]) -> list[str]:
    rows = []
    for pool in sorted(pools, key=lambda p: natural_key(p.get("name"))):
        totals = pool.get("totals") or {}
        rows.append([pool.get("name"), pool.get("status", DASH), keys_text(pool), fmt_int(totals.get("node_count")),
                     fmt_int(_gpu(totals, "capacity")), fmt_int(gpu_in_use(totals)), fmt_int(_gpu(totals, "free")),
                     quotas_text(pool.get("quotas")), backend_text(pool), pool.get("description")])
    return table(["NAME", "STATUS", "KEYS", "NODES", "GPUS", "USED", "FREE", "QUOTAS", "BACKEND", "DESCRIPTION"],
                 rows)


def backend_text(pool: dict[str, Any]) -> str:
    """The pool's backend, with its status when it is not ONLINE (its pools place nothing then)."""
    name = str(pool.get("backend") or DASH)
    status = pool.get("backend_status")
    return f"{name} ({status})" if status and status != "ONLINE" else name


def backend_rows(backends: list[dict[str, Any]]) -> list[str]:
    """``osmo backend list``: OSMO's name, description and status, with kind, last contact, pools and nodes."""
    rows = []
    for backend in sorted(backends, key=lambda b: natural_key(b.get("name"))):
        status = str(backend.get("status") or DASH)
        if status == "OFFLINE" and backend.get("offline_since"):
            status = f"OFFLINE since {backend['offline_since']}"
        rows.append([backend.get("name"), backend.get("kind"), status, backend.get("last_contact") or "never",
                     ", ".join(backend.get("pools") or []) or DASH, fmt_int(backend.get("nodes")),
                     backend.get("description")])
    lines = table(["NAME", "KIND", "STATUS", "LAST CONTACT", "POOLS", "NODES", "DESCRIPTION"], rows)
    for backend in backends:
        if backend.get("status") == "OFFLINE" and backend.get("last_error"):
            lines.append(f"{backend.get('name')}: {str(backend['last_error']).splitlines()[0]}")
        if backend.get("permission_error"):
            lines.append(f"{backend.get('name')}: refused: {str(backend['permission_error']).splitlines()[0]}")
    return lines


def quotas_text(quotas: Any) -> str:
    """``team used/quota`` per team with a quota (HIGH and NORMAL GPUs held against it), ``+N low``
    when the team also holds LOW GPUs; DASH when the pool has no quota."""
    parts = []
    for row in quotas or []:
        if not isinstance(row, dict) or row.get("quota_gpu") is None:
            continue
        low = f" +{row['low_gpu']} low" if row.get("low_gpu") else ""
        parts.append(f"{row.get('team')} {row.get('used_gpu', 0)}/{row['quota_gpu']}{low}")
    return ", ".join(parts) or DASH


RESOURCES = [("gpu", "gpu", fmt_int), ("cpu (cores)", "cpu_millis", fmt_cpu),
             ("memory", "memory_bytes", fmt_bytes), ("storage", "storage_bytes", fmt_bytes)]


def pool_lines(pool: dict[str, Any]) -> list[str]:
    totals = pool.get("totals") or {}
    lines = [f"Pool {pool.get('name', '?')}"]
    if pool.get("description"):
        lines.append(f"  {pool['description']}")
    lines.append(f"  status {pool.get('status', DASH)} · backend {pool.get('backend', DASH)} · nodes "
                 f"{fmt_int(totals.get('node_count'))} ({fmt_int(totals.get('schedulable_node_count'))} schedulable)")
    lines.append("")
    lines.append("Topology keys (coarsest first):")
    keys = sorted((k for k in pool.get("topology_keys") or [] if isinstance(k, dict)),
                  key=lambda k: k.get("position", 0))
    lines.extend(table(["#", "KEY", "NODE LABEL"], [[k.get("position"), k.get("key"), k.get("label")] for k in keys],
                       indent="  "))
    lines.append("")
    lines.append("Capacity:")
    rows = []
    for title, field, fmt in RESOURCES:
        part = {name: (totals.get(name) or {}).get(field) for name in ("capacity", "reserved", "used", "free")}
        rows.append([title, fmt(part["capacity"]), fmt(part["reserved"]), fmt(part["used"]), fmt(part["free"])])
    lines.extend(table(["RESOURCE", "CAPACITY", "RESERVED", "EXTERNAL", "FREE"], rows, indent="  "))
    lines.append("  (RESERVED: held by workflows; EXTERNAL: used outside this service; FREE: what placement can use)")
    quotas = [row for row in pool.get("quotas") or [] if isinstance(row, dict)]
    if quotas:
        lines.append("")
        lines.append("Teams (GPUs):")
        lines.extend(table(["TEAM", "QUOTA", "HIGH+NORMAL", "LOW (PREEMPTIBLE)"],
                           [[row.get("team") or "(no team)", DASH if row.get("quota_gpu") is None
                             else fmt_int(row.get("quota_gpu")), fmt_int(row.get("used_gpu")),
                             fmt_int(row.get("low_gpu"))] for row in quotas], indent="  "))
    for key in pool.get("domains") or []:
        if not isinstance(key, dict):
            continue
        domains = key.get("domains") or []
        lines.append("")
        lines.append(f"Domains of {key.get('key', '?')} ({fmt_int(key.get('domain_count', len(domains)))}):")
        rows = []
        for domain in domains:
            path = domain.get("path") or {}
            name = "/".join(str(v) for v in path.values()) if isinstance(path, dict) and path else domain.get("value")
            rows.append([name, fmt_int(domain.get("node_count")), fmt_int(_gpu(domain, "capacity")),
                         fmt_int(gpu_in_use(domain)), fmt_int(_gpu(domain, "free"))])
        unlabelled = key.get("unlabelled") or {}
        if unlabelled.get("node_count"):
            rows.append(["(unlabelled)", fmt_int(unlabelled.get("node_count")), fmt_int(_gpu(unlabelled, "capacity")),
                         fmt_int(gpu_in_use(unlabelled)), fmt_int(_gpu(unlabelled, "free"))])
        lines.extend(table(["DOMAIN", "NODES", "GPUS", "USED", "FREE"], rows, indent="  "))
    return lines


def node_rows(nodes: list[dict[str, Any]]) -> list[str]:
    rows = []
    for node in nodes:
        rows.append([node.get("name"), domains_text(node.get("domains")), fmt_int(_gpu(node, "capacity")),
                     fmt_int(gpu_in_use(node)), fmt_int(_gpu(node, "free")),
                     "yes" if node.get("schedulable", True) else "no (cordoned)"])
    return table(["NODE", "DOMAINS", "GPUS", "USED", "FREE", "SCHEDULABLE"], rows)
