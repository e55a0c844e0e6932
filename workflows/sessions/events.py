"""A session's lines in its workflow's events (``GET /api/workflows/{id}/events/``, ``osmo workflow events``)."""

from __future__ import annotations

from datetime import datetime

from workflows.models import TaskSession


def session_event_lines(session: TaskSession) -> list[tuple[datetime, str, str]]:
    """``(time, kind, message)`` of a session for the workflow's events: its start and its end."""
    what = "exec " + " ".join(session.command)[:200] if session.kind == TaskSession.KIND_EXEC else \
        f"port-forward to port {session.port}{'/udp' if session.kind == TaskSession.KIND_PORT_FORWARD_UDP else ''}"
    who = session.user.get_username() if session.user_id else "?"
    if session.browser:
        who += " (browser)"
    lines = []
    if session.started_at is not None:
        lines.append((session.started_at, "SessionStarted",
                      f"{who}: {what}{' (terminal)' if session.tty else ''} started"))
    if session.started_at is not None and session.ended_at is not None:
        seconds = (session.ended_at - session.started_at).total_seconds()
        code = f", exit code {session.exit_code}" if session.exit_code is not None else ""
        lines.append((session.ended_at, "SessionEnded",
                      f"{who}: {what} ended after {seconds:.1f} s ({session.end_reason}{code}): "
                      f"{session.bytes_in} bytes in, {session.bytes_out} bytes out"))
    return lines
