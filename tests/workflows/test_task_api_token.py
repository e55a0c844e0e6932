"""A task's ``osmo`` command on the user API (docs/runtime.md, "The osmo command in a task"): its API
token acts as the workflow's submitter while the task holds its pod, on workflows, ``me`` and reading
pools only; the runtime's barrier token and the API token do not stand in for each other."""

from __future__ import annotations

import pytest

from scheduler.dispatch import PodRequest
from tests.workflows.test_runtime_api import BARRIER, placed
from workflows.models import Task
from workflows.scheduling.pod.credentials import with_api_access
from workflows.scheduling.pod.runtime import task_api_env, task_token

pytestmark = pytest.mark.django_db


def api_token(task: Task) -> str:
    return task_api_env(task.pk, task.pod_name, "local-pool")["OSMO_TOKEN"]


def as_task(api_client, task: Task, token: str | None = None):
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {token or api_token(task)}")
    return api_client


def test_the_api_token_acts_as_the_submitter_on_workflows_me_and_pools(user, api_client, settings):
    # given a placed task of the user's workflow
    settings.OSMO_RUNTIME_SERVICE_URL = "http://osmo.example:8000/"
    workflow, [task, _] = placed(user)

    # when its command reads the API with the token it was given
    env = task_api_env(task.pk, task.pod_name, "local-pool")
    client = as_task(api_client, task)
    listed = client.get("/api/workflows/")
    detail = client.get(f"/api/workflows/{workflow.workflow_id}/")
    me = client.get("/api/me/")
    pools = client.get("/api/pools/")

    # then it is the submitter there, and the service's address has no trailing slash for the CLI
    assert env["OSMO_URL"] == "http://osmo.example:8000"
    assert listed.status_code == 200, listed.json()
    assert [row["id"] for row in listed.json()["results"]] == [workflow.workflow_id]
    assert detail.status_code == 200, detail.json()
    assert me.status_code == 200 and me.json()["username"] == user.username
    assert pools.status_code == 200, pools.json()


@pytest.mark.parametrize(("method", "path"), [
    pytest.param("get", "/api/credentials/", id="_case_credential_list"),
    pytest.param("put", "/api/credentials/mine/", id="_case_credential_set"),
    pytest.param("delete", "/api/credentials/mine/", id="_case_credential_delete"),
    pytest.param("patch", "/api/pools/local-pool/", id="_case_pool_change"),
    pytest.param("post", "/api/tokens/", id="_case_access_token_make"),
    pytest.param("get", "/api/tokens/", id="_case_access_token_list"),
])
def test_the_api_token_is_403_outside_workflows_and_reading_pools(admin_user, api_client, method, path):
    # given a staff user's placed task (staff may change pools with their own token)
    _workflow, [task, _] = placed(admin_user)

    # when its token asks for credentials or to change a pool
    response = getattr(as_task(api_client, task), method)(path, {}, format="json")

    # then it is refused in the envelope, saying what the token reaches
    assert response.status_code == 403, response.json()
    assert response.json()["message"].startswith("A task's token reaches workflows, your profile and")


@pytest.mark.parametrize("change", [
    pytest.param({"status": "COMPLETED"}, id="_case_task_ended"),
    pytest.param({"pod_name": "re-placed-pod"}, id="_case_task_re_placed"),
])
def test_the_api_token_stops_working_when_its_task_ends_or_moves(user, api_client, change):
    # given a placed task's token that works
    _workflow, [task, _] = placed(user)
    token = api_token(task)
    assert as_task(api_client, task, token).get("/api/workflows/").status_code == 200

    # when the task ends or gets another pod
    Task.objects.filter(pk=task.pk).update(**change)
    response = as_task(api_client, task, token).get("/api/workflows/")

    # then the token is refused, saying why
    assert response.status_code == 401, response.json()
    assert response.json()["message"].startswith("This task's token no longer works: its task ")


def test_an_inactive_submitter_s_task_token_is_refused(user, api_client):
    # given a placed task whose submitter was deactivated since
    _workflow, [task, _] = placed(user)
    token = api_token(task)
    type(user).objects.filter(pk=user.pk).update(is_active=False)

    # when / then
    response = as_task(api_client, task, token).get("/api/workflows/")
    assert response.status_code == 401, response.json()
    assert "inactive" in response.json()["message"]


def test_the_barrier_token_and_the_api_token_do_not_stand_in_for_each_other(user, api_client):
    # given a placed task's two tokens
    _workflow, [task, _] = placed(user)

    # when each is used where the other belongs
    barrier_as_user = as_task(api_client, task, task_token(task.pk, task.pod_name)).get("/api/workflows/")
    api_client.credentials()
    api_at_barrier = api_client.post(BARRIER, HTTP_AUTHORIZATION=f"Bearer {api_token(task)}")

    # then both are refused
    assert barrier_as_user.status_code == 401, barrier_as_user.json()
    assert api_at_barrier.status_code == 401, api_at_barrier.json()


def test_no_api_token_when_task_api_access_is_off(user, settings):
    settings.OSMO_TASK_API_ACCESS = False
    _workflow, [task, _] = placed(user)
    assert task_api_env(task.pk, task.pod_name, "local-pool") == {}


def test_the_login_goes_with_the_task_s_secrets_unless_the_task_sets_the_variable(user):
    # given a placed task's request, one that sets OSMO_URL itself
    _workflow, [task, _] = placed(user)
    request = PodRequest(pod_name=task.pod_name, namespace="osmo", node_name="slot-1", workflow_id="w", group="g",
                         task=task.name, pool="local-pool", image="busybox")
    own_url = PodRequest(pod_name=task.pod_name, namespace="osmo", node_name="slot-1", workflow_id="w", group="g",
                         task=task.name, pool="local-pool", image="busybox", environment={"OSMO_URL": "http://mine"})

    # when / then: both variables are secret ones (a Secret, the plan's 0600 file), never the pod's own env
    assert sorted(with_api_access(request, task.pk).env) == ["OSMO_POOL", "OSMO_TOKEN", "OSMO_URL"]
    assert sorted(with_api_access(own_url, task.pk).env) == ["OSMO_POOL", "OSMO_TOKEN"]
    assert request.credentials.env == {}  # the request's own payload is not changed

