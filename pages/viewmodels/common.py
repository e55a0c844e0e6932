"""Small shared rules of the page view models: shares in percent, the heat scale, status colours."""

from __future__ import annotations

from workflows.choices import STATUS_COLOURS


def percent(part: int, whole: int) -> int:
    return round(100 * part / whole) if whole > 0 else 0


def heat_level(used: int, capacity: int) -> int:
    """0..5: the colour class of the heat map (0 idle, 1..4 under 25/50/75/100%, 5 full)."""
    if capacity <= 0:
        return 0
    fraction = used / capacity
    if fraction <= 0:
        return 0
    if fraction >= 1:
        return 5
    return min(4, 1 + int(fraction * 4))


def status_colour(status: str | None) -> str:
    """grey / amber / blue / green / red, after ``workflows.choices.STATUS_COLOURS``."""
    status = str(status or "")
    if status.startswith("FAILED"):
        return "red"
    return STATUS_COLOURS.get(status, "grey")
