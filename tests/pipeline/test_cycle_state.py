"""The state one placement cycle hands to the next (workflows/scheduling/cycle/state.py)."""

from datetime import UTC, datetime, timedelta

from workflows.scheduling.cycle.state import CycleState

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
STORED = {"cursor": [1, 0, "2026-11-29T11:00:00+00:00", 7, 0], "fingerprint": [3, 12, 56, 6], "epoch": 4,
          "keys_version": 2, "wake_at": "2026-11-29T12:10:00+00:00", "proofs": {"sig": 4}, "proofs_epoch": 4,
          "usage": [[None, 0.0], [3, 12.5]], "blocked_since": {"9": 1.5}}


def test_state_reads_back_what_it_stored():
    # given a state as a cycle stores it
    state = CycleState.from_json(STORED)
    # then it reads typed and writes the same JSON
    assert state.wake_at == NOW + timedelta(minutes=10) and state.blocked_since == {9: 1.5}
    assert state.to_json() == STORED
    assert CycleState.from_json(None) == CycleState()


def test_a_complete_walk_stands_until_the_queue_epoch_keys_or_wake_up_move():
    # given the state a complete walk left
    state = CycleState.from_json({**STORED, "cursor": None})
    seen = {"fingerprint": [3, 12, 56, 6], "capacity_epoch": 4, "keys_version": 2}
    # then an unchanged pool is idle, and any change walks again
    assert state.carried(**seen, now=NOW) is None
    assert state.carried(**{**seen, "fingerprint": [2, 6, 20, 4]}, now=NOW) is not None
    assert state.carried(**{**seen, "keys_version": 3}, now=NOW) is not None
    assert state.carried(**seen, now=NOW + timedelta(minutes=10)) is not None
    # and proofs are carried only at their capacity epoch
    assert state.carried(**{**seen, "capacity_epoch": 4}, now=NOW + timedelta(hours=1)).proofs == {"sig": 4}
    assert state.carried(**{**seen, "capacity_epoch": 5}, now=NOW).proofs == {}


def test_a_stopped_walk_resumes_with_the_usage_it_ordered_by():
    # given the state of a walk that ran out of time
    carried = CycleState.from_json(STORED).carried(fingerprint=[3, 12, 56, 6], capacity_epoch=4, keys_version=2,
                                                   now=NOW)
    # then the next one resumes there, ordering by the same usage
    assert carried is not None and carried.cursor == STORED["cursor"]
    assert carried.usage == {None: 0.0, 3: 12.5} and carried.blocked_since == {9: 1.5}
