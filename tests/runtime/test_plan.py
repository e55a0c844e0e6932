"""The task plan (runtime.plan): JSON round trip, refusals naming the field, and the adapter from OSMO's
task fields."""

from __future__ import annotations

import pytest

from runtime.plan import (
    BarrierSpec,
    CheckpointSpec,
    FileSpec,
    InputSpec,
    OutputSpec,
    PlanInvalidError,
    TaskPlan,
    duration_seconds,
    plan_from_osmo_task,
)


def test_a_plan_survives_json():
    # given
    plan = TaskPlan(command=("sh", "-c"), args=("echo hi",), env={"A": "1"}, files=(FileSpec("/tmp/x", "y"),),
                    inputs=(InputSpec("s3://b/in", r"\.txt$", committed_only=True),), outputs=(OutputSpec("s3://b/o"),),
                    artifact_url="file:///a", barrier=BarrierSpec("http://svc/b/", "tok", 3),
                    checkpoints=(CheckpointSpec("/ck", "s3://b/ck", 30.0, ".*json"),), start_timeout_s=12.5)

    # when
    again = TaskPlan.from_json(plan.to_json())

    # then
    assert again == plan


@pytest.mark.parametrize(("data", "field", "message"), [
    pytest.param({"command": ["x"], "outputs": [{"url": "u", "regex": "[a-"}]}, "outputs.0.regex",
                 "does not compile: unterminated character set at position 0", id="_case_output_regex"),
    pytest.param({"command": []}, "command", "must not be empty", id="_case_empty_command"),
    pytest.param({"command": "echo"}, "command", "must be a list of strings", id="_case_command_string"),
    pytest.param({"command": ["x"], "barrier": {"url": "u", "token": "t", "group_size": 0}}, "barrier.group_size",
                 "must be >= 1", id="_case_group_size"),
    pytest.param({"command": ["x"], "inputs": [{"regex": "x"}]}, "plan", "malformed: KeyError: 'url'",
                 id="_case_input_without_url"),
])
def test_a_bad_plan_is_refused_naming_the_field(data, field, message):
    # when
    with pytest.raises(PlanInvalidError) as caught:
        TaskPlan.from_dict(data)

    # then
    assert caught.value.field == field
    assert message in caught.value.message


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800.0), ("1h30m", 5400.0), ("2d", 172800.0), ("45", 45.0),
                                               ("10s", 10.0), (7, 7.0)])
def test_durations(text, seconds):
    assert duration_seconds(text) == seconds


def test_a_duration_that_is_not_one_is_refused():
    with pytest.raises(PlanInvalidError, match="'soon' is not a duration"):
        duration_seconds("soon")


def test_osmo_task_fields_become_a_plan():
    # given a task as OSMO writes it
    task = {
        "name": "train", "image": "ubuntu", "command": ["python", "train.py"],
        "args": ["--out", "{{output}}", "--run", "{{workflow_id}}", "--server", "{{host:server}}:8080"],
        "environment": {"DATA": "{{input:0}}", "RUN": "{{workflow_id}}"},
        "files": [{"path": "/tmp/conf.yaml", "contents": "run: {{workflow_id}}\n"}],
        "inputs": [{"task": "prep", "regex": r".*\.bin$"}, {"url": "s3://bucket/{{workflow_id}}/extra"}],
        "outputs": [{"url": "s3://bucket/results", "regex": r".*\.json$"}],
        "checkpoint": [{"source": "/ckpt", "destination": "s3://bucket/ckpt", "frequency": "30m"}],
    }

    # when
    plan = plan_from_osmo_task(task, workflow_id="wf-7", artifact_url_for={"prep": "file:///store/wf-7/prep"},
                               artifact_url="file:///store/wf-7/train", hosts={"server": "127.0.0.1"},
                               start_timeout_s=99)

    # then
    assert plan == TaskPlan(
        command=("python", "train.py"),
        args=("--out", "{{output}}", "--run", "wf-7", "--server", "127.0.0.1:8080"),
        env={"DATA": "{{input:0}}", "RUN": "wf-7"},
        files=(FileSpec("/tmp/conf.yaml", "run: wf-7\n"),),
        inputs=(InputSpec("file:///store/wf-7/prep", r".*\.bin$", committed_only=True),
                InputSpec("s3://bucket/wf-7/extra")),
        outputs=(OutputSpec("s3://bucket/results", r".*\.json$"),),
        artifact_url="file:///store/wf-7/train",
        checkpoints=(CheckpointSpec("/ckpt", "s3://bucket/ckpt", 1800.0),),
        start_timeout_s=99,
    )


def test_an_input_of_an_unknown_task_is_refused():
    with pytest.raises(PlanInvalidError) as caught:
        plan_from_osmo_task({"command": ["x"], "inputs": [{"task": "ghost"}]}, workflow_id="w", artifact_url_for={})
    assert (caught.value.field, caught.value.message) == ("inputs.0.task", "no artifact URL for task 'ghost'")


STORE = "s3://bucket/osmo"


@pytest.mark.parametrize(("task", "field"), [
    pytest.param({"outputs": [{"url": "s3://bucket/osmo/other-wf-1-u2/train"}]}, "outputs.0.url", id="_case_output_in"),
    pytest.param({"outputs": [{"url": "s3://bucket"}]}, "outputs.0.url", id="_case_output_holds_it"),
    pytest.param({"inputs": [{"url": "s3://bucket/osmo/other-wf-1-u2/train/"}]}, "inputs.0.url", id="_case_input_in"),
    pytest.param({"inputs": [{"url": "s3://bucket/data/../osmo/x"}]}, "inputs.0.url", id="_case_input_dot_dot"),
    pytest.param({"checkpoint": [{"path": "/ck", "url": "s3://bucket/osmo/x", "frequency": "1m"}]},
                 "checkpoint.0.url", id="_case_checkpoint_in"),
])
def test_a_url_in_the_artifact_store_is_refused_naming_the_field(task, field):
    """Replays the audit's finding: a task named another workflow's artifacts (guessable ids) as a `url`
    input or an output, and read or overwrote them."""
    # when
    with pytest.raises(PlanInvalidError) as caught:
        plan_from_osmo_task({"command": ["true"], **task}, workflow_id="wf-1", artifact_url_for={},
                            artifact_url=f"{STORE}/wf-1-u1/t", artifact_store=STORE)

    # then
    assert caught.value.field == field
    assert "is in the service's artifact store (s3://bucket/osmo)" in caught.value.message
    assert "inputs: [{task: NAME}]" in caught.value.message


def test_urls_beside_the_artifact_store_and_upstream_task_inputs_are_taken():
    # when
    plan = plan_from_osmo_task(
        {"command": ["true"], "inputs": [{"task": "prep"}, {"url": "s3://bucket/osmo-datasets/a"}],
         "outputs": [{"url": "s3://other/osmo/x"}, {"url": "file:///bucket/osmo/y"}]},
        workflow_id="wf-1", artifact_url_for={"prep": f"{STORE}/wf-1-u1/prep"}, artifact_url=f"{STORE}/wf-1-u1/t",
        artifact_store=STORE)

    # then
    assert [i.url for i in plan.inputs] == [f"{STORE}/wf-1-u1/prep", "s3://bucket/osmo-datasets/a"]
    assert [o.url for o in plan.outputs] == ["s3://other/osmo/x", "file:///bucket/osmo/y"]
