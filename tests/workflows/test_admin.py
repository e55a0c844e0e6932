import pytest

from tests.factories import make_nvl72_pool
from workflows.models import Workflow
from workflows.services import workflow_submit

pytestmark = pytest.mark.django_db

SPEC = "workflow:\n  name: adm\n  tasks:\n  - {name: t, image: busybox, command: [true]}\n"


@pytest.fixture
def workflow(user):
    make_nvl72_pool("nvl72", zones=1, spines=1, racks=1, nodes=2)
    return workflow_submit(user=user, pool_name="nvl72", spec=SPEC)[0]


def test_workflow_admin_pages_load(client, staff_user, workflow):
    client.force_login(staff_user)
    changelist = client.get("/admin/workflows/workflow/?status__exact=PENDING")
    assert changelist.status_code == 200
    assert b"adm-1" in changelist.content
    assert client.get(f"/admin/workflows/workflow/{workflow.pk}/change/").status_code == 200
    assert client.get("/admin/workflows/taskgroup/").status_code == 200
    assert client.get("/admin/workflows/statustransition/").status_code == 200


def test_cancel_action(client, staff_user, workflow):
    client.force_login(staff_user)
    data = {"action": "cancel_workflows", "_selected_action": [workflow.pk]}
    response = client.post("/admin/workflows/workflow/", data, follow=True)
    assert response.status_code == 200
    workflow.refresh_from_db()
    assert workflow.status == "FAILED_CANCELED"
    assert workflow.failure_message == "canceled by root"
    assert Workflow.objects.count() == 1
