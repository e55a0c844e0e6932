"""Celery task names say where the task is defined, and the routing and beat tables name real tasks."""

from __future__ import annotations

from django.conf import settings

from osmo.celery import app


def _service_tasks() -> dict[str, str]:
    """The service's registered tasks: name -> the module that defines it (Celery's and tests' left out)."""
    app.loader.import_default_modules()
    return {name: task.__module__ for name, task in app.tasks.items()
            if task.__module__.split(".")[0] in {"osmo", "pages", "scheduler", "workflows"}}


def test_every_task_name_starts_with_the_app_that_defines_it():
    # given the registered tasks
    tasks = _service_tasks()
    # then each name's prefix is the app of its module (a placement task is not called scheduler.*)
    assert {name: module for name, module in tasks.items() if name.split(".")[0] != module.split(".")[0]} == {}
    assert tasks["workflows.placement_cycle_run"] == "workflows.tasks"
    assert tasks["scheduler.worker_heartbeat"] == "scheduler.tasks"


def test_each_app_keeps_its_task_names_beside_its_tasks():
    # given the registered tasks and the names each app keeps
    from scheduler import tasks as scheduler_tasks
    from workflows import jobs

    tasks = _service_tasks()
    kept = {value for name, value in vars(jobs).items() if name.isupper() and isinstance(value, str)
            and value.startswith("workflows.")}
    # then the workflows app's names are those of workflows.jobs, the scheduler's of scheduler.tasks
    assert {name for name, module in tasks.items() if module == "workflows.tasks"} == kept
    assert {name for name, module in tasks.items() if module == "scheduler.tasks"} == {scheduler_tasks.WORKER_HEARTBEAT}


def test_routes_and_beat_name_registered_tasks():
    # given the registered tasks
    tasks = _service_tasks()
    # then every routed name and every beat entry is one of them, and every task has a queue
    assert set(settings.CELERY_TASK_ROUTES) - set(tasks) == set()
    assert {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()} - set(tasks) == set()
    assert set(tasks) - set(settings.CELERY_TASK_ROUTES) == set()


def test_the_console_quiets_only_registered_tasks():
    """Replays a console full of tick lines after the tasks were renamed (docs/operations.md, "Logs"):
    every name the routine-line filter lowers is a registered task."""
    from osmo.logs import ROUTINE_TASKS

    # given the registered tasks
    tasks = _service_tasks()
    # then the filter names no task that does not exist
    assert set(ROUTINE_TASKS) - set(tasks) == set()
