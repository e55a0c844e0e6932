"""Reservations carry the facts of their holder that the cluster side needs (docs/architecture.md):
the scheduler app's rows point into no other app, quota and preemptibility are read from them, and
rows written before the facts were kept get them from their tasks' workflows."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps
from django.contrib.auth.models import Group

from scheduler.models import Reservation
from scheduler.selectors import pool_quota_use
from scheduler.services.access import team_quota_set
from tests.factories import make_nvl72_pool
from tests.workflows.test_access_quotas import gang
from workflows.models import Task, Workflow
from workflows.scheduling.cycle import placement_cycle_run
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db


def test_no_model_of_the_scheduler_app_points_into_the_workflows_app():
    # given the scheduler app's models
    models = apps.get_app_config("scheduler").get_models()
    # then none of their own relations (the workflows app's point the other way) leads to a model of it
    assert [f"{model.__name__}.{field.name}" for model in models for field in model._meta.get_fields()
            if field.is_relation and not field.auto_created
            and field.related_model._meta.app_label == "workflows"] == []


def test_a_placement_copies_the_team_and_preemptibility_onto_the_reservations(user):
    # given team llm with a quota, and a NORMAL and a LOW workflow of its member alice
    pool = make_nvl72_pool("facts", zones=1, spines=1, racks=2, nodes=4)
    llm = Group.objects.create(name="llm")
    user.groups.add(llm)
    team_quota_set(pool=pool, team=llm, gpu=16)
    normal, _ = workflow_submit(user=user, pool_name="facts", spec=gang("normal", 2))
    low, _ = workflow_submit(user=user, pool_name="facts", spec=gang("low", 1), priority="LOW")
    # when both are placed
    placement_cycle_run(pool_id=pool.pk)
    # then each task's reservation names the team and whether the work is preemptible
    facts = {(Task.objects.get(pk=task_id).workflow_id, team_id, preemptible)
             for task_id, team_id, preemptible in Reservation.objects.values_list("task_id", "team_id", "preemptible")}
    assert facts == {(normal.pk, llm.pk, False), (low.pk, llm.pk, True)}
    assert Reservation.objects.count() == 3
    # and the quota use is counted from them
    assert pool_quota_use(pool) == [{"team": "llm", "quota_gpu": 16, "used_gpu": 8, "low_gpu": 4}]


def test_the_migration_fills_the_facts_of_existing_reservations(user):
    # given placed NORMAL and LOW work whose reservations lost their facts (rows of the older schema)
    pool = make_nvl72_pool("old", zones=1, spines=1, racks=2, nodes=4)
    llm = Group.objects.create(name="llm")
    user.groups.add(llm)
    normal, _ = workflow_submit(user=user, pool_name="old", spec=gang("normal", 2))
    low, _ = workflow_submit(user=user, pool_name="old", spec=gang("low", 1), priority="LOW")
    placement_cycle_run(pool_id=pool.pk)
    Reservation.objects.update(team=None, preemptible=False)
    # when the data migration runs
    migration = importlib.import_module("workflows.migrations.0009_reservation_facts")
    migration.forwards(apps, None)
    # then the rows have their workflows' team and priority again
    rows = {Task.objects.get(pk=task_id).workflow_id: (team_id, preemptible)
            for task_id, team_id, preemptible in Reservation.objects.values_list("task_id", "team_id", "preemptible")}
    assert rows == {normal.pk: (llm.pk, False), low.pk: (llm.pk, True)}


def test_deleting_a_workflow_in_the_admin_frees_what_its_tasks_held(staff_user, user):
    # given a placed workflow holding 8 GPUs
    from django.test import Client

    pool = make_nvl72_pool("gone", zones=1, spines=1, racks=1, nodes=4)
    workflow, _ = workflow_submit(user=user, pool_name="gone", spec=gang("held", 2))
    placement_cycle_run(pool_id=pool.pk)
    assert Reservation.objects.filter(released_at__isnull=True).count() == 2
    client = Client()
    client.force_login(staff_user)
    # when staff delete it in the admin
    response = client.post(f"/admin/workflows/workflow/{workflow.pk}/delete/", {"post": "yes"})
    # then the workflow and its reservations are gone (nothing holds capacity for tasks that do not exist)
    assert response.status_code == 302
    assert not Workflow.objects.filter(pk=workflow.pk).exists()
    assert Reservation.objects.count() == 0
