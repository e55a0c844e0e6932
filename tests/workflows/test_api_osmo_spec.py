"""OSMO's spec at the API (docs/spec.md): the spec's pool, warnings for repeated keys, tokens and
task fields refused by path with nothing stored."""

from __future__ import annotations

import pytest

from tests.factories import make_nvl72_pool
from workflows.models import Task, Workflow

pytestmark = pytest.mark.django_db

SPEC = """workflow:
  name: hello
  pool: {pool}
  tasks:
  - name: train
    image: busybox
    command: [sh, /tmp/run.sh]
    files:
    - path: /tmp/run.sh
      contents: echo {{{{workflow_id}}}} > {{{{output}}}}/id.txt
"""


@pytest.fixture
def pools():
    return (make_nvl72_pool("alpha", zones=1, spines=1, racks=1, nodes=1),
            make_nvl72_pool("beta", zones=1, spines=1, racks=1, nodes=1))


def test_the_spec_pool_is_used_when_the_request_names_none(user_client, pools):
    # when
    response = user_client.post("/api/workflows/", {"spec": SPEC.format(pool="beta")}, format="json")

    # then
    assert response.status_code == 201, response.json()
    assert response.json()["pool"] == "beta"
    assert response.json()["warnings"] == []
    assert Workflow.objects.get().pool.name == "beta"


def test_the_spec_pool_is_used_by_a_raw_yaml_dry_run(user_client, pools):
    # when
    response = user_client.post("/api/workflows/?dry_run=true", SPEC.format(pool="alpha"),
                                content_type="application/yaml")

    # then
    assert response.status_code == 200, response.json()
    assert (response.json()["pool"], response.json()["warnings"]) == ("alpha", [])
    assert Workflow.objects.count() == 0


def test_a_request_naming_another_pool_than_the_spec_is_refused_naming_both(user_client, pools):
    # when
    response = user_client.post("/api/workflows/", {"pool": "alpha", "spec": SPEC.format(pool="beta")},
                                format="json")

    # then
    assert response.status_code == 400
    assert response.json()["details"]["errors"] == [{
        "path": "workflow.pool",
        "message": "the spec asks for pool 'beta' but the request names pool 'alpha'; name one pool, or the same "
                   "in both",
    }]
    assert Workflow.objects.count() == 0


def test_no_pool_in_the_request_nor_the_spec_is_refused(user_client, pools):
    # given
    spec = SPEC.replace("  pool: {pool}\n", "").format()

    # when
    response = user_client.post("/api/workflows/", {"spec": spec}, format="json")

    # then
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "pool_required"
    assert body["details"]["errors"] == [{"path": "pool", "message": "No pool given: name one in the request "
                                          "(pool, --pool) or in the spec (workflow.pool)."}]
    assert Workflow.objects.count() == 0


@pytest.mark.parametrize("set_env", [{}, {"RUN": "1"}], ids=["plain", "with-set-env"])
def test_a_repeated_key_is_accepted_with_a_warning_in_the_answer(user_client, pools, set_env):
    """Regression (with-set-env): with `set_env` (`--set-env`) the rendered spec was loaded again to add
    the variables, strictly, so a repeated key (OSMO's GitHub recipe writes a file's `path` twice) was
    refused as invalid YAML while the same spec without `set_env` was accepted."""
    # given
    spec = SPEC.format(pool="alpha").replace("    image: busybox\n", "    image: ubuntu\n    image: busybox\n")

    # when
    dry = user_client.post("/api/workflows/", {"spec": spec, "dry_run": True, "set_env": set_env}, format="json")
    submitted = user_client.post("/api/workflows/", {"spec": spec, "set_env": set_env}, format="json")

    # then: accepted, the last value kept, the warning said with the lines of the spec as sent
    warning = {"path": "workflow.tasks[0].image",
               "message": "duplicate key 'image' at line 7 (first at line 6): the last value is kept"}
    assert dry.status_code == 200, dry.json()
    assert dry.json()["warnings"] == [warning]
    assert submitted.status_code == 201, submitted.json()
    assert submitted.json()["warnings"] == [warning]
    assert list(Task.objects.values_list("image", "environment")) == [("busybox", set_env)]


