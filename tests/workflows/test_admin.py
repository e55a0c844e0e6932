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


def test_an_admin_defines_tags_and_the_label_policy_with_their_refusals(client, staff_user, workflow):
    # given
    from workflows.models import LabelPolicySetting, Tag

    client.force_login(staff_user)
    # when
    bad_tag = client.post("/admin/workflows/tag/add/", {"name": "not ok", "description": ""})
    good_tag = client.post("/admin/workflows/tag/add/", {"name": "baseline", "description": "reference"})
    base = {"allowed_keys": '["team", "run"]', "required_keys": '["run"]', "max_labels": "4",
            "pod_label_keys": '["team"]', "pod_label_prefix": "example.com/", "metric_values": '{"team": ["a"]}'}
    bad_policy = client.post("/admin/workflows/labelpolicysetting/add/",
                             {**base, "required_keys": '["owner"]', "pod_label_prefix": "has space/"})
    good_policy = client.post("/admin/workflows/labelpolicysetting/add/", base)
    # then
    assert bad_tag.status_code == 200 and b"invalid tag name" in bad_tag.content
    assert good_tag.status_code == 302
    assert list(Tag.objects.values_list("name", flat=True)) == ["baseline"]
    assert bad_policy.status_code == 200
    assert b"a required key must also be allowed" in bad_policy.content
    assert b"prefix + key must be a label key" in bad_policy.content
    assert good_policy.status_code == 302
    policy = LabelPolicySetting.objects.get()
    assert (policy.required_keys, policy.pod_label_prefix) == (["run"], "example.com/")
    # one policy: no second one is added
    assert client.get("/admin/workflows/labelpolicysetting/add/").status_code == 403
    # an admin may tag a workflow from its page
    assert client.get(f"/admin/workflows/workflow/?tags__id__exact={Tag.objects.get().pk}").status_code == 200
