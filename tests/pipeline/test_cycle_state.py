"""The state one placement cycle hands to the next (workflows/scheduling/cycle/state.py), and its
table (``workflows.PoolCycleState``)."""

import json
from datetime import UTC, datetime, timedelta

import pytest

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


@pytest.mark.django_db(transaction=True)
def test_the_migration_moves_each_pools_state_from_the_pool_row_into_the_workflows_table_and_back():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    # given two pools of the schema before the move, one with a stored state (in the pool's column)
    after = MigrationExecutor(connection).loader.graph.leaf_nodes()
    before = [("workflows", "0022_labels_tags_policy"), *[node for node in after if node[0] != "workflows"]]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    old = executor.loader.project_state(before).apps.get_model("scheduler", "Pool")
    walked, fresh = old.objects.create(name="walked"), old.objects.create(name="fresh")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE scheduler_pool SET cycle_state = %s WHERE id = %s", [json.dumps(STORED), walked.pk])
    # when
    executor = MigrationExecutor(connection)
    executor.migrate(after)
    # then the walked pool's state is its row in the new table, the other has none, and the column is gone
    new = executor.loader.project_state(after).apps.get_model("workflows", "PoolCycleState")
    assert dict(new.objects.values_list("pool_id", "state")) == {walked.pk: STORED}
    assert fresh.pk not in set(new.objects.values_list("pool_id", flat=True))
    with connection.cursor() as cursor:
        columns = {column.name for column in connection.introspection.get_table_description(cursor, "scheduler_pool")}
    assert "cycle_state" not in columns
    # and backwards the column comes back holding it
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    with connection.cursor() as cursor:
        cursor.execute("SELECT id, cycle_state FROM scheduler_pool ORDER BY id")
        back = {pk: (json.loads(state) if isinstance(state, str) else state) for pk, state in cursor.fetchall()}
    assert back == {walked.pk: STORED, fresh.pk: None}
    MigrationExecutor(connection).migrate(after)