@pytest.mark.parametrize(
    ("replace", "path", "message"),
    [
        pytest.param(
            ("contents: echo", "localpath: run.sh\n      x: echo"),
            "workflow.tasks[0].files[0].localpath",
            "localpath is read by the CLI (osmo workflow submit), relative to the spec file, and sent as contents; "
            "the API takes files with contents only",
            id="_case_localpath",
        ),
        pytest.param(
            ("{{{{output}}}}", "{{{{host:nobody}}}}"),
            "workflow.tasks[0].files[0].contents",
            "{{host:nobody}} names no task of this workflow; tasks: train",
            id="_case_unknown_host",
        ),
        pytest.param(
            ("{{{{output}}}}", "{{{{input:0}}}}"),
            "workflow.tasks[0].files[0].contents",
            "{{input:0}} is out of range: task 'train' has 0 inputs (indexes start at 0)",
            id="_case_input_out_of_range",
        ),
        pytest.param(
            ("    files:", "    inputs:\n    - dataset: {{name: mnist}}\n    files:"),
            "workflow.tasks[0].inputs[0].dataset",
            "dataset inputs are not supported (this service keeps no datasets): give where the files of dataset "
            "'mnist' are stored instead, as url: <scheme>://<bucket>/<path>/",
            id="_case_dataset",
        ),
    ],
)
def test_bad_osmo_fields_are_refused_by_path_and_nothing_is_stored(user_client, pools, replace, path, message):
    # given
    spec = SPEC.replace(*replace).format(pool="alpha")

    # when
    response = user_client.post("/api/workflows/", {"spec": spec}, format="json")

    # then
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "spec_invalid"
    assert {"path": path, "message": message} in response.json()["details"]["errors"]
    assert Workflow.objects.count() == 0
    assert Task.objects.count() == 0


def test_a_pools_platforms_are_checked_at_submission(user_client, pools):
    from scheduler.models import PoolPlatform

    # given
    alpha, _beta = pools
    PoolPlatform.objects.create(pool=alpha, name="dgx-a100")
    PoolPlatform.objects.create(pool=alpha, name="jetson", allow_privileged=True)
    spec = (SPEC.format(pool="alpha") + "    privileged: true\n"
            "  resources:\n    default:\n      cpu: 1\n      platform: {platform}\n")

    # when
    unknown = user_client.post("/api/workflows/", {"spec": spec.format(platform="ovx-a40")}, format="json")
    refused = user_client.post("/api/workflows/", {"spec": spec.format(platform="dgx-a100")}, format="json")
    allowed = user_client.post("/api/workflows/", {"spec": spec.format(platform="jetson"), "dry_run": True},
                               format="json")

    # then
    assert unknown.status_code == 400
    assert unknown.json()["details"]["errors"] == [{
        "path": "workflow.resources.default.platform",
        "message": "unknown platform 'ovx-a40'; pool 'alpha' has platforms: dgx-a100, jetson"}]
    assert refused.status_code == 400
    assert refused.json()["details"]["errors"] == [{
        "path": "workflow.tasks[0].privileged", "message": "platform 'dgx-a100' does not allow privileged containers"}]
    assert allowed.status_code == 200, allowed.json()
    assert Workflow.objects.count() == 0


def admin_pool_form(pool) -> dict[str, str]:
    """The pool's admin change form as posted, its inlines unchanged."""
    keys = list(pool.topology_keys.order_by("position"))
    data = {"name": pool.name, "description": pool.description, "backend": pool.backend,
            "sim_task_seconds": str(pool.sim_task_seconds), "min_runtime": str(pool.min_runtime),
            "fairshare_half_life": str(pool.fairshare_half_life),
            "max_retries": str(pool.max_retries), "k8s_namespace": pool.k8s_namespace,
            "k8s_node_selector": pool.k8s_node_selector, "status": pool.status,
            **({"browser_forwarding": "on"} if pool.browser_forwarding else {}),
            "topology_keys-TOTAL_FORMS": str(len(keys)), "topology_keys-INITIAL_FORMS": str(len(keys))}
    for inline in ("grants", "quotas", "platforms"):
        data |= {f"{inline}-TOTAL_FORMS": "0", f"{inline}-INITIAL_FORMS": "0"}
    for index, key in enumerate(keys):
        data |= {f"topology_keys-{index}-id": str(key.pk), f"topology_keys-{index}-pool": str(pool.pk),
                 f"topology_keys-{index}-position": str(key.position), f"topology_keys-{index}-key": key.key,
                 f"topology_keys-{index}-label": key.label}
    return data


