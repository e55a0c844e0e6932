"""The key-change rule: any change of a pool's ordered (key, label) list bumps keys_version, through
one service, whoever makes it (API, admin, import_pool)."""

from __future__ import annotations

import pytest

from osmo.errors import ValidationFailedError
from scheduler.models import Pool
from scheduler.services import (
    KeySpec,
    inventory_import,
    inventory_parse,
    pool_keys_set,
)
from tests.scheduler.conftest import KEYS

pytestmark = pytest.mark.django_db
ZONE = KeySpec("zone", "topology.kubernetes.io/zone")
RACK = KeySpec("rack", "topology.kubernetes.io/rack")
SPINE = KeySpec("spine", "topology.kubernetes.io/spine")


@pytest.mark.parametrize(
    ("_case", "keys", "bumped"),
    [
        ("_case_same", [ZONE, RACK], False),
        ("_case_same_as_dicts", KEYS, False),
        ("_case_added", [ZONE, SPINE, RACK], True),
        ("_case_removed", [ZONE], True),
        ("_case_reordered", [RACK, ZONE], True),
        ("_case_relabelled", [ZONE, KeySpec("rack", "example.com/rack")], True),
        ("_case_renamed", [ZONE, KeySpec("shelf", RACK.label)], True),
        ("_case_all_removed", [], True),
    ],
)
def test_keys_version_bumps_only_when_the_ordered_list_changes(small_pool, _case, keys, bumped):
    # when
    changed = pool_keys_set(pool=small_pool, keys=keys)

    # then
    pool = Pool.objects.get(pk=small_pool.pk)
    assert changed is bumped
    assert pool.keys_version == (2 if bumped else 1)
    expected = [(k["key"], k["label"]) if isinstance(k, dict) else (k.key, k.label) for k in keys]
    assert list(pool.topology_keys.order_by("position").values_list("key", "label")) == expected
    assert list(pool.topology_keys.order_by("position").values_list("position", flat=True)) == list(range(len(keys)))


def test_invalid_keys_are_rejected_with_paths_and_nothing_changes(small_pool):
    with pytest.raises(ValidationFailedError) as excinfo:
        pool_keys_set(pool=small_pool, keys=[ZONE, KeySpec("Zone!", "x/y"), KeySpec("zone", "a/b")])

    assert excinfo.value.details["errors"] == [
        {
            "path": "topology_keys[1].key",
            "message": "key 'Zone!' is not valid: use lowercase letters, digits and inner hyphens, e.g. gpu-clique",
        },
        {"path": "topology_keys[2].key", "message": "key 'zone' is already used by topology_keys[0]"},
    ]
    pool = Pool.objects.get(pk=small_pool.pk)
    assert pool.keys_version == 1
    assert list(pool.topology_keys.values_list("key", flat=True)) == ["zone", "rack"]


def test_import_with_reordered_keys_bumps_and_same_keys_do_not(small_pool):
    document = {"pool": {"name": "small"}, "topology_keys": [KEYS[1], KEYS[0]]}

    first = inventory_import(inventory_parse(document))
    second = inventory_import(inventory_parse(document))
    without_keys = inventory_import(inventory_parse({"pool": {"name": "small"}}))

    assert (first.keys_changed, first.keys_version) == (True, 2)
    assert (second.keys_changed, second.keys_version) == (False, 2)
    assert (without_keys.keys_changed, without_keys.keys_version) == (False, 2)  # no topology_keys: keys kept
