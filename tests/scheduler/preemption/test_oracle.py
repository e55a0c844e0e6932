"""Victim choice against the exact oracle (every subset solved) on small random instances
(bench.kit.preemption_instances.small_instance: at most 8 machines under zone/rack keys, up to 8 LOW gangs,
a preemptor with required/preferred constraints):
- a victim set is found exactly when evicting some set lets the preemptor fit (every instance);
- the set fits (its placement meets the constraints on the released snapshot) and names only candidates;
- the set is the oracle's optimum for the objective of docs/design.md §9 (the work lost weighed, at
  ``NOW``; start times are 0-3) in at least 99% of instances;
- the service's search near the LOW-free placement (``victims_choose_near``) is complete too, and its
  set is the oracle's optimum of the region it is defined to take in at least 99% of instances.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.kit.instances import check
from bench.kit.preemption_instances import oracle, released, small_instance
from scheduler.placement import Placement, solve
from scheduler.preemption import DEFAULT_MAX_SOLVES, regions_around, restricted, victims_choose, victims_choose_near

NOW = 5.0  # the instances' clock: candidates started at 0-3


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_a_victim_set_is_found_exactly_when_one_exists(seed: int) -> None:
    # given
    snapshot, preemptor, candidates = small_instance(random.Random(seed))
    # when
    choice = victims_choose(snapshot, preemptor, candidates, now=NOW)
    # then
    best = oracle(snapshot, preemptor, candidates, now=NOW)
    assert (choice is None) == (best is None)
    if choice is not None:
        by_key = {c.key: c for c in candidates}
        assert set(choice.victims) <= set(by_key)
        assert list(choice.victims) == sorted(choice.victims)
        victims = [by_key[k] for k in choice.victims]
        assert check(released(snapshot, victims), preemptor, choice.placement) == []
        assert choice.gpu_evicted == sum(res.gpu for v in victims for _name, res in v.holdings)
        assert 1 <= choice.explored <= DEFAULT_MAX_SOLVES


def test_the_chosen_set_is_optimal_in_at_least_99_percent_of_instances() -> None:
    # given: seeds 0..1999 (about 1,700 with a victim set)
    instances = [small_instance(random.Random(seed)) for seed in range(2000)]
    # when
    optimal, feasible = 0, 0
    for snapshot, preemptor, candidates in instances:
        best = oracle(snapshot, preemptor, candidates, now=NOW)
        choice = victims_choose(snapshot, preemptor, candidates, now=NOW)
        if best is None or choice is None:
            continue
        feasible += 1
        optimal += int(choice.victims == best)
    # then
    rate = optimal / feasible
    assert feasible > 1500
    assert rate >= 0.99, f"optimal in {optimal} of {feasible} instances ({rate:.2%})"


def _near_expected(snapshot, preemptor, candidates, near):
    """What docs/design.md §9 asks of the near search, from the oracle: the optimum of the first
    region (the LOW-free placement's machines, then the domains around them) that has a victim set,
    unless the whole pool's optimum reclaims borrowed work and evicts less work within its quota; the
    whole pool's optimum when no region has one."""
    by_key = {c.key: c for c in candidates}
    own = lambda keys: sum(by_key[k].gpu for k in keys if not by_key[k].borrowing)  # noqa: E731
    anywhere = oracle(snapshot, preemptor, candidates, now=NOW)
    for machines in regions_around(snapshot, near) if near else []:
        best = oracle(restricted(snapshot, machines), preemptor, candidates, now=NOW)
        if best is None:
            continue
        reclaims = anywhere is not None and any(by_key[k].borrowing for k in anywhere) and own(anywhere) < own(best)
        if not reclaims:
            return best
    return anywhere


def _low_free_machines(snapshot, preemptor, candidates) -> frozenset[str] | None:
    result = solve(released(snapshot, candidates), preemptor)
    return result.nodes if isinstance(result, Placement) else None


def test_the_near_search_is_complete_and_optimal_in_its_region_in_at_least_99_percent_of_instances() -> None:
    # given: seeds 0..999, the preemptor's machines on the LOW-free view as the service computes them
    instances = [small_instance(random.Random(seed)) for seed in range(1000)]
    # when
    optimal, feasible = 0, 0
    for snapshot, preemptor, candidates in instances:
        near = _low_free_machines(snapshot, preemptor, candidates)
        choice, _region = victims_choose_near(snapshot, preemptor, candidates, near, now=NOW)
        # then: complete (a set exactly when evicting some set lets the preemptor fit)
        assert (choice is None) == (oracle(snapshot, preemptor, candidates, now=NOW) is None)
        if choice is None:
            continue
        feasible += 1
        optimal += int(choice.victims == _near_expected(snapshot, preemptor, candidates, near))
    rate = optimal / feasible
    assert feasible > 700
    assert rate >= 0.99, f"optimal in {optimal} of {feasible} instances ({rate:.2%})"
