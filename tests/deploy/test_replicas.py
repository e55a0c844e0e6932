"""Replicas are safe (docs/design.md §12): two beats send the periodic tasks one at a time; two web
(gunicorn) and two worker processes against one database and broker never place work twice."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import requests
from django.db import connection

from osmo.beat import BEAT_LOCK_KEY
from scheduler.models import Reservation
from tests.conftest import wait_for
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import assert_never_overcommitted, assert_reservations_match_tasks
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)
SENT = "Sending due task workflows-tick"


class Process:
    """A subprocess in its own process group, its output in a log file."""

    def __init__(self, command: list[str], env: dict[str, str], log: Path) -> None:
        self.log_path = log
        self._log = open(log, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(command, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                        start_new_session=True)

    def text(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def signal(self, number: int) -> None:
        try:
            os.killpg(self.process.pid, number)
        except ProcessLookupError:
            pass
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
        self._log.close()


@pytest.fixture
def processes(request):
    started: list[Process] = []

    def start(command: list[str], env: dict[str, str], log: Path) -> Process:
        started.append(Process(command, env, log))
        return started[-1]

    yield start
    failed = getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed
    for process in started:
        process.stop()
        if failed:
            print(f"----- {process.log_path.name} -----\n{process.log_path.read_text()[-4000:]}")


def _beat(processes, worker_env, tmp_path: Path, name: str) -> Process:
    # LOG_LEVEL=DEBUG: the console filter lowers routine "Sending due task" lines, which this test counts
    return processes([sys.executable, "-m", "celery", "-A", "osmo", "beat", "-l", "DEBUG",
                      "-s", str(tmp_path / f"{name}-schedule")], {**worker_env, "LOG_LEVEL": "DEBUG"},
                     tmp_path / f"{name}.log")


def _beat_lock_holders() -> list[int]:
    """Process ids of the database sessions holding the beat lock."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = %s "
                       "AND objid = %s AND objsubid = 1",
                       [BEAT_LOCK_KEY >> 32, BEAT_LOCK_KEY & 0xFFFFFFFF])
        return [row[0] for row in cursor.fetchall()]


def _beat_sessions() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'osmo-beat'")
        return cursor.fetchone()[0]


def test_two_beats_send_the_periodic_tasks_one_at_a_time(processes, worker_env, tmp_path):
    if connection.vendor != "postgresql":
        pytest.fail("the beat lock is PostgreSQL's: run this test with make test (PostgreSQL)")
    # given: one beat sending ticks
    first = _beat(processes, worker_env, tmp_path, "beat1")
    wait_for(lambda: first.text().count(SENT) >= 2, timeout=60, message="the first beat to send ticks")
    [holder] = _beat_lock_holders()

    # when: a second beat starts
    second = _beat(processes, worker_env, tmp_path, "beat2")
    wait_for(lambda: "beat.standby" in second.text() or "standing by" in second.text(), timeout=60,
             message="the second beat to stand by")
    sent_before = first.text().count(SENT)
    wait_for(lambda: first.text().count(SENT) >= sent_before + 3, timeout=60, message="three more ticks")

    # then: the first one still sends, alone; the second sent nothing
    assert second.text().count(SENT) == 0
    assert _beat_lock_holders() == [holder]
    assert second.process.poll() is None

    # when: the first beat dies without a goodbye
    first.signal(signal.SIGKILL)

    # then: the second takes over
    wait_for(lambda: second.text().count(SENT) >= 2, timeout=60, message="the second beat to take over")
    assert len(_beat_lock_holders()) == 1
    assert _beat_lock_holders() != [holder]
    assert _beat_sessions() == 1


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _web(processes, worker_env, tmp_path: Path, name: str) -> str:
    port = _free_port()
    env = {**worker_env, "GUNICORN_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "1", "GUNICORN_THREADS": "4"}
    processes([sys.executable, "-m", "gunicorn", "-c", "python:osmo.gunicorn_conf", "osmo.wsgi"], env,
              tmp_path / f"{name}.log")
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return requests.get(f"{url}/readyz?checks=database,broker", timeout=5).status_code == 200
        except requests.ConnectionError:
            return False

    wait_for(ready, timeout=60, message=f"{name} to be ready")
    return url


def _gang(name: str, tasks: int, gpu: int, seconds: float) -> str:
    rows = [f"    - {{name: t{i}, {'lead: true, ' if i == 0 else ''}image: busybox, command: [true], "
            f"environment: {{OSMO_SIM_SECONDS: '{seconds}'}}}}" for i in range(tasks)]
    return (f"workflow:\n  name: {name}\n  groups:\n  - name: g\n    tasks:\n" + "\n".join(rows)
            + f"\nresources:\n  default: {{gpu: {gpu}, topology: [{{key: rack}}]}}\n")


def test_two_web_and_two_worker_processes_never_place_work_twice(
        user, processes, worker_env, tmp_path, celery_worker_factory, celery_beat):
    # given: a 32-GPU pool, two gunicorn and two Celery worker processes on one database and broker
    from tests.factories import make_api_key

    pool = make_pool("replicas", keys=[("rack", "rack")], sim_task_seconds=0.5)
    for rack in ("r1", "r2"):
        for index in range(4):
            make_node(pool, f"{rack}-n{index}", {"rack": rack}, gpu=4)
    key = make_api_key(user)
    webs = [_web(processes, worker_env, tmp_path, "web1"), _web(processes, worker_env, tmp_path, "web2")]
    celery_worker_factory("w1", concurrency=2)
    celery_worker_factory("w2", concurrency=2)
    rng = random.Random(31)
    shapes = [(rng.randint(1, 4), rng.choice([1, 2, 4]), rng.choice([0.3, 0.6])) for _ in range(40)]
    answers: list[int] = []
    lock = threading.Lock()

    def client(offset: int) -> None:
        with requests.Session() as session:
            session.headers["Authorization"] = f"Token {key}"
            for index in range(offset, len(shapes), 4):
                tasks, gpu, seconds = shapes[index]
                response = session.post(f"{webs[index % 2]}/api/workflows/", timeout=60, json={
                    "pool": "replicas", "spec": _gang(f"gang{index}", tasks, gpu, seconds)})
                with lock:
                    answers.append(response.status_code)

    # when: 40 gangs are submitted by 4 clients, alternating between the two web processes
    threads = [threading.Thread(target=client, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    # then: all accepted, all run to completion, no node ever over-committed
    assert answers == [201] * 40
    wait_for(lambda: Workflow.objects.exclude(status="COMPLETED").count() == 0, timeout=240, interval=0.5,
             message="every gang to complete")
    assert Workflow.objects.count() == 40
    assert Reservation.objects.filter(pool=pool).count() == sum(tasks for tasks, _gpu, _s in shapes)
    assert_never_overcommitted(pool)
    assert_reservations_match_tasks(pool)
