"""The submit page: the example specs, spec errors with their YAML lines, and the dry run's groups
with the domain values of every planned node."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from osmo.types import Viewer
from pages.forms import yaml_lines_for_paths
from parsing.errors import errors_collapse
from parsing.natural import natural_sorted
from scheduler.selectors import node_labels_by_name, pool_get, pool_keys
from workflows.preview import workflow_dry_run

EXAMPLES_DIR = Path(settings.BASE_DIR) / "examples"


def submit_examples() -> list[str]:
    """The names of the example specs the page can load into its editor."""
    return natural_sorted(path.stem for path in EXAMPLES_DIR.glob("*.yaml"))


def submit_example_text(name: str) -> str | None:
    """The text of one example spec, or None when ``name`` is not one of :func:`submit_examples`."""
    return (EXAMPLES_DIR / f"{name}.yaml").read_text() if name in submit_examples() else None


@dataclass(frozen=True, slots=True)
class SpecErrorRow:
    path: str  # "(whole spec)" when the error has none; a pattern (tasks[*].command) for repeats
    message: str
    line: int | None  # 1-based line of the YAML element the (first) path points at
    text: str  # that line
    count: int = 1  # how many paths said the same (collapsed: parsing.errors.errors_collapse)


#: Rows the submit page lists; the rest are counted ("and N more"): 24,000 rows were a 5.8 MB page
#: that took the web process 7 s to render. The API's ``details.errors`` lists every one.
SPEC_ERROR_ROWS = 200


@dataclass(frozen=True, slots=True)
class SpecErrors:
    rows: list[SpecErrorRow]  # the first SPEC_ERROR_ROWS
    problems: int  # every error, as the heading counts them
    hidden: int  # rows not shown


def spec_errors(text: str, errors: list[dict[str, str]]) -> SpecErrors:
    """The page's error list: the first :data:`SPEC_ERROR_ROWS` rows and how many are left out."""
    rows = spec_error_rows(text, errors, limit=SPEC_ERROR_ROWS + 1)
    shown = rows[:SPEC_ERROR_ROWS]
    hidden = len(errors_collapse(errors)) - len(shown) if len(rows) > SPEC_ERROR_ROWS else 0
    return SpecErrors(rows=shown, problems=len(errors), hidden=hidden)


def spec_error_rows(text: str, errors: list[dict[str, Any]], *, limit: int | None = None) -> list[SpecErrorRow]:
    lines = text.splitlines()
    collapsed = errors_collapse(errors)[:limit]
    # A template's errors come with their template line from the service (its paths are the rendered
    # spec's: docs/spec.md, "Templates"); the others are found in the text, composed once for every
    # row (docs/pages.md, "Submit"): a spec of 1,000 tasks has 1,000 distinct errors, and a
    # composition per row held the web worker for minutes.
    given = {error["path"]: error["line"] for error in errors if error.get("path") and error.get("line")}
    firsts = [paths[0] if paths[0] != "pool" and paths[0] not in given else "" for _shown, _message, paths in collapsed]
    found = yaml_lines_for_paths(text, firsts)
    rows = []
    for (shown, message, paths), composed in zip(collapsed, found, strict=True):
        line = given.get(paths[0]) or composed
        rows.append(
            SpecErrorRow(
                path=shown or "(whole spec)",
                message=message,
                line=line,
                text=lines[line - 1] if line and line <= len(lines) else "",
                count=len(paths),
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class PlannedTask:
    task: str
    node: str
    values: list[str]  # the node's value for every key of the pool, "—" when missing


@dataclass(frozen=True, slots=True)
class PreviewGroup:
    name: str
    upstream: list[str]
    constraint_tree: dict[str, Any]
    placement: dict[str, Any]  # the solver's result (scheduler.results.result_to_json)
    tasks: list[PlannedTask]
    task_info: dict[str, dict[str, str]]  # the tree's leaves: task name -> planned node
    preferred: list[dict[str, Any]]  # the report's preferred constraints


@dataclass(frozen=True, slots=True)
class DryRun:
    preview: dict[str, Any]  # workflows.preview.workflow_dry_run's answer
    preview_groups: list[PreviewGroup]
    pool_keys: list[str]


def dry_run_build(*, pool_name: str, spec: str, user: Viewer | None = None, priority: str = "NORMAL") -> DryRun:
    """Validate and preview ``spec`` on the pool; stores nothing. Raises what ``workflow_dry_run`` raises
    (``WorkflowSpecInvalidError``, ``PoolNotFoundError``, and for ``user`` no access, maintenance or a
    team to choose)."""
    preview = workflow_dry_run(pool_name=pool_name, spec=spec, user=user, priority=priority)
    pool = pool_get(name=pool_name)
    keys = pool_keys(pool) if pool else []
    names = {node for group in preview["groups"] for node in group["placement"]["tasks"].values()}
    labels = node_labels_by_name(pool=pool, names=names) if pool else {}
    groups = []
    for group in preview["groups"]:
        placement = group["placement"]
        tasks = [
            PlannedTask(task=task, node=node, values=[(labels.get(node) or {}).get(key.label, "—") for key in keys])
            for task, node in natural_sorted(placement["tasks"].items(), key=lambda item: item[0])
        ]
        groups.append(
            PreviewGroup(
                name=group["name"],
                upstream=group["upstream"],
                constraint_tree=group["constraint_tree"],
                placement=placement,
                tasks=tasks,
                task_info={row.task: {"status": "planned", "node": row.node, "colour": "blue"} for row in tasks},
                preferred=[r for r in placement.get("report") or [] if r.get("requirement") == "preferred"],
            )
        )
    return DryRun(preview=preview, preview_groups=groups, pool_keys=[key.key for key in keys])
