"""The simulated backend's log and events: made up from the task and the time, consistent with the
phases it reports (docs/design.md §6), and the same every time they are read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.dispatch.base import DispatchPermanentError
from scheduler.dispatch.pod.request import PodRequest
from scheduler.dispatch.simulated import SimulatedBackend

DISPATCHED = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def pod(**overrides) -> PodRequest:
    values = dict(pod_name="hello-1-train-0a1b2c3d", namespace="default", node_name="n1", workflow_id="hello-1",
                  group="g", task="train", pool="sim", image="busybox", command=("sh", "-c"), args=("echo hi",),
                  gpu=1, dispatched_at=DISPATCHED, sim_seconds=10.0)
    values.update(overrides)
    return PodRequest(**values)


def test_log_follows_the_phase_start_progress_finish():
    backend = SimulatedBackend()
    # pending: no log yet, as a container waiting to start
    with pytest.raises(DispatchPermanentError, match="waiting to start"):
        backend.pod_log(pod(), tail=100, now=DISPATCHED + timedelta(seconds=0.1))
    # running half-way: the start line and the progress so far
    running = backend.pod_log(pod(), tail=100, now=DISPATCHED + timedelta(seconds=5.5))
    assert running.lines[0] == ("2026-01-02T03:04:05.500000Z [osmo-sim] task train of hello-1 started on n1 "
                                "(1 GPU): busybox sh -c 'echo hi'")
    assert [line.split()[-1] for line in running.lines[1:]] == ["1/10", "2/10", "3/10", "4/10", "5/10"]
    assert backend.pod_states([pod()], now=DISPATCHED + timedelta(seconds=5.5))[pod().pod_name].phase == "Running"
    # finished: every progress line and the exit code
    done = backend.pod_log(pod(), tail=100, now=DISPATCHED + timedelta(seconds=11))
    assert len(done.lines) == 12 and not done.truncated
    assert done.lines[-1] == "2026-01-02T03:04:15.500000Z [osmo-sim] task train finished: exit code 0"
    failed = backend.pod_log(pod(environment={"OSMO_SIM_EXIT_CODE": "3"}), tail=2,
                             now=DISPATCHED + timedelta(seconds=11))
    assert failed.truncated and failed.lines[-1].endswith("finished: exit code 3")
    assert len(failed.lines) == 2


def test_the_log_shows_the_host_name_and_the_files_as_dispatch_rendered_them():
    # given a rank with a host name in its group's Service and a launch script of 14 lines
    script = "".join(f"echo {n}\n" for n in range(1, 14)) + "torchrun --master_addr master.osmo-t-g.default.svc\n"
    rank = pod(hostname="master", subdomain="osmo-t-g", files=(("/opt/launch.sh", script),))

    # when
    lines = SimulatedBackend().pod_log(rank, tail=100, now=DISPATCHED + timedelta(seconds=1)).lines

    # then: after the start line, at its time, the host name, then the file's first 12 lines
    said = [line.split(" [osmo-sim] task train: ", 1)[1] for line in lines[1:]]
    assert said == ["host name master.osmo-t-g.default.svc (headless Service osmo-t-g)",
                    "file /opt/launch.sh (14 lines)", *[f"  echo {n}" for n in range(1, 13)], "  ... 2 more lines"]
    assert lines[-1].startswith("2026-01-02T03:04:05.500000Z ")


def test_log_and_events_are_deterministic():
    backend = SimulatedBackend()
    now = DISPATCHED + timedelta(seconds=7)
    assert backend.pod_log(pod(), tail=5, now=now) == backend.pod_log(pod(), tail=5, now=now)
    events = backend.pod_events([pod(), pod(pod_name="never", dispatched_at=None)], now=now)
    assert [(e.pod_name, e.kind, e.time) for e in events] == [
        ("hello-1-train-0a1b2c3d", "Scheduled", DISPATCHED),
        ("hello-1-train-0a1b2c3d", "Started", DISPATCHED + timedelta(seconds=0.5)),
    ]
    assert backend.pod_events([pod()], now=now) == events


def test_a_pod_never_created_has_no_log():
    with pytest.raises(DispatchPermanentError, match="never created"):
        SimulatedBackend().pod_log(pod(dispatched_at=None), tail=5, now=DISPATCHED)