def test_a_platform_changed_in_the_admin_applies_to_the_next_submission(staff_user, user_client, pools):
    from django.test import Client

    from scheduler.models import PoolPlatform

    admin = Client()
    admin.force_login(staff_user)

    # given: a submission validated (and its pool facts cached) before the pool had platforms
    alpha, _beta = pools
    spec = SPEC.format(pool="alpha") + "  resources:\n    default:\n      cpu: 1\n      platform: gpu-x\n"
    assert user_client.post("/api/workflows/", {"spec": spec, "dry_run": True}, format="json").status_code == 200
    form = admin_pool_form(alpha)
    form.update({"platforms-TOTAL_FORMS": "1", "platforms-0-name": "gpu-y", "platforms-0-node_selector": "{}",
                 "platforms-0-tolerations": "[]", "platforms-0-host_mounts": "[]"})

    # when
    saved = admin.post(f"/admin/scheduler/pool/{alpha.pk}/change/", form)
    answer = user_client.post("/api/workflows/", {"spec": spec, "dry_run": True}, format="json")

    # then
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert list(PoolPlatform.objects.values_list("name", flat=True)) == ["gpu-y"]
    assert answer.status_code == 400
    assert answer.json()["details"]["errors"][0]["message"] == (
        "unknown platform 'gpu-x'; pool 'alpha' has platforms: gpu-y")


def test_a_tasks_outputs_list_the_urls_its_spec_uploads_to(user_client, pools):
    # given a task uploading its output to a URL of its own, and one without outputs
    spec = """workflow:
  name: uploads
  tasks:
  - name: save
    image: busybox
    command: [sh, -c, 'echo weights > {{output}}/model.pth']
    outputs:
    - url: s3://bucket/models/
  - name: plain
    image: busybox
    command: ["true"]
"""
    # when it is submitted and read back
    created = user_client.post("/api/workflows/", {"pool": "alpha", "spec": spec}, format="json")
    assert created.status_code == 201, created.json()
    read = user_client.get(f"/api/workflows/{created.json()['id']}/").json()
    # then each task lists the URLs its spec names (no artifact store on the simulated backend)
    outputs = {task["name"]: task["outputs"] for group in read["groups"] for task in group["tasks"]}
    assert outputs == {"save": ["s3://bucket/models/"], "plain": []}
    assert [t["outputs"] for g in created.json()["groups"] for t in g["tasks"]] == \
        [t["outputs"] for g in read["groups"] for t in g["tasks"]]


def test_urls_in_the_pools_artifact_store_are_refused_at_submission_by_path(user_client, pools, settings):
    """Replays the audit's finding: artifact ids are guessable, so a `url` input, an output or a
    checkpoint naming the artifact store reads or overwrites another workflow's outputs."""
    # given the pools' artifact store, and a spec naming it three ways (and once through a token, left
    # to dispatch, and once beside it)
    settings.OSMO_ARTIFACT_STORES = {"alpha": "s3://bucket/osmo"}
    spec = """workflow:
  name: reader
  tasks:
  - name: t
    image: busybox
    command: [sh, -c, "true"]
    inputs:
    - url: s3://bucket/osmo/hello-1-u7/train
    - url: s3://bucket/osmo-datasets/a
    outputs:
    - url: s3://bucket
    - url: s3://bucket/osmo/{{workflow_id}}
    checkpoint:
    - {path: /ck, url: "s3://bucket/osmo/../osmo/x", frequency: 1m}
"""

    # when
    response = user_client.post("/api/workflows/", {"pool": "alpha", "spec": spec}, format="json")

    # then
    assert response.status_code == 400, response.json()
    errors = response.json()["details"]["errors"]
    assert sorted(error["path"] for error in errors) == [
        "workflow.tasks[0].checkpoint[0].url", "workflow.tasks[0].inputs[0].url", "workflow.tasks[0].outputs[0].url"]
    assert all("is in the service's artifact store (s3://bucket/osmo)" in error["message"] for error in errors)
    assert Workflow.objects.count() == 0


