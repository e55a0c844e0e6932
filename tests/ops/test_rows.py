"""``osmo.rows``: records read by field name from the columns a map names, in one query."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from osmo.rows import named_rows
from tests.factories import make_node, make_pool
from tests.pipeline.helpers import gang_spec
from workflows.models import TaskGroup
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


class _Gang(NamedTuple):
    name: str  # read from its own column
    pk: int
    owner: int  # read from the column the map names
    label: str


def test_each_field_is_read_from_its_own_column_or_the_mapped_one(user, django_assert_num_queries):
    # given: a stored workflow with one gang
    pool = make_pool("rows")
    make_node(pool, "n1", {}, gpu=8)
    workflow, _ = workflow_submit(user=user, pool_name=pool.name, spec=gang_spec("rows", 1, 1, key=None))
    gang = TaskGroup.objects.get(workflow=workflow)
    # when: its row is read into a record whose fields are not in the columns' order
    with django_assert_num_queries(1):
        rows = named_rows(TaskGroup.objects.filter(pk=gang.pk), _Gang,
                          {"owner": "workflow__submitted_by_id", "label": "workflow__workflow_id"})
    # then: every field holds its own column's value
    assert rows == [_Gang(name=gang.name, pk=gang.pk, owner=user.pk, label=workflow.workflow_id)]


def test_a_mapped_column_for_no_field_is_refused_before_any_query(django_assert_num_queries):
    # given: a map naming a field the record does not have
    with django_assert_num_queries(0), pytest.raises(ValueError, match="nope"):
        # when: rows are read with it
        named_rows(TaskGroup.objects.all(), _Gang, {"nope": "name"})
    # then: refused, naming the field (asserted by the raises above)
