"""OSMO's run-time tokens (docs/spec.md, "Tokens"): they survive template rendering, are checked at
submission and are filled in by ``resolve_tokens`` at dispatch. Pure: no database."""

from __future__ import annotations

import pytest

from workflows.spec import (
    PoolContext,
    SpecInvalidError,
    TokenContext,
    TokenUnresolvedError,
    find_tokens,
    parse_workflow,
    resolve_tokens,
)
from workflows.spec.template import render_spec

POOL = PoolContext(name="demo")
TWO_NODES = """workflow:
  name: two-nodes
  groups:
  - name: training
    tasks:
    {% for rank in range(nodes) %}
    - name: {{ 'master' if rank == 0 else 'worker-' ~ rank }}
      lead: {{ rank == 0 }}
      image: pytorch
      command: [bash, /tmp/run.sh]
      inputs:
      - url: s3://bucket/data
      files:
      - path: /tmp/run.sh
        contents: |
          torchrun --node_rank {{ rank }} --master_addr {{ host:master }} --master_port 29400
          cp -r {{input:0}}/. /data && echo {{workflow_id}} > {{output}}/id.txt
    {% endfor %}
default-values:
  nodes: 2
"""


def errors_of(text: str) -> list[tuple[str, str]]:
    with pytest.raises(SpecInvalidError) as caught:
        parse_workflow(render_spec(text).text, pool=POOL)
    return [(error.path, error.message) for error in caught.value.errors]


def one_task(**fields: object) -> str:
    lines = ["workflow:", "  name: wf", "  tasks:", "  - name: a", "    image: busybox", "    command: [sh]"]
    lines += [f"    {key}: {value}" for key, value in fields.items()]
    lines += ["  - name: b", "    image: busybox", "    command: [sh]"]
    return "\n".join(lines) + "\n"


def test_tokens_survive_rendering_in_their_canonical_form():
    """The replayed report: {{output}} was "'output' is undefined", {{host:master}} a syntax error."""
    # when
    rendered = render_spec(TWO_NODES)
    spec = parse_workflow(rendered.text, pool=POOL)

    # then
    worker = spec.groups[0].tasks[1]
    assert worker.name == "worker-1"
    assert worker.files[0].contents == (
        "torchrun --node_rank 1 --master_addr {{host:master}} --master_port 29400\n"
        "cp -r {{input:0}}/. /data && echo {{workflow_id}} > {{output}}/id.txt\n"
    )
    assert rendered.text.count("\n") == render_spec(TWO_NODES.replace("{{ host:master }}", "x")).text.count("\n")


def test_a_rendered_spec_renders_again_to_itself():
    # given: the stored spec is submitted again (osmo workflow restart)
    once = render_spec(TWO_NODES).text

    # when
    twice = render_spec(once).text

    # then
    assert twice == once


def test_find_tokens_lists_each_token_with_its_argument():
    # when
    tokens = find_tokens("a {{output}} {{ input:2 }} {{input:prep}} {{workflow_id}} {{host:master}} {{other}}")

    # then
    assert [(token.kind, token.arg, token.text) for token in tokens] == [
        ("output", None, "{{output}}"),
        ("input", 2, "{{input:2}}"),
        ("input", "prep", "{{input:prep}}"),
        ("workflow_id", None, "{{workflow_id}}"),
        ("host", "master", "{{host:master}}"),
    ]


def test_resolve_tokens_fills_every_token_from_the_context():
    # given
    context = TokenContext(workflow_id="train-3", output="/osmo/output", inputs=("/osmo/input/0", "/osmo/input/1"),
                           input_tasks={"prep": "/osmo/input/1"}, hosts={"master": "master.train-3-training"})

    # when
    text = resolve_tokens("--addr {{host:master}} {{input:1}} {{ input:prep }} {{output}}/{{workflow_id}}", context)

    # then
    assert text == "--addr master.train-3-training /osmo/input/1 /osmo/input/1 /osmo/output/train-3"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("{{host:worker}}", "{{host:worker}}: task 'worker' has no host now (it is not running)",
                     id="_case_host_not_running"),
        pytest.param("{{input:1}}", "{{input:1}}: the task has 1 inputs", id="_case_index"),
        pytest.param("{{input:prep}}", "{{input:prep}}: 'prep' is not an input task of this task", id="_case_task"),
    ],
)
def test_resolve_tokens_refuses_a_token_without_a_value(text: str, message: str):
    # given
    context = TokenContext(workflow_id="wf-1", inputs=("/in/0",))

    # when
    with pytest.raises(TokenUnresolvedError) as caught:
        resolve_tokens(text, context)

    # then
    assert str(caught.value) == message


