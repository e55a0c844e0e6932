import pytest

from tests.factories import make_node, make_pool
from workflows import jobs


@pytest.fixture
def racks():
    """Two racks of two 4-GPU nodes:  r1: a1 a2   r2: b1 b2"""
    pool = make_pool("racks", keys=[("rack", "rack")], sim_task_seconds=1)
    for rack, prefix in (("r1", "a"), ("r2", "b")):
        for n in (1, 2):
            make_node(pool, f"{prefix}{n}", {"rack": rack}, gpu=4)
    return pool


@pytest.fixture
def no_broker(monkeypatch):
    """Keep on_commit hooks off the broker (no worker runs here); what would be sent is recorded."""
    sent: list[tuple[str, dict]] = []
    monkeypatch.setattr(jobs, "_send", lambda name, countdown=None, **kw: sent.append((name, kw)))
    return sent
