"""The walk decides from values alone (docs/design.md §8: read, walk, apply): a queue and a pool built
by hand, no database, and the frozen decision checked whole."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from scheduler.hold import Holder
from scheduler.placement import ClusterSnapshot, NodeState, Policy, Resources
from scheduler.placement.signature import gang_signature
from scheduler.preemption import Candidate
from tests.scheduler.placement.builders import rack, tree
from workflows.scheduling.cycle import CycleInput, GangRow, QueuedGang, RunningGang, Walk
from workflows.scheduling.cycle.values import Decision, Verdict
from workflows.scheduling.requests import gang_request_from_row
from workflows.spec import tree_to_json

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
NODES = {"a1": 10, "a2": 11, "b1": 20, "b2": 21}  # two racks of two 4-GPU machines, by id


class InMemory:
    """A :class:`~workflows.scheduling.cycle.values.GangSource` of values, recording what was read."""

    def __init__(self, rows: Mapping[int, GangRow]) -> None:
        self.rows, self.asked = rows, []

    def gang_rows(self, pks: Sequence[int]) -> Mapping[int, GangRow]:
        self.asked += list(pks)
        return {pk: self.rows[pk] for pk in pks}

    def pool_keys(self, workflow_id: int) -> list[list[str]]:
        return [["rack", "rack"]]

    def snapshot(self) -> tuple[ClusterSnapshot, dict[str, int]]:
        nodes = tuple(NodeState(name, (name[0],), Resources(gpu=4)) for name in NODES)
        return ClusterSnapshot(pool="p", keys=("rack",), nodes=nodes), dict(NODES)

    def idle_snapshot(self) -> ClusterSnapshot:
        return self.snapshot()[0]

    def platforms(self) -> dict:
        return {}

    def running_low(self) -> list[RunningGang]:
        return []

    def holders(self, now: float) -> list:
        return []


def _gang(pk: int, tasks: int, *, same_rack: bool, proof: int | None = None, **extra) -> tuple[QueuedGang, GangRow]:
    names = [f"t{i}" for i in range(tasks)]
    constraint = tree(rack("g", tasks=names)) if same_rack else tree(tasks=names)
    row = GangRow(tree_to_json(constraint), [[name, 4, 0, 0, 0, []] for name in names])
    signature = gang_signature(gang_request_from_row("g", row.constraint_tree, row.task_requests))
    gang = QueuedGang(pk=pk, workflow_id=100 + pk, name="g", rank=1, order=[1, f"2026-11-26T11:00:0{pk}", pk, 0],
                      scheduling_since=NOW - timedelta(seconds=5), proof_epoch=proof, signature=signature,
                      reason_code="", reason_digest="", idle_fit=None, idle_fit_epoch=None, keys_version=1,
                      workflow_label=f"w{pk}", **extra)
    return gang, row


def _input(gangs: list[QueuedGang]) -> CycleInput:
    return CycleInput(pool_id=1, pool_name="p", keys_version=1, key_labels=(("rack", "rack"),), now=NOW,
                      capacity_epoch=7, inventory_epoch=3, queue=tuple(gangs), starvation=timedelta(hours=1))


def test_a_walk_of_values_places_what_fits_and_shares_one_verdict():
    # given: a two-machine gang in one rack, two identical three-machine gangs in one rack (no rack has
    # three machines), and a one-machine gang without a constraint, queued in this order
    built = [_gang(1, 2, same_rack=True), _gang(2, 3, same_rack=True), _gang(3, 3, same_rack=True),
             _gang(4, 1, same_rack=False)]
    source = InMemory({gang.pk: row for gang, row in built})
    # when the walk decides
    decision = Walk(_input([gang for gang, _row in built]), source, Policy()).decide()
    # then the first and the last are placed on distinct racks' machines, in queue order
    assert [(p.gang.pk, p.placement.tasks) for p in decision.placements] == [
        (1, {"t0": "a1", "t1": "a2"}), (4, {"t0": "b1"})]
    assert decision.node_ids == NODES
    # and the two identical gangs share one verdict (one solve), proven at the capacity epoch
    verdict = decision.verdicts[0]
    assert len(decision.verdicts) == 1
    assert (verdict.group_ids, verdict.proof, verdict.code) == ((2, 3), 7, "no_domain")
    assert (decision.solved, decision.shared, decision.proven) == (3, 1, 0)
    assert (decision.unschedulable, decision.undecided, decision.failed, decision.evictions) == ((2, 3), (), (), ())
    assert (decision.cursor, decision.resumed, decision.budget_exhausted, decision.retry) == (None, False, False, False)
    assert dict(decision.proofs) == {built[1][0].signature: 7}
    # and the decision is frozen
    with pytest.raises(AttributeError):
        decision.cursor = [1]  # type: ignore[misc]
    assert isinstance(decision, Decision) and isinstance(verdict, Verdict)



def test_rows_read_as_json_text_are_decoded_only_for_the_gangs_solved():
    # given three identical gangs that cannot fit (three machines of one rack), ahead of one that fits,
    # all four rows as the database gives them (JSON text); the second and third rows' text is no JSON,
    # so decoding either would raise
    built = [_gang(1, 3, same_rack=True), _gang(2, 3, same_rack=True), _gang(3, 3, same_rack=True),
             _gang(4, 1, same_rack=False)]
    text = {gang.pk: GangRow.from_json(json.dumps(row.constraint_tree), json.dumps(row.task_requests))
            for gang, row in built}
    text[2] = text[3] = GangRow.from_json("not json", "not json")
    source = InMemory(text)
    # when the walk decides
    decision = Walk(_input([gang for gang, _row in built]), source, Policy()).decide()
    # then all four rows were read in one batch, the first gang was solved from its decoded row and the
    # two behind it took its verdict without their rows being decoded; the last was placed from its row
    assert source.asked == [1, 2, 3, 4]
    assert (decision.solved, decision.shared) == (2, 2)
    assert [(v.group_ids, v.proof, v.code) for v in decision.verdicts] == [((1, 2, 3), 7, "no_domain")]
    assert [(p.gang.pk, p.placement.tasks) for p in decision.placements] == [(4, {"t0": "a1"})]
    # and a row decoded from its text is the row built from values
    assert (text[1].constraint_tree, text[1].task_requests) == (built[0][1].constraint_tree, built[0][1].task_requests)
    assert GangRow.from_json("{}", None).task_requests == []
    assert GangRow.from_json("{}", "null").task_requests == []


def test_a_gang_proven_at_this_epoch_is_neither_read_nor_solved():
    # given a gang that cannot fit, proven unschedulable at the pool's capacity epoch, ahead of one that fits
    proven, proven_row = _gang(1, 3, same_rack=True, proof=7)
    fits, fits_row = _gang(2, 1, same_rack=False)
    source = InMemory({1: proven_row, 2: fits_row})
    # when the walk decides
    decision = Walk(_input([proven, fits]), source, Policy()).decide()
    # then the proven gang keeps its verdict without its row being read, and the other is placed
    assert (decision.proven, decision.solved, decision.unschedulable) == (1, 1, (1,))
    assert source.asked == [2]
    assert [p.gang.pk for p in decision.placements] == [2]
    assert decision.verdicts == ()


class ThreeFullRacks(InMemory):
    """Racks a, b, c of two 4-GPU machines, each taken whole by a placed gang ending in 30, 60 and 120
    minutes (their exec_timeouts)."""

    RACKS = {"a": 30, "b": 60, "c": 120}

    def snapshot(self) -> tuple[ClusterSnapshot, dict[str, int]]:
        nodes = tuple(NodeState(f"{r}{n}", (r,), Resources(gpu=0)) for r in self.RACKS for n in (1, 2))
        return ClusterSnapshot(pool="p", keys=("rack",), nodes=nodes), {node.name: i for i, node in enumerate(nodes)}

    def idle_snapshot(self) -> ClusterSnapshot:
        nodes = tuple(NodeState(f"{r}{n}", (r,), Resources(gpu=4)) for r in self.RACKS for n in (1, 2))
        return ClusterSnapshot(pool="p", keys=("rack",), nodes=nodes)

    def holders(self, now: float) -> list:
        return [Holder(str(i), ((f"{r}1", Resources(gpu=4)), (f"{r}2", Resources(gpu=4))), now + minutes * 60, True)
                for i, (r, minutes) in enumerate(self.RACKS.items(), start=1)]


def _two_starving_rack_gangs_walked(max_holds: int) -> dict[tuple[int, ...], Verdict]:
    """Two starving whole-rack gangs on :class:`ThreeFullRacks`, walked with up to ``max_holds`` holds:
    the verdicts by group ids (nothing is placed)."""
    built = [_gang(pk, 2, same_rack=True) for pk in (1, 2)]
    gangs = [replace(gang, scheduling_since=NOW - timedelta(hours=2)) for gang, _row in built]
    source = ThreeFullRacks({gang.pk: row for gang, row in built})
    decision = Walk(replace(_input(gangs), max_holds=max_holds), source, Policy()).decide()
    assert decision.placements == ()
    return {verdict.group_ids: verdict for verdict in decision.verdicts}


def test_a_second_starving_gang_holds_other_machines_and_its_verdict_there_is_no_proof():
    # given two starving whole-rack gangs on a pool whose racks are all taken
    # when the walk decides with up to four holds
    said = _two_starving_rack_gangs_walked(4)
    # then the first holds rack a (free first), proven unschedulable at the capacity epoch
    first, second = said[(1,)], said[(2,)]
    assert (first.proof, first.reason["holding"]["where"]) == (7, "rack a, 2 machines")
    # and the second holds rack b (not a), its verdict made without rack a no proof on the pool
    assert (second.proof, second.code, second.reason["holding"]["where"]) == (None, "no_domain", "rack b, 2 machines")


def test_with_one_hold_the_second_starving_gang_waits_kept_off_the_first_hold():
    # given two starving whole-rack gangs on a pool whose racks are all taken
    # when the walk decides with one hold at most
    said = _two_starving_rack_gangs_walked(1)
    # then the first holds rack a, and the second waits behind it, kept off rack a, without a proof
    first, second = said[(1,)], said[(2,)]
    assert (first.proof, first.reason["holding"]["where"]) == (7, "rack a, 2 machines")
    assert (second.proof, second.code, second.reason["holding"]["where"]) == (
        None, "behind_starving_group", "rack a, 2 machines")


class OneOldLowGang(InMemory):
    """Racks a and b of two 4-GPU machines: a1 taken by a LOW gang that started ``age`` ago (an hour
    unless told), b1 and b2 by protected work, a2 free."""

    age = timedelta(hours=1)

    def snapshot(self) -> tuple[ClusterSnapshot, dict[str, int]]:
        free = {"a1": 0, "a2": 4, "b1": 0, "b2": 0}
        nodes = tuple(NodeState(name, (name[0],), Resources(gpu=gpu)) for name, gpu in free.items())
        return ClusterSnapshot(pool="p", keys=("rack",), nodes=nodes), dict(NODES)

    def running_low(self) -> list[RunningGang]:
        started = (NOW - self.age).timestamp()
        return [RunningGang(50, 150, None, Candidate("50", (("a1", Resources(gpu=4)),), False, started),
                            preemptible_at=started + 600)]


def _high_and_low_walked(blocked_since: dict[int, float], rank: int = 0, low_age: timedelta = OneOldLowGang.age
                         ) -> tuple[Decision, dict[int, Verdict]]:
    """A HIGH (``rank`` 0, or NORMAL: 1) whole-rack gang (pk 1) and a one-machine LOW gang (pk 2) on
    :class:`OneOldLowGang` with its LOW gang started ``low_age`` ago, a minimum runtime of ten minutes
    and the HIGH gang not fitting since ``blocked_since``."""
    high, high_row = _gang(1, 2, same_rack=True)
    low, low_row = _gang(2, 1, same_rack=False)
    high = replace(high, rank=rank, order=[rank, "2026-11-26T11:00:01", 1, 0])
    low = replace(low, rank=2, order=[2, "2026-11-26T10:00:02", 2, 0])
    cycle = replace(_input([high, low]), preemption=True, min_runtime=600.0, blocked_since=blocked_since)
    source = OneOldLowGang({1: high_row, 2: low_row})
    source.age = low_age
    decision = Walk(cycle, source, Policy()).decide()
    return decision, {pk: verdict for verdict in decision.verdicts for pk in verdict.group_ids}


def test_with_a_minimum_runtime_a_gang_waits_it_before_evicting_and_keeps_its_machines_from_low_work():
    # given a HIGH gang that fits only by evicting the old LOW gang on rack a, and a LOW gang that
    # fits only on a2, with a minimum runtime of ten minutes
    # when the walk decides for the first time the HIGH gang does not fit
    decision, said = _high_and_low_walked({})
    # then nothing is evicted nor placed: the HIGH gang keeps rack a and says when it evicts
    assert (decision.evictions, decision.placements) == ((), ())
    until = NOW + timedelta(seconds=600)
    assert said[1].reason["keeping"] == {"where": "rack a, 2 machines", "until": until.isoformat()}
    assert said[1].reason["message"].endswith(
        "; keeping rack a, 2 machines from LOW work, and evicting the LOW work there at 12:10 UTC if it has not "
        "freed by then (the pool's minimum runtime)")
    assert said[1].proof is None
    # and the LOW gang is kept off a2, told for whom and until when
    assert said[2].reason["keeping"] == {"where": "rack a, 2 machines", "until": until.isoformat()}
    assert said[2].reason["message"].startswith("waiting: rack a, 2 machines is kept for a higher-priority gang")
    # and the walk carries when the HIGH gang first did not fit, and wakes the pool when it evicts
    assert dict(decision.blocked_since) == {1: NOW.timestamp()}
    assert decision.wake_at == until.isoformat()


def test_once_it_has_waited_the_minimum_runtime_the_gang_evicts():
    # given the same queue, the HIGH gang not fitting since ten minutes ago
    # when the walk decides
    decision, _said = _high_and_low_walked({1: (NOW - timedelta(seconds=600)).timestamp()})
    # then the LOW gang on rack a is evicted for it and it is placed there; nothing is carried on
    assert [e.group_id for e in decision.evictions] == [50]
    assert [(p.gang.pk, p.placement.tasks) for p in decision.placements] == [(1, {"t0": "a1", "t1": "a2"})]
    assert dict(decision.blocked_since) == {}



def test_a_normal_gang_does_not_evict_low_work_older_than_twice_the_minimum_runtime_and_keeps_its_machines():
    # given a NORMAL gang that fits only by evicting the LOW gang on rack a, which started an hour ago
    # (more than twice the minimum runtime of ten minutes), the NORMAL gang not fitting since ten minutes ago
    # when the walk decides
    decision, said = _high_and_low_walked({1: (NOW - timedelta(seconds=600)).timestamp()}, rank=1)
    # then nothing is evicted nor placed: the NORMAL gang keeps rack a from LOW work and says why
    assert (decision.evictions, decision.placements) == ((), ())
    assert said[1].reason["keeping"] == {"where": "rack a, 2 machines", "until": None}
    assert said[1].reason["message"].endswith(
        "; NORMAL work evicts only LOW work that has run at most 20 min (twice the pool's minimum runtime), so "
        "keeping rack a, 2 machines from LOW work until it frees (the pool's minimum runtime)")
    assert said[1].proof is None
    # and the LOW gang that would fit on a2 is kept off it, told for whom
    assert said[2].reason["keeping"] == {"where": "rack a, 2 machines", "until": None}
    assert said[2].reason["message"] == (
        "waiting: rack a, 2 machines is kept for a higher-priority gang that waits for it to free without "
        "evicting the LOW work there (the pool's minimum runtime)")
    # and the NORMAL gang's wait is carried on
    assert dict(decision.blocked_since) == {1: (NOW - timedelta(seconds=600)).timestamp()}


def test_a_normal_gang_evicts_low_work_that_has_run_less_than_twice_the_minimum_runtime():
    # given the same NORMAL gang, the LOW gang on rack a started fifteen minutes ago
    # when the walk decides
    decision, _said = _high_and_low_walked({1: (NOW - timedelta(seconds=600)).timestamp()}, rank=1,
                                           low_age=timedelta(minutes=15))
    # then the LOW gang is evicted for it and it is placed on rack a
    assert [e.group_id for e in decision.evictions] == [50]
    assert [(p.gang.pk, p.placement.tasks) for p in decision.placements] == [(1, {"t0": "a1", "t1": "a2"})]
