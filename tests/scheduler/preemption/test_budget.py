"""The victim search's bounds (docs/design.md §9): questions capacity arithmetic answers without the
solver (counted as steps), the solve budget the regions around a placement share, and the ceiling on
GPUs within quota that the near search gives a region's and the whole pool's search.

Sketch of the pool of the first tests: n0 and n1, 4 GPUs each, one rack; LOW gang ``a`` holds n0,
``b`` holds n1; the preemptor is two tasks of 4 GPUs with no topology constraint.
"""

from __future__ import annotations

import random

import scheduler.preemption.feasibility as feasibility
from bench.kit.preemption_instances import oracle, released, small_instance
from scheduler.placement import Placement, Policy, Resources, solve
from scheduler.preemption import Candidate, victims_choose, victims_choose_near
from scheduler.preemption.feasibility import Budget, Feasibility, bits_of, mask_of
from tests.scheduler.placement.builders import cluster, gang, names, tree

SNAPSHOT = cluster(("rack",), [("r1", 0), ("r1", 0)])
PREEMPTOR = gang(tree(tasks=names("t", 2)), gpu=4)
NOW = 5.0  # small_instance's clock: candidates started at 0-3


def low(key: str, name: str, borrowing: bool = False) -> Candidate:
    return Candidate(key, ((name, Resources(gpu=4)),), borrowing, 0.0)


def _low_free_machines(snapshot, preemptor, candidates) -> frozenset[str] | None:
    """The preemptor's machines on the view without LOW work, as the service computes them."""
    result = solve(released(snapshot, candidates), preemptor)
    return result.nodes if isinstance(result, Placement) else None


def counting_solver(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = feasibility.solve

    def solve(cluster, gang, policy=None):
        calls.append(1)
        return real(cluster, gang, policy)

    monkeypatch.setattr(feasibility, "solve", solve)
    return calls


def test_a_question_short_of_capacity_is_answered_without_the_solver_and_counted_as_a_step(monkeypatch):
    # given
    calls = counting_solver(monkeypatch)
    budget = Budget(8)
    pool = Feasibility(SNAPSHOT, PREEMPTOR, [low("a", "n0"), low("b", "n1")], Policy(), budget)
    # when only a is evicted (4 GPUs free, 8 asked)
    witness = pool.check(0b01)
    # then no placement, no solver call, one step spent; the answer is remembered
    assert witness is None and calls == [] and budget.solves == 1
    assert pool.check(0b01) is None and budget.solves == 1
    # and with both evicted the solver answers
    assert pool.check(0b11) is not None and calls == [1] and budget.solves == 2


def test_a_question_short_of_capacity_is_not_answered_once_the_budget_is_spent():
    # given a budget of one step, spent
    budget = Budget(1)
    pool = Feasibility(SNAPSHOT, PREEMPTOR, [low("a", "n0"), low("b", "n1")], Policy(), budget)
    assert pool.check(0b01) is None
    # when / then
    try:
        pool.check(0b10)
    except feasibility.BudgetSpent:
        pass
    else:
        raise AssertionError("the second question was answered beyond the budget")
    assert budget.solves == 1 and 0b10 not in pool.known


def test_nothing_is_solved_when_every_candidate_evicted_is_not_capacity_enough(monkeypatch):
    # given only a is a candidate: 4 GPUs at most, 8 asked
    calls = counting_solver(monkeypatch)
    # when
    choice = victims_choose(SNAPSHOT, PREEMPTOR, [low("a", "n0")])
    # then
    assert choice is None and calls == []


def test_the_set_bits_are_listed_lowest_first_and_built_back_whether_few_or_many_are_set():
    # given a sparse and a dense mask over 300 bits
    sparse = 1 << 3 | 1 << 150 | 1 << 299
    dense = (1 << 300) - 1 - (1 << 7)
    # when / then
    assert bits_of(0) == []
    assert bits_of(sparse) == [3, 150, 299]
    assert bits_of(dense) == [i for i in range(300) if i != 7]
    # and masks are built back from them, few or many
    assert mask_of(set(bits_of(sparse))) == sparse
    assert mask_of(set(bits_of(dense))) == dense
    assert mask_of(set()) == 0


def test_a_ceiling_keeps_only_sets_within_it_and_finds_the_optimum_there():
    # given: seeds 0..299 of the small instances, the search's set without a ceiling
    checked = 0
    for seed in range(300):
        snapshot, preemptor, candidates = small_instance(random.Random(seed))
        best = victims_choose(snapshot, preemptor, candidates, now=NOW)
        if best is None:
            continue
        by_key = {c.key: c for c in candidates}
        own = sum(by_key[k].gpu for k in best.victims if not by_key[k].borrowing)
        # when the ceiling is the set's own GPUs within quota, and one fewer
        at = victims_choose(snapshot, preemptor, candidates, now=NOW, ceiling=own)
        below = victims_choose(snapshot, preemptor, candidates, now=NOW, ceiling=own - 1)
        # then the same set, and none (it was the fewest GPUs within quota)
        assert at is not None and at.victims == best.victims
        assert below is None
        checked += 1
    assert checked > 200


def test_the_near_search_is_complete_whatever_the_solve_budget():
    # given: seeds 0..299, the preemptor's placement on the LOW-free view as the service computes it
    found = 0
    for seed in range(300):
        snapshot, preemptor, candidates = small_instance(random.Random(seed))
        near = _low_free_machines(snapshot, preemptor, candidates)
        exists = oracle(snapshot, preemptor, candidates, now=NOW) is not None
        for max_solves in (1, 2, 3, 5):
            # when the regions share a budget this small
            choice, _region = victims_choose_near(snapshot, preemptor, candidates, near, max_solves=max_solves,
                                                  now=NOW)
            # then a set exactly when one exists
            assert (choice is not None) == exists, (seed, max_solves)
        found += exists
    assert found > 200


def test_the_near_search_at_the_default_budget_equals_the_unbounded_one_on_small_instances():
    for seed in range(300):
        # given
        snapshot, preemptor, candidates = small_instance(random.Random(seed))
        near = _low_free_machines(snapshot, preemptor, candidates)
        # when
        bounded = victims_choose_near(snapshot, preemptor, candidates, near, now=NOW)
        unbounded = victims_choose_near(snapshot, preemptor, candidates, near, max_solves=10**6, now=NOW)
        # then
        assert (None if bounded[0] is None else (bounded[0].victims, bounded[1])) == \
            (None if unbounded[0] is None else (unbounded[0].victims, unbounded[1])), seed
