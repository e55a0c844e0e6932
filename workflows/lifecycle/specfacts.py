"""What the lifecycle reads of a workflow's stored spec (docs/design.md §6, "Lead and exit
actions"): each group's ``ignoreNonleadStatus`` and each task's ``exitActions``. The stored text was
validated at submission, so it is read plainly (YAML, no pool context); a text that does not read
gives OSMO's defaults (the lead decides; 0 completes, anything else fails). So does a text that
spells neither key, which is not parsed at all (a pod sync settles every finished task of the pool:
parsing each workflow's spec cost it more than the rest of the sync)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from workflows.lifecycle import rules
from workflows.models import Workflow


@dataclass(frozen=True, slots=True)
class SpecFacts:
    ignore_nonlead: Mapping[str, bool] = field(default_factory=dict)  # group name -> flag (default true)
    exit_actions: Mapping[str, rules.ExitActions] = field(default_factory=dict)  # task name -> actions

    def ignores_nonlead(self, group: str) -> bool:
        return self.ignore_nonlead.get(group, True)

    def actions_of(self, task: str) -> rules.ExitActions:
        return self.exit_actions.get(task, ())


# The keys the facts come from. A YAML (or JSON) key is spelled out in the text unless a double-quoted
# scalar escapes one of its characters, which takes a backslash.
_FACT_KEYS = ("ignoreNonleadStatus", "exitActions")


def spec_facts(spec_text: str) -> SpecFacts:
    spec_text = spec_text or ""
    if "\\" not in spec_text and not any(key in spec_text for key in _FACT_KEYS):
        return SpecFacts()  # OSMO's defaults, as the parse below would find them
    try:
        document: Any = yaml.safe_load(spec_text) or {}
    except yaml.YAMLError:
        return SpecFacts()
    workflow = document.get("workflow") if isinstance(document, dict) else None
    if not isinstance(workflow, dict):
        return SpecFacts()
    groups = workflow.get("groups") or [{"name": t.get("name"), "tasks": [t]} for t in workflow.get("tasks") or ()
                                        if isinstance(t, dict)]
    ignore: dict[str, bool] = {}
    actions: dict[str, rules.ExitActions] = {}
    for group in groups:
        if not isinstance(group, dict):
            continue
        ignore[str(group.get("name"))] = group.get("ignoreNonleadStatus", True) is not False
        for task in group.get("tasks") or ():
            if isinstance(task, dict) and task.get("name") is not None and task.get("exitActions"):
                actions[str(task["name"])] = rules.exit_actions_parse(task["exitActions"])
    return SpecFacts(ignore, actions)


def workflows_spec_facts(workflow_ids: Iterable[int]) -> dict[int, SpecFacts]:
    """The facts of these workflows' specs, by workflow id (one query)."""
    ids = sorted(set(workflow_ids))
    if not ids:
        return {}
    return {pk: spec_facts(text) for pk, text in Workflow.objects.filter(pk__in=ids).values_list("pk", "spec_text")}
