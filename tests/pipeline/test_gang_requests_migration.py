"""The data migration that gives gangs stored before their task requests and signature were both
(docs/design.md §8: the cycle reads a gang's request from its group row alone)."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps

from tests.pipeline.helpers import gang_spec
from workflows.models import TaskGroup
from workflows.services import workflow_submit

migration = importlib.import_module("workflows.migrations.0008_gang_requests")


@pytest.mark.django_db
def test_a_gang_stored_without_requests_gets_those_a_submission_stores(user, racks):
    # given two submitted gangs, one of them as stored before requests and signatures were
    old, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("old", 3, 2))
    new, _ = workflow_submit(user=user, pool_name=racks.name, spec=gang_spec("new", 2, 1, key=None))
    expected = TaskGroup.objects.values_list("task_requests", "signature").get(workflow=old)
    untouched = TaskGroup.objects.values_list("task_requests", "signature", "updated_at").get(workflow=new)
    TaskGroup.objects.filter(workflow=old).update(task_requests=None, signature="")
    # when the migration runs
    migration.gang_requests_fill(apps, None)
    # then the old gang has what its submission stored, and the other one is left alone
    assert TaskGroup.objects.values_list("task_requests", "signature").get(workflow=old) == expected
    assert TaskGroup.objects.values_list("task_requests", "signature", "updated_at").get(workflow=new) == untouched
    assert expected[0] is not None and len(expected[1]) == 64
