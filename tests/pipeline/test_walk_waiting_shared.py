"""Gangs that wait with the pool's minimum runtime share, within one walk, the solves of an identical
gang before them while the pool is unchanged (docs/design.md §9, what waiting gangs cost a cycle): the
walk decides exactly what it decides when each solves them afresh."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta

from scheduler.placement import ClusterSnapshot, NodeState, Policy, Resources
from scheduler.placement.signature import gang_signature
from scheduler.preemption import Candidate
from tests.scheduler.placement.builders import rack, tree
from workflows.scheduling.cycle import CycleInput, GangRow, QueuedGang, RunningGang, Walk
from workflows.scheduling.cycle.values import Decision, GangSource
from workflows.scheduling.cycle.walk import Sharing
from workflows.scheduling.requests import gang_request_from_row
from workflows.spec import tree_to_json

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
MIN_RUNTIME = 600.0


class ThreeRacks:
    """Racks a, b, c of two 4-GPU machines: a1 held by a LOW gang that started an hour ago (preemptible,
    but outside NORMAL work's eviction window), b1 by one that started five minutes ago (within the
    minimum runtime), c1 by one that started fifteen minutes ago (within the window: evicting it is not
    enough for a whole rack), c2 by NORMAL work; a2 and b2 free."""

    def __init__(self, rows: Mapping[int, GangRow]) -> None:
        self.rows = rows

    def gang_rows(self, pks: Sequence[int]) -> Mapping[int, GangRow]:
        return {pk: self.rows[pk] for pk in pks}

    def pool_keys(self, workflow_id: int) -> list[list[str]]:
        return [["rack", "rack"]]

    def snapshot(self) -> tuple[ClusterSnapshot, dict[str, int]]:
        free = {"a1": 0, "a2": 4, "b1": 0, "b2": 4, "c1": 0, "c2": 0}
        nodes = tuple(NodeState(name, (name[0],), Resources(gpu=gpu)) for name, gpu in free.items())
        return ClusterSnapshot(pool="p", keys=("rack",), nodes=nodes), {name: i for i, name in enumerate(free)}

    def idle_snapshot(self) -> ClusterSnapshot:
        return self.snapshot()[0]

    def platforms(self) -> dict:
        return {}

    def running_low(self) -> list[RunningGang]:
        out = []
        ages = {"a1": timedelta(hours=1), "b1": timedelta(minutes=5), "c1": timedelta(minutes=15)}
        for pk, (node, age) in enumerate(ages.items(), start=50):
            started = (NOW - age).timestamp()
            out.append(RunningGang(pk, 100 + pk, None, Candidate(str(pk), ((node, Resources(gpu=4)),), False, started),
                                   preemptible_at=started + MIN_RUNTIME))
        return out

    def holders(self, now: float) -> list:
        return []


def _gang(pk: int, rank: int, tasks: int, excluded: tuple[str, ...] = ()) -> tuple[QueuedGang, GangRow]:
    names = [f"t{i}" for i in range(tasks)]
    constraint = tree(rack("g", tasks=names)) if tasks > 1 else tree(tasks=names)
    row = GangRow(tree_to_json(constraint), [[name, 4, 0, 0, 0, list(excluded)] for name in names])
    signature = gang_signature(gang_request_from_row("g", row.constraint_tree, row.task_requests))
    gang = QueuedGang(pk=pk, workflow_id=100 + pk, name="g", rank=rank, order=[rank, f"2026-11-27T11:00:0{pk}", pk, 0],
                      scheduling_since=NOW - timedelta(minutes=30), proof_epoch=None, signature=signature,
                      reason_code="", reason_digest="", idle_fit=None, idle_fit_epoch=None, keys_version=1,
                      workflow_label=f"w{pk}")
    return gang, row


class Unshared(Walk):
    """The walk with every waiting gang solving its views afresh."""

    def __init__(self, cycle: CycleInput, source: GangSource, policy: Policy) -> None:
        super().__init__(cycle, source, policy, sharing=Sharing(waits=False))


def _walked(walker: type[Walk]) -> tuple[Decision, dict[int, dict]]:
    """Whole-rack NORMAL gangs 1, 2, 4 and 5 that first did not fit eleven minutes ago (past the minimum
    runtime), a one-machine NORMAL gang 3 that can only take a2, a one-machine LOW gang 6, and one, 7,
    that can only take c1 (held by LOW work)."""
    built = [_gang(1, 1, 2), _gang(2, 1, 2), _gang(3, 1, 1, excluded=("a1", "b1", "b2", "c1", "c2")),
             _gang(4, 1, 2), _gang(5, 1, 2), _gang(6, 2, 1), _gang(7, 2, 1, excluded=("a1", "a2", "b1", "b2", "c2"))]
    since = (NOW - timedelta(minutes=11)).timestamp()
    cycle = CycleInput(pool_id=1, pool_name="p", keys_version=1, key_labels=(("rack", "rack"),), now=NOW,
                       capacity_epoch=7, inventory_epoch=3, queue=tuple(gang for gang, _row in built),
                       starvation=timedelta(hours=2), preemption=True, min_runtime=MIN_RUNTIME,
                       blocked_since={pk: since for pk in (1, 2, 4, 5)})
    decision = walker(cycle, ThreeRacks({gang.pk: row for gang, row in built}), Policy()).decide()
    return decision, {pk: verdict.reason for verdict in decision.verdicts for pk in verdict.group_ids}


def test_waiting_gangs_sharing_their_solves_decide_as_each_solving_them_afresh():
    # given identical NORMAL gangs waiting past the minimum runtime, two before and two after a gang
    # that takes a2 (the LOW-free rack a of the first two is then gone for the last two), the LOW gang
    # within their eviction window too few to evict for them
    # when the walk decides with the waiting gangs sharing their solves, and with each solving afresh
    shared, said = _walked(Walk)
    unshared, said_unshared = _walked(Unshared)
    # then both decide the same: placements, evictions, reasons, proofs, wake-up and waits carried
    assert said == said_unshared
    assert [(v.group_ids, v.digest, v.proof) for v in shared.verdicts] == [
        (v.group_ids, v.digest, v.proof) for v in unshared.verdicts]
    assert [(p.gang.pk, p.placement.tasks) for p in shared.placements] == [
        (p.gang.pk, p.placement.tasks) for p in unshared.placements]
    assert (shared.evictions, shared.unschedulable, shared.wake_at, dict(shared.blocked_since)) == (
        unshared.evictions, unshared.unschedulable, unshared.wake_at, dict(unshared.blocked_since))
    # and that is: gang 3 is placed on a2 and the LOW gang 6 on b2, nothing evicted; 1 and 2 keep rack a
    # from LOW work, 4 and 5 (rack a no longer whole without LOW work) keep nothing and wait for the young
    # LOW gang on rack b
    assert [(p.gang.pk, p.placement.tasks) for p in shared.placements] == [(3, {"t0": "a2"}), (6, {"t0": "b2"})]
    assert shared.evictions == ()
    assert [(v.group_ids, v.proof) for v in shared.verdicts] == [((1, 2), None), ((4, 5), None), ((7,), None)]
    assert [said[pk].get("keeping") for pk in (1, 2, 4, 5)] == [
        {"where": "rack a, 2 machines", "until": None}, {"where": "rack a, 2 machines", "until": None}, None, None]
    assert [said[pk].get("preemptible_at") for pk in (1, 2, 4, 5)] == [
        None, None, "2026-11-27T12:05:00+00:00", "2026-11-27T12:05:00+00:00"]
    assert said[4]["message"].endswith(
        "; a LOW gang on b becomes preemptible at 12:05 UTC (the pool's minimum runtime)")
    # and the LOW gang 7 is not placed on c1: its LOW work was not evicted (nor left released by the check
    # that evicting it is not enough)
    assert said[7]["code"] == "behind_starving_group"
    # and gangs 2 and 5 took the solves of 1 and 4 on the view without LOW work (six solves instead of eight)
    assert (shared.solved, unshared.solved) == (6, 8)


class RandomPool(ThreeRacks):
    """Racks r0..r3 of three 4-GPU machines; each machine free, held by NORMAL work, or held by a LOW
    gang of one machine that started 1 to 60 minutes ago (seeded)."""

    def __init__(self, rows: Mapping[int, GangRow], rng: random.Random) -> None:
        super().__init__(rows)
        self.free: dict[str, int] = {}
        self.low: list[tuple[str, timedelta]] = []
        for r in range(4):
            for n in range(3):
                name, x = f"r{r}m{n}", rng.random()
                self.free[name] = 4 if x < 0.3 else 0
                if x >= 0.55:
                    self.low.append((name, timedelta(minutes=rng.randint(1, 60))))

    def snapshot(self) -> tuple[ClusterSnapshot, dict[str, int]]:
        nodes = tuple(NodeState(name, (name[:2],), Resources(gpu=gpu)) for name, gpu in self.free.items())
        return ClusterSnapshot(pool="p", keys=("rack",), nodes=nodes), {name: i for i, name in enumerate(self.free)}

    def idle_snapshot(self) -> ClusterSnapshot:
        nodes = tuple(NodeState(name, (name[:2],), Resources(gpu=4)) for name in self.free)
        return ClusterSnapshot(pool="p", keys=("rack",), nodes=nodes)

    def running_low(self) -> list[RunningGang]:
        out = []
        for pk, (node, age) in enumerate(self.low, start=50):
            started = (NOW - age).timestamp()
            out.append(RunningGang(pk, 100 + pk, None, Candidate(str(pk), ((node, Resources(gpu=4)),), False, started),
                                   preemptible_at=started + MIN_RUNTIME))
        return out


def _random_walked(seed: int, walker: type[Walk]) -> Decision:
    """Seeded: a queue of 4-9 HIGH, NORMAL and LOW gangs of 1-3 machines (in one rack for 2 and 3),
    the HIGH and NORMAL ones first not fitting 1 to 30 minutes ago, on a :class:`RandomPool`."""
    rng = random.Random(seed)
    built = []
    for pk in range(1, rng.randint(4, 9) + 1):
        gang, row = _gang(pk, rng.choice((0, 1, 1, 2)), rng.choice((1, 2, 2, 3)))
        built.append((gang, row))
    built.sort(key=lambda item: item[0].order)  # in queue order: priority first
    blocked = {g.pk: (NOW - timedelta(minutes=rng.randint(1, 30))).timestamp() for g, _row in built if g.rank < 2}
    cycle = CycleInput(pool_id=1, pool_name="p", keys_version=1, key_labels=(("rack", "rack"),), now=NOW,
                       capacity_epoch=7, inventory_epoch=3, queue=tuple(gang for gang, _row in built),
                       starvation=timedelta(hours=2), preemption=True, min_runtime=MIN_RUNTIME, blocked_since=blocked)
    return walker(cycle, RandomPool({gang.pk: row for gang, row in built}, rng), Policy()).decide()


def test_on_random_pools_and_queues_sharing_decides_as_solving_afresh():
    # given 300 seeded pools with LOW work of every age and queues of every priority and state
    seen = {"evicted": 0, "keeping": 0, "preemptible": 0}
    for seed in range(300):
        # when the walk decides with the waiting gangs sharing their solves, and with each solving afresh
        shared, unshared = _random_walked(seed, Walk), _random_walked(seed, Unshared)
        # then both decide the same
        assert [(p.gang.pk, p.placement.tasks) for p in shared.placements] == [
            (p.gang.pk, p.placement.tasks) for p in unshared.placements], seed
        assert [(v.group_ids, v.digest, v.proof) for v in shared.verdicts] == [
            (v.group_ids, v.digest, v.proof) for v in unshared.verdicts], seed
        assert (shared.evictions, shared.unschedulable, shared.undecided, shared.wake_at, shared.retry) == (
            unshared.evictions, unshared.unschedulable, unshared.undecided, unshared.wake_at, unshared.retry), seed
        assert dict(shared.blocked_since) == dict(unshared.blocked_since), seed
        seen["evicted"] += bool(shared.evictions)
        seen["keeping"] += any("keeping" in v.reason for v in shared.verdicts)
        seen["preemptible"] += any("preemptible_at" in v.reason for v in shared.verdicts)
    # and the instances walked every path the shortcuts touch: evictions, keeps, and protected LOW work
    assert all(count > 10 for count in seen.values()), seen