def test_file_urls_in_the_services_own_folders_are_refused_on_a_local_pool_however_spelt(user_client, settings,
                                                                                        tmp_path):
    """Replays the audit's finding: an output ``file:///<checkout>/.venv/lib/python3.11/site-packages``
    let a task write a ``.pth`` file that the host's Python ran as root. On a local pool (whose tasks run
    on the service's machine) a file:// URL in the checkout, the virtualenv or the data folder is refused
    at submission, however it is spelt; one beside them is not."""
    # given a local pool, and a spec naming the service's folders in six spellings
    import sys

    from tests.factories import make_pool

    settings.OSMO_ARTIFACT_STORES = {"here": (tmp_path / "artifacts").as_uri()}
    make_pool("here", keys=[], backend="local")
    (tmp_path / "link").symlink_to(settings.BASE_DIR)
    site = next(path for path in sys.path if path.endswith("site-packages") and path.startswith(sys.prefix))
    checkout, data = settings.BASE_DIR, settings.DATA_DIR
    urls = [f"file://{site}", f"file://localhost{checkout}/scheduler", f"file://{checkout}/./runtime/../cli",
            f"file://{data}/storage", f"file://{tmp_path}/link/osmo",
            f"file://{checkout.parent}/%{ord(checkout.name[0]):02X}{checkout.name[1:]}/osmo",
            "file:///var/tmp/osmo-storage"]
    outputs = "\n".join(f"    - url: {url}" for url in urls)
    spec = f"""workflow:
  name: writer
  tasks:
  - name: t
    image: busybox
    command: [sh, -c, "true"]
    outputs:
{outputs}
"""

    # when
    response = user_client.post("/api/workflows/", {"pool": "here", "spec": spec}, format="json")

    # then every one but the last (a folder of its own) is refused, naming its field
    assert response.status_code == 400, response.json()
    errors = response.json()["details"]["errors"]
    assert [error["path"] for error in errors] == [f"workflow.tasks[0].outputs[{index}].url" for index in range(6)]
    assert all("is in the service's own folders" in error["message"] for error in errors)
    assert Workflow.objects.count() == 0


LOOPED = """workflow:
  name: ranks
  pool: alpha
  groups:
  - name: ranks
    tasks:
    {% for rank in range(2) %}
    - name: rank-{{ rank }}
      lead: {{ rank == 0 }}
      image: busybox
      command: [sh, -c, "echo {{host:rank-0}}"]
      credentials:
        hub-token:
          TOKEN: token
    {% endfor %}
"""


@pytest.mark.parametrize("extra", [{}, {"set_env": {"RUN": "1"}}], ids=["_case_plain", "_case_set_env"])
def test_errors_of_a_looped_template_carry_their_template_line(user_client, pools, extra):
    """Regression: a refused template (OSMO's cookbook writes its ranks in loops) said paths of the
    rendered spec only, which has more tasks than the file; each error now has the template's line,
    with set_env too (whose rendered spec is a YAML dump)."""
    # when: the submitter has no credential 'hub-token'
    response = user_client.post("/api/workflows/", {"spec": LOOPED, **extra}, format="json")

    # then: both ranks' errors name line 13 of the template; nothing stored
    assert response.status_code == 400, response.json()
    message = ("you have no credential named 'hub-token'; create it with `osmo credential set hub-token ...` "
               "(osmo credential list shows yours)")
    assert response.json()["details"]["errors"] == [
        {"path": f"workflow.groups[0].tasks[{index}].credentials.hub-token", "message": message, "line": 13}
        for index in (0, 1)
    ]
    assert Workflow.objects.count() == 0
