"""Dry-run submissions: validation, constraint trees and a placement preview on the current snapshot.
Nothing is stored or reserved."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from osmo.types import Viewer
from scheduler.choices import PoolStatus
from scheduler.placement import Unplaceable, solve
from scheduler.reads.snapshot import snapshot_load
from scheduler.results import result_to_json
from scheduler.services.access import team_for_submission
from workflows.choices import PRIORITY_RANK, Priority
from workflows.scheduling.admission import LOW_RANK, Quotas, not_online_reason
from workflows.scheduling.cycle.read import platform_exclusions
from workflows.scheduling.pod.platform_nodes import platform_note, request_on_platforms, with_platform_note
from workflows.scheduling.requests import gang_request_from_spec
from workflows.services import workflow_validate
from workflows.spec import tree_to_json, tree_to_outline
from workflows.spec.model import ScalarValue
from workflows.waiting import preview_waiting_lines


@dataclass
class _Previewed:
    """The submission as the quota check reads a queued gang."""

    team_id: int | None
    rank: int


def _waits(reason: dict[str, Any]) -> dict[str, Any]:
    """A reason to wait, in the shape of a solver's ``placement`` (scheduler.results.result_to_json)."""
    return {"status": reason["status"], "code": reason["code"], "tasks": {}, "report": [], "reason": reason,
            "message": reason["message"]}


def workflow_dry_run(
    *, pool_name: str | None, spec: str | dict[str, Any], values: dict[str, ScalarValue] | None = None,
    env: dict[str, str] | None = None, user: Viewer | None = None, priority: str = Priority.NORMAL,
    team: str | None = None, labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """What a submission with these fields would meet now, storing nothing: the same refusals (spec,
    pool access and maintenance, team), then per group what the cycle would say first: the pool's
    status when it is not ONLINE, the team's quota for HIGH and NORMAL work, else a placement solved
    on the current snapshot."""
    submission = workflow_validate(pool_name=pool_name, spec=spec, values=values, env=env, user=user, labels=labels)
    pool = submission.pool
    chosen = team_for_submission(pool, user=user, team=team) if user is not None else None
    gang = _Previewed(chosen.pk if chosen else None, PRIORITY_RANK[Priority(priority)])
    quotas = Quotas.load(pool) if gang.rank < LOW_RANK and gang.team_id is not None else None
    snapshot = snapshot_load(pool) if pool.status == PoolStatus.ONLINE else None
    platforms = platform_exclusions(pool.pk) if snapshot is not None else {}
    groups: list[dict[str, Any]] = []
    for group in submission.spec.groups:
        request = request_on_platforms(gang_request_from_spec(group), platforms)
        over = quotas.over(gang, request) if quotas and gang.team_id in quotas.quota else None
        if snapshot is None:
            placement = _waits(not_online_reason(pool))
        elif over is not None:
            placement = _waits(over)
        else:
            outcome = solve(snapshot, request)
            placement = result_to_json(outcome)
            if isinstance(outcome, Unplaceable):
                placement = with_platform_note(placement, platform_note(request, platforms))
        groups.append(
            {
                "name": group.name,
                "upstream": list(group.inputs),
                "constraint_tree": tree_to_json(group.tree),
                "constraint_outline": tree_to_outline(group.tree),
                "placement": placement,
            }
        )
    for group_answer, lines in zip(groups, preview_waiting_lines(pool, [g["placement"] for g in groups], viewer=user),
                                   strict=True):
        group_answer["waiting_lines"] = lines
    # Groups are previewed independently on the same snapshot: a downstream group only starts after
    # its upstream groups finished and released their capacity.
    answer = {"valid": True, "workflow": submission.spec.name, "pool": pool.name, "pool_status": pool.status,
              "team": chosen.name if chosen else None, "groups": groups, "warnings": submission.warnings}
    if submission.template_values or env:
        answer["spec"] = submission.spec_text
        answer["template_values"] = submission.template_values
    return answer
