"""Dry-run submissions: validation, constraint trees and a placement preview on the current snapshot.
Nothing is stored or reserved."""

from __future__ import annotations

from typing import Any

from osmo.types import Viewer
from scheduler.placement import solve
from scheduler.results import result_to_json
from scheduler.snapshot import snapshot_load
from workflows.scheduling.requests import group_request_from_spec
from workflows.services import workflow_validate
from workflows.spec import tree_to_json, tree_to_outline
from workflows.spec.model import ScalarValue


def workflow_dry_run(
    *, pool_name: str, spec: str | dict[str, Any], values: dict[str, ScalarValue] | None = None,
    env: dict[str, str] | None = None, user: Viewer | None = None,
) -> dict[str, Any]:
    submission = workflow_validate(pool_name=pool_name, spec=spec, values=values, env=env, user=user)
    snapshot = snapshot_load(submission.pool)
    groups = []
    for group in submission.spec.groups:
        result = solve(snapshot, group_request_from_spec(group))
        groups.append(
            {
                "name": group.name,
                "upstream": list(group.inputs),
                "constraint_tree": tree_to_json(group.tree),
                "constraint_outline": tree_to_outline(group.tree),
                "placement": result_to_json(result),
            }
        )
    # Groups are previewed independently on the same snapshot: a downstream group only starts after
    # its upstream groups finished and released their capacity.
    answer = {"valid": True, "workflow": submission.spec.name, "pool": submission.pool.name, "groups": groups}
    if submission.template_values or env:
        answer["spec"] = submission.spec_text
        answer["template_values"] = submission.template_values
    return answer
