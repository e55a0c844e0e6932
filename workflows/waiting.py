"""Why the queued gangs of a workflow wait (docs/design.md §11), in words shared by the API, the CLI
and the workflow page.

:func:`workflow_waiting` answers for every SCHEDULING group of one workflow in at most three
queries, whatever the number of groups: what is ahead of each in the pool's queue (one aggregate),
how many domains of each failing key exist (one aggregate), and the workflows holding each best
domain (one grouped query); one more when the pool has fair share on (the teams' recent usage,
which orders each priority: docs/design.md §9). :func:`waiting_lines` turns one answer into the
sentences all three show.

The solver's reason counts only domains with usable free room, so for a gang blocked by busy nodes
its message says "no rack exists"; here the pool's inventory says whether racks exist (and are
busy), are all cordoned, or really do not exist, and the reason is reworded accordingly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from django.db.models import Count, Q, Sum, TextField, Value
from django.db.models.functions import Concat
from django.utils import timezone

from osmo.types import Viewer
from scheduler.fairshare.usage import team_usage_by_id
from scheduler.models import Node, Pool, Reservation
from scheduler.selectors import label_text
from workflows.choices import PRIORITY_RANK, WAIT_ENDS, Priority, TaskStatus
from workflows.holders import held_by
from workflows.models import TaskGroup, Workflow
from workflows.visibility import workflow_owner_visible

HOLDERS_LIMIT = 10
ORDINALS = {1: "st", 2: "nd", 3: "rd"}


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else ORDINALS.get(n % 10, "th")
    return f"{n}{suffix}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _ahead(workflow: Workflow, groups: list[TaskGroup]) -> tuple[dict[int, dict[str, int]], dict[str, int] | None]:
    """Per group (``groups``: the workflow's queued ones): the queued gangs of the pool ahead of it,
    per priority (one query). Ahead are all gangs of higher priorities, those of the same priority
    submitted earlier, and the workflow's own queued gangs of lower position.

    With fair share on (the pool's ``fairshare_half_life``, docs/design.md §9), as the placement cycle
    orders them: of the same priority, the gangs of teams that used less of the pool recently, then
    those of teams that used as much submitted earlier (one more query: the teams' usage). The second
    value then says what fair share changed: ``behind``, gangs submitted later that go first (their
    teams used less), and ``ahead_of``, gangs submitted earlier that it goes before (theirs used more);
    None when fair share is off."""
    rank = PRIORITY_RANK.get(Priority(workflow.priority), 9)
    fair = workflow.pool.fairshare_half_life > 0
    earlier_q = Q(workflow__priority=workflow.priority) & (
        Q(workflow__submitted_at__lt=workflow.submitted_at)
        | Q(workflow__submitted_at=workflow.submitted_at, workflow_id__lt=workflow.pk))
    by = ["workflow__priority", "workflow__team_id"] if fair else ["workflow__priority"]
    rows = [(row[0], row[1], row[2], row[3] if fair else None) for row in
            TaskGroup.objects.filter(workflow__pool=workflow.pool_id, status=TaskStatus.SCHEDULING)
            .values(*by).order_by().annotate(n=Count("pk"), before=Count("pk", filter=earlier_q))
            .values_list("workflow__priority", "n", "before", *by[1:])]
    everything = {name: 0 for name in PRIORITY_RANK}
    for priority, count, _earlier, _team in rows:
        if priority in everything:
            everything[priority] += count
    moved: dict[str, int] | None = None
    if fair:
        usage = team_usage_by_id(workflow.pool, now=timezone.now())
        mine = usage.get(workflow.team_id, 0.0)
        earlier, moved = 0, {"behind": 0, "ahead_of": 0}
        for priority, count, before, team in rows:
            if priority != workflow.priority:
                continue
            used = usage.get(team, 0.0)
            if used < mine:  # all of them go first; those submitted later because of fair share
                earlier += count
                moved["behind"] += count - before
            elif used == mine:
                earlier += before
            else:
                moved["ahead_of"] += before
    else:
        earlier = sum(row[2] for row in rows)
    result = {}
    for group in groups:
        ahead = {str(name): (everything[name] if value < rank else 0) for name, value in PRIORITY_RANK.items()}
        ahead[str(workflow.priority)] = earlier + sum(1 for other in groups if other.position < group.position)
        result[group.pk] = ahead
    return result, moved


def _domain_counts(workflow: Workflow, keys: list[tuple[str, str]], levels: set[int]) -> dict[int, dict[str, int]]:
    """For each key level: how many domains of that key the pool's nodes form, and how many of them
    have a schedulable node (one query)."""
    if not levels:
        return {}
    aggregates: dict[str, Any] = {}
    for level in levels:
        labels = [label for _key, label in keys[: level + 1]]
        parts = [part for label in labels for part in (label_text(label, "labels"), Value("\x1f"))]
        path = Concat(*parts, output_field=TextField())
        labelled = Q(labels__has_keys=labels)
        aggregates[f"exist_{level}"] = Count(path, distinct=True, filter=labelled)
        aggregates[f"open_{level}"] = Count(path, distinct=True, filter=labelled & Q(schedulable=True))
    counts = Node.objects.filter(pool_id=workflow.pool_id).aggregate(**aggregates)
    return {level: {"exist": counts[f"exist_{level}"], "schedulable": counts[f"open_{level}"]} for level in levels}


def _holders(workflow: Workflow | Pool, keys: list[tuple[str, str]],
             best: dict[int, list[str]], viewer: Viewer | None = None) -> dict[int, list[dict]]:
    """Per group: the workflows holding capacity in its best domain (an empty path: anywhere in the
    pool), most GPUs first (one query); with a ``viewer``, those it may not see summed as one entry."""
    if not best:
        return {}
    depth = max(len(path) for path in best.values())  # 0 when every path is empty: no alias, one row per workflow
    aliases = {f"domain_value_{i}": label_text(label, "node__labels") for i, (_key, label) in enumerate(keys[:depth])}
    match = Q()
    if all(best.values()):  # an empty path (every domain) matches every reservation of the pool
        for path in {tuple(path) for path in best.values()}:
            match |= Q(**{f"domain_value_{i}": value for i, value in enumerate(path)})
    rows = (
        Reservation.objects.filter(pool_id=workflow.pk if isinstance(workflow, Pool) else workflow.pool_id,
                                   released_at__isnull=True)
        .annotate(**aliases)
        .filter(match)
        .order_by()
        # Per workflow by its global id: ids count per owner (docs/design.md §7, "Workflow ids").
        .values(*aliases, workflow_key=held_by("workflow__global_id"), workflow_shown=held_by("workflow__workflow_id"),
                **({"owner": held_by("workflow__submitted_by_id")} if viewer is not None else {}))
        .annotate(gpu=Sum("gpu"), tasks=Count("pk"))
    )
    return holders_ranked(rows, best, depth, viewer=viewer)


OTHERS_KEY = "\0others"  # the entry of the holders a viewer may not see (no global id looks like it)


def holders_ranked(rows: Iterable[Mapping[str, Any]], best: dict[int, list[str]],
                   depth: int, *, viewer: Viewer | None = None) -> dict[int, list[dict]]:
    """Per group of ``best``: the holders among ``rows`` (:func:`_holders`' query) of its path, most
    GPUs first. The rows are indexed by path once and each distinct path summed once: groups share
    their best domains (a dry run of 1,000 groups has a few), and matching every row for every group
    cost 0.9 s per 1,000 reservations at 1,000 groups."""
    lengths = {len(path) for path in best.values()}
    by_prefix: dict[tuple[Any, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        values = tuple(row[f"domain_value_{i}"] for i in range(depth))
        for length in lengths:
            by_prefix.setdefault(values[:length], []).append(row)
    ranked_by_path: dict[tuple[str, ...], list[dict]] = {}
    result: dict[int, list[dict]] = {}
    for group_pk, path in best.items():
        key = tuple(path)
        if key not in ranked_by_path:
            totals: dict[str, dict[str, Any]] = {}
            hidden: set[str] = set()
            for row in by_prefix.get(key, ()):
                if viewer is not None and not workflow_owner_visible(viewer, row["owner"]):
                    # the API hides other users' workflows from this viewer: so do the reasons it reads
                    hidden.add(row["workflow_key"])
                    entry = totals.setdefault(OTHERS_KEY, {"workflow": "", "gpu": 0, "tasks": 0})
                else:
                    entry = totals.setdefault(row["workflow_key"],
                                              {"workflow": row["workflow_shown"], "gpu": 0, "tasks": 0})
                entry["gpu"] += row["gpu"] or 0
                entry["tasks"] += row["tasks"]
            if OTHERS_KEY in totals:
                totals[OTHERS_KEY]["workflow"] = _plural(len(hidden), "workflow") + " of other users"
            ranked_by_path[key] = sorted(totals.values(), key=lambda e: (-e["gpu"], e["workflow"]))[:HOLDERS_LIMIT]
        result[group_pk] = [dict(entry) for entry in ranked_by_path[key]]
    return result


def workflow_waiting(workflow: Workflow, keys: list[tuple[str, str]] | None = None, *,
                     viewer: Viewer | None = None) -> dict[int, dict[str, Any]]:
    """Why each SCHEDULING group of ``workflow`` waits, by group pk (see the module docstring).

    ``workflow`` comes from :func:`workflows.selectors.workflow_detail_queryset` (groups and pool keys
    prefetched; ``keys``, the pool's (key, label) pairs coarsest first, when the caller has read them).
    Each answer: ``position``, ``ahead`` ({"HIGH", "NORMAL", "LOW"}), ``domain`` ({"key", "path"} of the
    failing constraint's best domain, or None), ``holders`` ([{"workflow", "gpu", "tasks"}], at most
    10), ``domains`` ({"key", "exist", "schedulable"} or None), ``reason`` (the reason reworded against
    the inventory) and ``lines`` (the sentences to show). With a ``viewer``, the holders it may not see
    (:func:`workflows.selectors.workflow_owner_visible`) are one entry, "N workflows of other users"."""
    groups = [group for group in workflow.groups_in_order if group.status == TaskStatus.SCHEDULING]
    if not groups:
        return {}
    if keys is None:
        keys = [(key.key, key.label) for key in sorted(workflow.pool.topology_keys.all(), key=lambda k: k.position)]
    level_of = {key: index for index, (key, _label) in enumerate(keys)}
    details = {group.pk: ((group.unschedulable_reason or {}).get("reason") or {}) for group in groups}
    best: dict[int, list[str]] = {}
    levels: dict[int, int] = {}
    for group in groups:
        detail = details[group.pk]
        key = detail.get("key")
        path = (detail.get("best_domain") or {}).get("path")
        if key in level_of:
            levels[group.pk] = level_of[key]
            if (detail.get("best_domain") or {}).get("fits") == 0:
                best[group.pk] = []  # no domain has room for a task: every one comes as close, name all holders
            elif path:
                best[group.pk] = [str(value) for value in path]
    ahead, moved = _ahead(workflow, groups)
    counts = _domain_counts(workflow, keys, set(levels.values()))
    holders = _holders(workflow, keys, best, viewer)
    answers = {}
    for group in groups:
        detail = details[group.pk]
        level = levels.get(group.pk)
        domains = {"key": keys[level][0], **counts[level]} if level is not None else None
        answer: dict[str, Any] = {
            "position": sum(ahead[group.pk].values()) + 1,
            "ahead": ahead[group.pk],
            "fairshare": moved,
            "domain": {"key": detail.get("key"), "path": best[group.pk]} if group.pk in best else None,
            "holders": holders.get(group.pk, []),
            "domains": domains,
            "reason": reason_reworded(group.unschedulable_reason, domains),
        }
        answer["lines"] = waiting_lines(answer, best_fits=(detail.get("best_domain") or {}).get("fits"),
                                        needed=detail.get("tasks_needed"),
                                        code=(group.unschedulable_reason or {}).get("code"))
        answers[group.pk] = answer
    return answers


def preview_waiting_lines(pool: Pool, placements: list[dict[str, Any]], *,
                          viewer: Viewer | None = None) -> list[list[str]]:
    """For each of a dry run's groups that cannot be placed now: who holds the capacity it needs, in the
    words of :func:`waiting_lines` (without the queue line). Empty for a group that is placed, or whose
    reason names no domain of a topology key. Two queries for all the groups (the pool's keys, the
    holders of every group's best domain): a query per group made a dry run of 1,000 waiting groups
    2,000 queries and 2.7 s."""
    keys = [(key.key, key.label) for key in sorted(pool.topology_keys.all(), key=lambda k: k.position)]
    best: dict[int, list[str]] = {}
    for index, placement in enumerate(placements):
        detail = placement.get("reason") or {}
        fits = (detail.get("best_domain") or {}).get("fits")
        path = [str(value) for value in (detail.get("best_domain") or {}).get("path") or []]
        if fits == 0:
            path = []  # no domain has room for a task: every one comes as close, name all holders
        elif not path:
            continue
        if placement.get("status") != "unschedulable" or detail.get("key") not in dict(keys):
            continue
        best[index] = path
    holders = _holders(pool, keys, best, viewer)
    lines: list[list[str]] = []
    for index, placement in enumerate(placements):
        if index not in best:
            lines.append([])
            continue
        detail = placement.get("reason") or {}
        answer = {"ahead": {}, "position": 1, "domain": {"key": detail["key"], "path": best[index]},
                  "holders": holders[index]}
        lines.append(waiting_lines(answer, best_fits=(detail.get("best_domain") or {}).get("fits"),
                                   needed=detail.get("tasks_needed"))[1:])
    return lines


def reason_reworded(reason: dict[str, Any] | None, domains: dict[str, Any] | None) -> str:
    """The stored reason's message, said against the pool's inventory: which domains of the key exist
    but are busy (or all cordoned), and when the pool's nodes really form none."""
    if not reason:
        return ""
    message = str(reason.get("message") or (reason.get("reason") or {}).get("message") or "")
    if domains is None:
        return message
    key, exist, schedulable = domains["key"], domains["exist"], domains["schedulable"]
    if exist == 0:
        words = f"no {key} exists in this pool (no node has the {key} label and those of the keys above it)"
    elif schedulable == 0:
        words = f"every {key} is cordoned ({_plural(exist, key)} exist, none has a schedulable node)"
    else:
        words = f"every {key} is busy ({_plural(exist, key)} exist, none has room for any of these tasks now)"
    said = f"no {key} exists"
    if said in message:
        return message.replace(said, words)
    nothing = re.search(rf"the largest free {re.escape(key)} fits 0 of \d+", message)
    if nothing:
        return message.replace(nothing.group(0), words)
    some = re.search(rf"(the largest free|the best) {re.escape(key)} (fits|has room for) \d+ of \d+", message)
    if some:
        return message.replace(some.group(0), f"{some.group(0)} (of the {_plural(exist, key)} in this pool)")
    return message


def waiting_lines(answer: dict[str, Any], *, best_fits: Any = None, needed: Any = None,
                  code: str | None = None) -> list[str]:
    """The sentences the API (``waiting.lines``), ``osmo workflow query`` and the workflow page show."""
    ahead = answer["ahead"]
    position = answer["position"]
    if position == 1:
        lines = ["Queue: first in the pool's queue; nothing is ahead of it."]
    else:
        parts = ", ".join(f"{ahead[name]} {name}" for name in ("HIGH", "NORMAL", "LOW") if ahead.get(name))
        lines = [f"Queue: {_ordinal(position)} in the pool's queue; ahead of it: {parts}."]
    moved = answer.get("fairshare") or {}
    said = []
    if moved.get("behind"):
        said.append(f"behind {_plural(moved['behind'], 'gang')} submitted after it by teams that used less of "
                    "the pool recently")
    if moved.get("ahead_of"):
        said.append(f"ahead of {_plural(moved['ahead_of'], 'gang')} submitted before it by teams that used more")
    if said:
        lines.append(f"Fair share: {'; '.join(said)}.")
    if answer.get("reason"):
        lines.append(f"Why: {answer['reason']}")
    domain = answer.get("domain")
    if domain and not domain["path"] and answer.get("holders"):
        held = ", ".join(f"{h['workflow']} ({_plural(h['gpu'], 'GPU')}, {_plural(h['tasks'], 'task')})"
                         for h in answer["holders"])
        lines.append(f"No {domain['key']} has room for any of these tasks now; the {domain['key']}s are held by: "
                     f"{held}.")
        lines.append("It can start when enough of these finish (or a gang ahead of it is placed elsewhere).")
    elif domain and not domain["path"]:
        lines.append(f"No {domain['key']} has room for any of these tasks now, and nothing of this service runs "
                     "there (usage outside it, or cordoned nodes).")
    elif domain:
        where = f"{domain['key']} {'/'.join(domain['path'])}"
        room = f" (fits {best_fits} of {needed} tasks)" if best_fits is not None and needed is not None else ""
        holders = answer.get("holders") or []
        if holders:
            held = ", ".join(f"{h['workflow']} ({_plural(h['gpu'], 'GPU')}, {_plural(h['tasks'], 'task')})"
                             for h in holders)
            lines.append(f"Best {where}{room} is held by: {held}.")
            lines.append("It can start when enough of these finish (or a gang ahead of it is placed elsewhere).")
        else:
            lines.append(f"Best {where}{room}: nothing of this service runs there (usage outside it, or "
                         "cordoned nodes).")
    elif answer.get("reason"):
        lines.append(WAIT_ENDS.get(code or "", "It stays queued and is placed as soon as capacity frees up."))
    return lines
