"""The group barrier, from the task's side: arrive, then wait until every task of the group arrived.

One call is ``POST <barrier url>`` with ``Authorization: Bearer <task token>``; the service answers
``{"arrived": n, "size": m, "open": bool, "abort": bool}`` (docs/runtime.md). The call is repeated
every ``poll_s`` until the barrier opens. Connection failures and 5xx answers (a database restart
answers 503, a web rollout refuses connections) are retried with backoff (0.5 s doubling, at most
``max_delay_s``, and never sooner than the answer's ``Retry-After``, up to 60 s) until the deadline,
the start timeout: an outage shorter than that delays the group, it does not fail it. No request
runs past the deadline by more than half a second. A service still unreachable at the deadline is a
clear failure (2021, with the last error), a token the service refuses (401/403) fails at once (2020),
a group that stopped (a task failed or the workflow was cancelled, ``abort``) fails 2024, and a
barrier that has not opened by the deadline fails with OSMO's start timeout (3005).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from runtime import exitcodes
from runtime.plan import BarrierSpec


class BarrierError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class BarrierClock:
    """Time and sleep, passed in so tests can drive the loop without waiting."""

    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


REQUEST_TIMEOUT_S = 10.0
#: The longest ``Retry-After`` followed (seconds): a longer one is read as this.
RETRY_AFTER_MAX_S = 60.0


def _retry_after(value: str | None) -> float:
    """Seconds of a ``Retry-After`` header in seconds (0 when absent or an HTTP date)."""
    try:
        return min(max(float(value or 0), 0.0), RETRY_AFTER_MAX_S)
    except ValueError:
        return 0.0


def _post(url: str, token: str, timeout: float) -> dict[str, object]:
    request = urllib.request.Request(url, data=b"{}", method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json", "Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (the plan's own URL)
        answer = json.loads(response.read().decode() or "{}")
    if not isinstance(answer, dict):
        raise ValueError("the barrier answer is not a JSON object")
    return answer


def barrier_wait(spec: BarrierSpec, *, deadline_s: float, poll_s: float = 0.5, max_delay_s: float = 10.0,
                 retry_first_delay_s: float = 0.5, clock: BarrierClock | None = None,
                 log: Callable[[str], None] = lambda _line: None) -> int:
    """Arrive at the barrier and return once it is open (the number of tasks that arrived).
    Raises :class:`BarrierError` with OSMO's code (see the module docstring)."""
    clock = clock or BarrierClock()
    deadline = clock.now() + deadline_s
    failures = 0  # consecutive ones
    attempts = 0
    delay = retry_first_delay_s
    last_error = ""
    announced = -1
    while True:
        retry_after = 0.0
        try:
            # a request does not run past the deadline by more than half a second
            answer = _post(spec.url, spec.token, timeout=max(0.5, min(REQUEST_TIMEOUT_S, deadline - clock.now())))
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise BarrierError(exitcodes.INVALID_TOKEN,
                                   f"the service refused the task's token at {spec.url}: HTTP {exc.code}") from exc
            if exc.code < 500 and exc.code not in (408, 429):
                raise BarrierError(exitcodes.SERVICE_MESSAGE_FAILED,
                                   f"the barrier at {spec.url} answered HTTP {exc.code}") from exc
            last_error = f"HTTP {exc.code}"
            retry_after = _retry_after(exc.headers.get("Retry-After") if exc.headers else None)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            last_error = f"{exc.__class__.__name__}: {reason}"
        else:
            attempts += 1
            if failures:
                log(f"service reachable again at {spec.url} after {failures} failed attempts")
            failures = 0
            delay = retry_first_delay_s
            if answer.get("abort"):
                reason = str(answer.get("reason") or "")
                raise BarrierError(exitcodes.BARRIER_FAILED,
                                   f"the group stopped before its barrier opened: {reason}".rstrip(": "))
            arrived = int(str(answer.get("arrived", 0)))
            size = int(str(answer.get("size", spec.group_size)))
            if answer.get("open"):
                log(f"barrier open: {arrived}/{size} tasks of the group arrived")
                return arrived
            if arrived != announced:
                log(f"waiting at the barrier: {arrived}/{size} tasks of the group arrived")
                announced = arrived
            if clock.now() + poll_s > deadline:
                raise BarrierError(exitcodes.START_TIMEOUT,
                                   f"start timeout: the group's barrier did not fill within {deadline_s:g} s "
                                   f"({arrived}/{size} tasks arrived)")
            clock.sleep(poll_s)
            continue
        failures += 1
        attempts += 1
        if failures == 1:  # one line per outage, not one per attempt
            log(f"service unavailable at {spec.url} ({last_error}); retrying until the start timeout "
                f"({deadline_s:g} s)")
        left = deadline - clock.now()
        if left <= 0:
            raise BarrierError(exitcodes.SERVICE_TIMEOUT,
                               f"the service at {spec.url} could not be reached within the start timeout "
                               f"({deadline_s:g} s, {attempts} attempts): {last_error}")
        clock.sleep(min(max(delay, retry_after), left))  # the service's Retry-After, when it said one
        delay = min(delay * 2, max_delay_s)