def test_text_without_tokens_is_left_as_it_is():
    # when
    text = resolve_tokens("echo {{ not_a_token }} ${HOME}", TokenContext(workflow_id="wf-1"))

    # then
    assert text == "echo {{ not_a_token }} ${HOME}"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        pytest.param(
            {"args": "['{{host:nobody}}']"},
            [("workflow.tasks[0].args[0]", "{{host:nobody}} names no task of this workflow; tasks: a, b")],
            id="_case_host_unknown",
        ),
        pytest.param(
            {"environment": "{DATA: '{{input:1}}'}", "inputs": "[{url: 's3://b/x'}]"},
            [("workflow.tasks[0].environment.DATA",
              "{{input:1}} is out of range: task 'a' has 1 input (indexes start at 0)")],
            id="_case_input_index",
        ),
        pytest.param(
            {"args": "['{{input:0}}']"},
            [("workflow.tasks[0].args[0]", "{{input:0}} is out of range: task 'a' has 0 inputs (indexes start at 0)")],
            id="_case_input_without_inputs",
        ),
        pytest.param(
            {"args": "['{{input:b}}']"},
            [("workflow.tasks[0].args[0]", "{{input:b}} names no input of task 'a'; it has no task inputs")],
            id="_case_input_task_not_an_input",
        ),
        pytest.param(
            {"args": "['{{host: two words}}']"},
            [("workflow.tasks[0].args[0]",
              "malformed token '{{host: two words}}'; write {{input:<n>}}, {{input:<task>}} or {{host:<task>}}")],
            id="_case_malformed",
        ),
    ],
)
def test_tokens_are_checked_at_submission(fields: dict[str, str], expected: list[tuple[str, str]]):
    # when
    errors = errors_of(one_task(**fields))

    # then
    assert errors == expected


def test_host_of_a_task_in_another_group_and_input_by_task_name_are_accepted():
    # given
    text = one_task(args="['{{host:b}}', '{{input:b}}', '{{input:0}}']", inputs="[{task: b}]")

    # when
    spec = parse_workflow(render_spec(text).text, pool=POOL)

    # then
    assert spec.groups[0].tasks[0].args == ("{{host:b}}", "{{input:b}}", "{{input:0}}")


def test_a_host_token_built_in_a_loop_keeps_its_line_indented():
    # given: OSMO's cookbook (DeepSpeed hostfile) builds {{host:worker_<n>}} with raw blocks on a line
    text = """workflow:
  name: hostfile
  groups:
  - name: g
    tasks:
    {% for n in range(2) %}
    - name: worker_{{ n }}
      lead: {{ n == 0 }}
      image: busybox
      command: [sh]
      files:
      - path: /tmp/hostfile
        contents: |
          {% for peer in range(2) %}
          {% raw %}{{host:worker_{% endraw %}{{ peer }}{% raw %}}}{% endraw %} slots=8
          {% endfor %}
    {% endfor %}
"""

    # when
    spec = parse_workflow(render_spec(text).text, pool=POOL)

    # then
    assert spec.groups[0].tasks[1].files[0].contents == "{{host:worker_0}} slots=8\n{{host:worker_1}} slots=8\n"


def test_a_host_token_naming_a_resource_or_a_group_says_which_task_to_write():
    """A server/client recipe that wrote its server's resource name in {{host:...}} (OSMO's NIM recipe
    does) was told only that no task has that name."""
    # given: the client reaches the server by its resource's name, then by its group's name
    text = """workflow:
  name: serve
  groups:
  - name: serving
    tasks:
    - name: server
      image: busybox
      command: [sh]
      resource: model-server
    - name: client
      lead: true
      image: busybox
      command: [sh, -c, "wget http://{{host:model-server}}:8000/ http://{{host:serving}}:8000/"]
  resources:
    model-server: {cpu: 1}
"""
    # when
    errors = errors_of(text)

    # then: each error names the task to write instead
    assert errors == [
        ("workflow.groups[0].tasks[1].command[2]",
         "{{host:model-server}} names no task of this workflow; tasks: client, server ('model-server' is a "
         "resource, used by task server: write {{host:server}})"),
        ("workflow.groups[0].tasks[1].command[2]",
         "{{host:serving}} names no task of this workflow; tasks: client, server ('serving' is a group: "
         "{{host:<task>}} takes one of its tasks, client, server)"),
    ]


def test_a_host_token_repeated_across_tasks_is_explained_once(monkeypatch):
    """A finding of the review: the hint of an unknown ``{{host:...}}`` read every task of the workflow
    for each token, so 1,000 tasks writing a resource's name 40 times each took 6 s more to refuse
    (40,000 hints of 1,000 tasks each); one hint per name."""
    from workflows.spec import fields

    # given 50 tasks of resource r, each naming {{host:r}} three times
    tasks = "".join(f"  - {{name: t{index}, image: b, resource: r, command: [\"{{{{host:r}}}} {{{{host:r}}}}\", "
                    "\"{{host:r}}\"]}\n" for index in range(50))
    text = f"workflow:\n  name: w\n  resources:\n    r: {{cpu: 1}}\n  tasks:\n{tasks}"
    hints: list[str] = []
    hint = fields._host_hint
    monkeypatch.setattr(fields, "_host_hint", lambda name, groups: hints.append(name) or hint(name, groups))

    # when
    errors = errors_of(text)

    # then every text is refused, with the hint worked out once
    assert len(errors) == 100
    assert hints == ["r"]
    assert errors[0][1].endswith("('r' is a resource, used by tasks t0, t1, t10, t11, t12, t13, t14, t15, t16, t17 "
                                 "and 40 more: write {{host:<task>}})")
