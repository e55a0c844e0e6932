"""What a task's pod takes from the stored spec (docs/spec.md, "Tokens"): a spec that spells none of the
pod fields' keys and no token is not parsed, and gives every task what the parse would; a key spelled
with an escape is still read. No database."""

from __future__ import annotations

from workflows.scheduling.pod.podspec import TaskPodFields, WorkflowPods, workflow_pods

PLAIN = """
workflow:
  name: plain
  groups:
  - name: g
    tasks:
    - {name: a, lead: true, image: busybox, command: [sleep, '1'], environment: {OSMO_SIM_SECONDS: '3'}}
    - {name: b, image: busybox, command: [sleep, '1']}
resources:
  default: {gpu: 1}
"""


def test_a_spec_without_pod_fields_or_tokens_gives_each_task_what_the_parse_gives():
    # given the plain spec, and the same text with a comment holding a backslash (which is parsed)
    parsed = workflow_pods(PLAIN + "# a backslash: \\\n")
    # when the plain text is read
    fast = workflow_pods(PLAIN)
    # then it was not parsed, and each task's pod fields and the groups needing DNS names are the same
    assert fast == WorkflowPods()
    assert parsed.groups == {"a": "g", "b": "g"}
    assert [fast.tasks.get(task, TaskPodFields()) for task in "ab"] == [parsed.tasks[task] for task in "ab"]
    assert fast.host_groups == parsed.host_groups == frozenset()


def test_a_pod_field_spelled_with_an_escape_is_still_read():
    # given a task whose privileged key is written with an escaped character
    text = PLAIN.replace("{name: b,", '{name: b, "privil\\x65ged": true,')
    assert "privileged" not in text
    # when its pod fields are read
    pods = workflow_pods(text)
    # then the field is found
    assert (pods.tasks["a"].privileged, pods.tasks["b"].privileged) == (False, True)


def test_a_token_makes_the_spec_parsed():
    # given a task naming another's host
    text = PLAIN.replace("command: [sleep, '1']}", "command: [ping, '{{host:a}}']}")
    # when read
    pods = workflow_pods(text)
    # then the named task's group gets host names
    assert pods.host_groups == frozenset({"g"})


def test_every_pod_field_alone_makes_the_spec_parsed():
    # given task b carrying one pod field each time, and nothing else that would make the text parsed
    fields = {
        "files": "files: [{path: /tmp/x, contents: hi}]",
        "privileged": "privileged: true",
        "hostNetwork": "hostNetwork: true",
        "volumeMounts": "volumeMounts: [/data:/data]",
        "credentials": "credentials: {hf: {HF_TOKEN: token}}",
        "outputs": "outputs: [{url: 's3://bucket/out/'}]",
    }
    for name, field in fields.items():
        text = PLAIN.replace("{name: b,", "{name: b, " + field + ",")
        # when its pod fields are read
        pods = workflow_pods(text)
        # then task b's differ from the defaults (the field was read), task a's do not
        assert pods.tasks["b"] != TaskPodFields(), name
        assert pods.tasks["a"] == TaskPodFields(), name
