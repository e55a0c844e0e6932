"""OSMO's task, group, resource and workflow fields (docs/spec.md): files, inputs, outputs,
credentials, exitActions, checkpoint, volumeMounts, privileged, hostNetwork, barrier,
ignoreNonleadStatus, pool, labels, platform, default-values of any value. Pure: no database."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.spec import (
    CheckpointSpec,
    CredentialSpec,
    ExitAction,
    FileSpec,
    InputSpec,
    OutputSpec,
    PlatformRule,
    PoolContext,
    SpecInvalidError,
    VolumeMount,
    parse_workflow,
)
from workflows.spec.fields import FILE_MAX_BYTES

POOL = PoolContext(name="demo")


def spec(task_fields: dict[str, Any] | None = None, **workflow_fields: Any) -> dict[str, Any]:
    task = {"name": "a", "image": "busybox", "command": ["sh"], **(task_fields or {})}
    upstream = {"name": "up", "image": "busybox", "command": ["sh"]}
    return {"workflow": {"name": "wf", "tasks": [upstream, task], **workflow_fields}}


def errors_of(source: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecInvalidError) as caught:
        parse_workflow(source, pool=POOL)
    return [(error.path, error.message) for error in caught.value.errors]


def test_every_task_field_is_parsed_into_the_model():
    # given
    fields = {
        "inputs": [{"task": "up", "regex": r".*\.txt$"}, {"url": "s3://bucket/data/"}],
        "outputs": [{"url": "s3://bucket/out/{{workflow_id}}", "regex": ".*"}],
        "files": [{"path": "/tmp/run.sh", "contents": "echo {{input:1}}\n"}, {"path": "/etc/x.conf", "contents": 7}],
        "credentials": {"hf": {"HF_TOKEN": "token"}, "s3-creds": "/root/.aws"},
        "exitActions": {"COMPLETE": "0,2", "RESCHEDULE": "10-20, 30", "FAIL": [1, "3-9"]},
        "checkpoint": [{"path": "/tmp/models", "url": "s3://bucket/ckpt", "frequency": "5m", "regex": ".*pth"}],
        "volumeMounts": ["/data", "/raid/cache:/cache:ro"],
        "privileged": True,
        "hostNetwork": True,
    }

    # when
    task = parse_workflow(spec(fields), pool=POOL).groups[1].tasks[0]

    # then
    assert task.inputs == ("up",)
    assert task.input_specs == (InputSpec(task="up", regex=r".*\.txt$"), InputSpec(url="s3://bucket/data/"))
    assert task.outputs == (OutputSpec(url="s3://bucket/out/{{workflow_id}}", regex=".*"),)
    assert task.files == (FileSpec("/tmp/run.sh", "echo {{input:1}}\n"), FileSpec("/etc/x.conf", "7"))
    assert task.credentials == (CredentialSpec("hf", environment=(("HF_TOKEN", "token"),)),
                                CredentialSpec("s3-creds", path="/root/.aws"))
    assert task.exit_actions == (ExitAction("COMPLETE", ((0, 0), (2, 2))), ExitAction("FAIL", ((1, 1), (3, 9))),
                                 ExitAction("RESCHEDULE", ((10, 20), (30, 30))))
    assert [task.exit_action(code) for code in (0, 1, 5, 15, 30, 31)] == [
        "COMPLETE", "FAIL", "FAIL", "RESCHEDULE", "RESCHEDULE", None]
    assert task.checkpoints == (CheckpointSpec("/tmp/models", "s3://bucket/ckpt", 300, ".*pth"),)
    assert task.volume_mounts == (VolumeMount("/data", "/data"), VolumeMount("/raid/cache", "/cache", read_only=True))
    assert (task.privileged, task.host_network) == (True, True)


def test_defaults_of_groups_and_tasks_follow_osmo():
    # when
    parsed = parse_workflow(spec(), pool=POOL)

    # then
    group, task = parsed.groups[1], parsed.groups[1].tasks[0]
    assert (group.barrier, group.ignore_nonlead_status) == (True, True)
    assert (task.files, task.outputs, task.exit_actions, task.privileged, task.host_network) == ((), (), (), False,
                                                                                               False)


def test_group_flags_pool_labels_platform_and_default_values_are_kept():
    # given
    source = {
        "default-values": {"config": {"lr": 0.1, "layers": [1, 2]}, "name": "x"},
        "workflow": {
            "name": "wf",
            "pool": "demo",
            "labels": {"team": "robotics", "example.com/run": "r-42"},
            "resources": {"default": {"cpu": 1, "platform": "dgx-a100"}},
            "groups": [{"name": "g", "barrier": False, "ignoreNonleadStatus": False,
                        "tasks": [{"name": "a", "image": "busybox", "command": ["sh"]}]}],
        },
    }

    # when
    parsed = parse_workflow(source, pool=POOL)

    # then
    assert (parsed.groups[0].barrier, parsed.groups[0].ignore_nonlead_status) == (False, False)
    assert parsed.spec_pool == "demo"
    assert parsed.labels == (("example.com/run", "r-42"), ("team", "robotics"))
    assert parsed.resources[0].platform == "dgx-a100"
    assert parsed.default_values == (("config", {"lr": 0.1, "layers": [1, 2]}), ("name", "x"))


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param(
            {"files": [{"path": "/tmp/a", "localpath": "a.sh"}]},
            [("workflow.tasks[1].files[0].localpath",
              "localpath is read by the CLI (osmo workflow submit), relative to the spec file, and sent as "
              "contents; the API takes files with contents only")],
            id="_case_localpath",
        ),
        pytest.param(
            {"files": [{"path": "/tmp/a", "contents": "x" * (FILE_MAX_BYTES + 1)}]},
            [("workflow.tasks[1].files[0].contents", f"the file is larger than {FILE_MAX_BYTES} bytes (the limit "
                                                     "of one file)")],
            id="_case_oversized_file",
        ),
        pytest.param(
            {"files": [{"path": "tmp/a", "contents": "x"}, {"path": "/tmp/../etc/a", "contents": "x"},
                       {"path": "/proc/a", "contents": "x"}]},
            [("workflow.tasks[1].files[0].path", "'tmp/a' must be an absolute path in the container (starting "
                                                 "with /)"),
             ("workflow.tasks[1].files[1].path", "'/tmp/../etc/a' must be a normalised path: no '.', '..', '//' "
                                                 "or trailing '/'"),
             ("workflow.tasks[1].files[2].path", "'/proc/a' is not allowed: not / and nothing under /proc, /sys, "
                                                 "/dev")],
            id="_case_file_paths",
        ),
        pytest.param(
            {"files": [{"path": "/tmp/a", "contents": "x"}, {"path": "/tmp/a", "contents": "y"}]},
            [("workflow.tasks[1].files[1].path", "two files at '/tmp/a' (also at workflow.tasks[1].files[0].path); "
                                                 "give each file its own path")],
            id="_case_two_files_one_path",
        ),
        pytest.param(
            {"inputs": [{"url": "s3://b/x", "regex": "(unclosed"}]},
            [("workflow.tasks[1].inputs[0].regex",
              "regex '(unclosed' does not compile: missing ), unterminated subpattern at position 0")],
            id="_case_bad_regex",
        ),
        pytest.param(
            {"inputs": [{"dataset": {"name": "mnist"}}], "outputs": [{"dataset": {"name": "out"}}]},
            [("workflow.tasks[1].inputs[0].dataset", "dataset inputs are not supported (this service keeps no "
                                                     "datasets): give where the files of dataset 'mnist' are stored "
                                                     "instead, as url: <scheme>://<bucket>/<path>/"),
             ("workflow.tasks[1].outputs[0].dataset", "dataset outputs are not supported (this service keeps no "
                                                      "datasets): give where the files of dataset 'out' are uploaded "
                                                      "instead, as url: <scheme>://<bucket>/<path>/")],
            id="_case_datasets",
        ),
        pytest.param(
            # OSMO's cookbook also names a dataset bare: `dataset: <name>`
            {"inputs": [{"dataset": "frames"}], "outputs": [{"dataset": "clips"}]},
            [("workflow.tasks[1].inputs[0].dataset", "dataset inputs are not supported (this service keeps no "
                                                     "datasets): give where the files of dataset 'frames' are stored "
                                                     "instead, as url: <scheme>://<bucket>/<path>/"),
             ("workflow.tasks[1].outputs[0].dataset", "dataset outputs are not supported (this service keeps no "
                                                      "datasets): give where the files of dataset 'clips' are "
                                                      "uploaded instead, as url: <scheme>://<bucket>/<path>/")],
            id="_case_datasets_by_bare_name",
        ),
        pytest.param(
            {"inputs": [{"url": "not a url"}]},
            [("workflow.tasks[1].inputs[0].url", "'not a url' is not a storage URL like s3://bucket/path")],
            id="_case_bad_url",
        ),
        pytest.param(
            {"exitActions": {"RESCHEDULE": "10-1"}},
            [("workflow.tasks[1].exitActions.RESCHEDULE", "the range '10-1' goes down; write it as 1-10")],
            id="_case_range_down",
        ),
        pytest.param(
            {"exitActions": {"FAIL": "1-10", "RESCHEDULE": "5"}},
            [("workflow.tasks[1].exitActions.RESCHEDULE",
              "exit codes 5 of RESCHEDULE overlap 1-10 of FAIL; each exit code may have one action")],
            id="_case_overlap",
        ),
        pytest.param(
            {"exitActions": {"RETRY": 3, "FAIL": "x"}},
            [("workflow.tasks[1].exitActions.FAIL", "invalid exit code 'x'; write codes and ranges like '1,2,10-20'"),
             ("workflow.tasks[1].exitActions.RETRY", "unknown field 'RETRY'; expected one of: COMPLETE, FAIL, "
                                                     "RESCHEDULE")],
            id="_case_exit_action_names",
        ),
        pytest.param(
            {"credentials": {"hf": {"1BAD": "token"}, "aws": ["x"]}},
            [("workflow.tasks[1].credentials.aws", "must map environment variables to keys of the credential "
                                                   "({HF_TOKEN: token}) or be a mount path, got a list"),
             ("workflow.tasks[1].credentials.hf.1BAD", "invalid environment variable name '1BAD'")],
            id="_case_credentials",
        ),
        pytest.param(
            {"checkpoint": [{"path": "/tmp/m", "url": "s3://b/c", "frequency": "soon"}]},
            [("workflow.tasks[1].checkpoint[0].frequency",
              "invalid frequency 'soon'; expected seconds or a duration like 45s, 30m, 2h, 1d")],
            id="_case_checkpoint_frequency",
        ),
        pytest.param(
            {"volumeMounts": ["/a:/b:rx", "relative", "/data:data"], "privileged": "yes"},
            [("workflow.tasks[1].privileged", "must be true or false, got a string"),
             ("workflow.tasks[1].volumeMounts[0]", "'/a:/b:rx': write <host path>[:<container path>[:ro]]"),
             ("workflow.tasks[1].volumeMounts[1]", "'relative' must be an absolute path on the host "
                                                   "(starting with /)"),
             ("workflow.tasks[1].volumeMounts[2]", "'data' must be an absolute path in the container "
                                                   "(starting with /)")],
            id="_case_mounts_and_flags",
        ),
    ],
)
def test_bad_task_fields_are_refused_by_path(fields: dict[str, Any], expected: list[tuple[str, str]]):
    # when
    errors = errors_of(spec(fields))

    # then
    assert errors == expected


def test_bad_labels_and_too_many_are_refused():
    # given
    labels = {f"k{index}": "v" for index in range(16)} | {"bad key!": "v", "empty": ""}

    # when
    errors = errors_of(spec(labels=labels))

    # then
    assert errors == [
        ("workflow.labels", "18 labels; a workflow has at most 16"),
        ("workflow.labels.empty", "invalid label value '': not empty, at most 63 letters, digits, '-', '_', '.', "
                                  "starting and ending alphanumeric"),
        ('workflow.labels["bad key!"]', "invalid label key 'bad key!': Kubernetes label syntax, [prefix/]name with "
                                        "a name of at most 63 letters, digits, '-', '_', '.', starting and ending "
                                        "alphanumeric"),
    ]


def test_checkpoint_accepts_the_field_names_of_osmos_specification_page():
    # given: the page's example says source/destination/frequency, its table checkpoint_cadence
    fields = {"checkpoint": [{"source": "/ckpt", "destination": "s3://b/c", "checkpoint_cadence": 30}]}

    # when
    task = parse_workflow(spec(fields), pool=POOL).groups[1].tasks[0]

    # then
    assert task.checkpoints == (CheckpointSpec("/ckpt", "s3://b/c", 30),)


PLATFORMS = PoolContext(name="robots", platforms=(
    PlatformRule("dgx-a100"),
    PlatformRule("jetson", privileged=True, host_network=True, host_mounts=("/dev/shm", "/opt/data/")),
))


def platform_spec(platform: str | None, **task_fields: Any) -> dict[str, Any]:
    resource = {"cpu": 1, **({"platform": platform} if platform else {})}
    task = {"name": "a", "image": "busybox", "command": ["sh"], **task_fields}
    return {"workflow": {"name": "wf", "resources": {"default": resource}, "tasks": [task]}}


def test_a_pools_platform_allows_what_it_says():
    # given
    source = platform_spec("jetson", privileged=True, hostNetwork=True,
                           volumeMounts=["/dev/shm", "/opt/data/maps:/maps:ro"])

    # when
    task = parse_workflow(source, pool=PLATFORMS).groups[0].tasks[0]

    # then
    assert (task.resource_spec.platform, task.privileged, task.host_network) == ("jetson", True, True)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        pytest.param(
            platform_spec("ovx-a40"),
            [("workflow.resources.default.platform",
              "unknown platform 'ovx-a40'; pool 'robots' has platforms: dgx-a100, jetson")],
            id="_case_unknown_platform",
        ),
        pytest.param(
            platform_spec("dgx-a100", privileged=True, hostNetwork=True, volumeMounts=["/var/log"]),
            [("workflow.tasks[0].hostNetwork", "platform 'dgx-a100' does not allow the host network"),
             ("workflow.tasks[0].privileged", "platform 'dgx-a100' does not allow privileged containers"),
             ("workflow.tasks[0].volumeMounts[0]", "platform 'dgx-a100' does not allow mounting host path "
                                                   "'/var/log'")],
            id="_case_not_allowed",
        ),
        pytest.param(
            platform_spec("jetson", volumeMounts=["/opt/database"]),
            [("workflow.tasks[0].volumeMounts[0]", "platform 'jetson' does not allow mounting host path "
                                                   "'/opt/database' (allowed: /dev/shm, /opt/data/)")],
            id="_case_mount_outside_prefixes",
        ),
        pytest.param(
            platform_spec(None, privileged=True),
            [("workflow.tasks[0].privileged", "a task without a platform does not allow privileged containers; "
                                              "name a platform of pool 'robots' that allows it")],
            id="_case_no_platform",
        ),
    ],
)
def test_a_pools_platforms_refuse_what_they_do_not_allow(source: dict[str, Any], expected: list[tuple[str, str]]):
    # when
    with pytest.raises(SpecInvalidError) as caught:
        parse_workflow(source, pool=PLATFORMS)

    # then
    assert [(error.path, error.message) for error in caught.value.errors] == expected


def test_without_platforms_in_the_pool_any_platform_and_host_access_are_stored():
    # when
    task = parse_workflow(platform_spec("anything", privileged=True), pool=POOL).groups[0].tasks[0]

    # then
    assert (task.resource_spec.platform, task.privileged) == ("anything", True)
