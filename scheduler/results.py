"""Solver results -> JSON for the API, the database and the pages."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from scheduler.placement import Placement, Unplaceable


def report_to_json(placement: Placement) -> list[dict[str, Any]]:
    return [
        {
            "path": [list(pair) for pair in item.path],
            "display_name": "/".join(group for _key, group in item.path),
            "key": item.key,
            "requirement": item.requirement,
            "met": item.met,
            "met_key": item.met_key,
            "domains": [list(domain) for domain in item.domains],
        }
        for item in placement.report
    ]


def result_to_json(result: Placement | Unplaceable) -> dict[str, Any]:
    """The ``placement`` object of docs/design.md §7: status, tasks, report, reason, message. Every
    reason a gang carries has one shape: ``status``, ``code`` (a :class:`ReasonCode`), ``message``,
    and details (here the solver's structured ``reason``)."""
    if isinstance(result, Placement):
        unmet = [r for r in result.report if not r.met]
        message = "placed; every constraint met" if not unmet else (
            "placed; " + "; ".join(
                f"{'/'.join(g for _k, g in r.path)} ({r.key}, preferred) met at "
                f"{r.met_key or 'no single domain'}" for r in unmet
            )
        )
        return {"status": "placed", "tasks": dict(result.assignments), "report": report_to_json(result),
                "reason": None, "message": message}
    reason = _jsonable(result.reason)
    return {"status": result.status, "code": str(reason.get("code", "")), "tasks": {}, "report": [],
            "reason": reason, "message": result.message}


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_jsonable(v) for v in value]
        return sorted(items, key=str) if isinstance(value, (set, frozenset)) else items
    return value


def reason_digest(reason: dict[str, Any]) -> str:
    """A short digest of a stored reason: equal reasons have equal digests (stored next to the reason,
    so an unchanged one is not rewritten)."""
    return hashlib.sha256(json.dumps(reason, sort_keys=True).encode()).hexdigest()[:16]
