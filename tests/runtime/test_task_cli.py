"""The `osmo` command inside a task (docs/runtime.md, "The osmo command in a task"), through the real
stack: a `celery worker` and beat dispatching to the ``local`` backend, the runtime in bubblewrap, the
task's command calling the live server with the token it was given; ``examples/osmo/local/osmo-cli.yaml``."""

from __future__ import annotations

import pytest

from tests.dispatch.test_local_end_to_end import local_pool  # noqa: F401 (a fixture)
from tests.runtime.test_local_tutorials import command_lines, run_to_the_end, submit_example, tasks_of
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.usefixtures("local_pool")
def test_a_task_reads_its_workflow_and_submits_another_as_its_submitter(user, celery_worker_factory, celery_beat,
                                                                         live_server, worker_env):
    # given a worker and beat whose tasks reach the live server
    worker_env["OSMO_RUNTIME_SERVICE_URL"] = live_server.url
    celery_worker_factory("local", concurrency=2)

    # when the example runs with its follow-up
    workflow = run_to_the_end(submit_example(user, "osmo-cli", follow_up="yes"))

    # then its task read its own workflow while running, listed the pools, submitted a follow-up as the
    # same user, and was refused the credentials
    assert workflow.status == "COMPLETED", tasks_of(workflow)
    lines = command_lines(live_server, user, workflow, "ask")
    assert lines[0].split() == ["Workflow", workflow.workflow_id, "RUNNING"], lines
    assert lines[1].split()[:2] == ["NAME", "STATUS"], lines
    assert any(line.startswith("local ") for line in lines[2:]), lines
    assert any(line.startswith("Submitted workflow follow-up-1") for line in lines), lines
    assert any("A task's token reaches workflows, your profile and reading pools" in line for line in lines), lines
    assert lines[-1] == "credential list refused with exit code 1", lines
    follow_up = Workflow.objects.get(workflow_id="follow-up-1")
    assert (follow_up.submitted_by_id, follow_up.pool.name) == (user.pk, "local")  # its pool by default
    assert run_to_the_end(follow_up).status == "COMPLETED", tasks_of(follow_up)
