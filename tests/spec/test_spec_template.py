"""Spec templates (docs/design.md §11): default-values and submission values, the sandbox's bounds,
errors with their template line. Pure: no database."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from workflows.spec import PoolContext, SpecInvalidError, parse_workflow
from workflows.spec.template import TemplateLimits, cast_value, parse_assignments, render_spec

TEMPLATE = Path(__file__).resolve().parents[2] / "examples" / "templates" / "sharded-training.yaml"
POOL = PoolContext(name="nvl72", keys=("zone", "spine", "rack", "gpu-clique"),
                   node_capacities=((4, 144_000, 960 * 2**30, 4 * 2**40),))
QUOTED = """default-values:
  ngpu: 2
workflow:
  name: quoted
  tasks:
  - name: train
    image: busybox
    command: ["true"]
resources:
  default:
    gpu: "{{ngpu}}"
"""


def render_errors(text: str, **kwargs) -> list[dict[str, str]]:
    with pytest.raises(SpecInvalidError) as caught:
        render_spec(text, **kwargs)
    return caught.value.to_list()


def test_default_values_fill_a_quoted_quantity():
    """The replayed report: `gpu: "{{ngpu}}"` was refused as an invalid quantity."""
    # when
    rendered = render_spec(QUOTED)
    spec = parse_workflow(rendered.text, pool=POOL)
    # then
    assert rendered.values == {"ngpu": 2}
    assert spec.groups[0].tasks[0].resource_spec.gpu == 2


def test_a_template_saved_with_a_byte_order_mark_keeps_its_default_values():
    """A file saved as "UTF-8 with BOM" (Windows editors) said "template: line 4: 'ngpu' is undefined":
    its first line, ``\ufeffdefault-values:``, was not found as the defaults' block."""
    # when
    rendered = render_spec("\ufeff" + QUOTED)
    spec = parse_workflow(rendered.text, pool=POOL)
    # then
    assert rendered.values == {"ngpu": 2}
    assert spec.groups[0].tasks[0].resource_spec.gpu == 2


def test_set_values_override_defaults_and_drive_a_loop():
    # given
    text = TEMPLATE.read_text()
    # when
    rendered = render_spec(text, values={"shards": 3, "ngpu": 2})
    spec = parse_workflow(rendered.text, pool=POOL)
    # then
    assert rendered.values == {"shards": 3, "ngpu": 2, "image": "nvcr.io/nvidia/pytorch:24.03-py3"}
    assert [task.name for task in spec.groups[0].tasks] == ["shard1", "shard2", "shard3"]
    assert [task.lead for task in spec.groups[0].tasks] == [True, False, False]
    assert {task.resource_spec.gpu for task in spec.groups[0].tasks} == {2}
    assert spec.groups[0].tasks[2].args == ("--nnodes=3", "--nproc-per-node=2", "--node-rank=2", "train.py")


def test_set_env_reaches_every_task():
    # when
    rendered = render_spec(TEMPLATE.read_text(), env={"WANDB_MODE": "offline"},
                           dump=lambda doc: yaml.safe_dump(doc, sort_keys=False))
    spec = parse_workflow(rendered.text, pool=POOL)
    # then
    assert [dict(task.environment) for task in spec.groups[0].tasks] == [{"WANDB_MODE": "offline"}] * 2
    assert rendered.env == {"WANDB_MODE": "offline"}


def test_a_spec_without_template_code_or_values_is_left_as_it_is():
    # given: `${#x}` is shell, not a Jinja comment, when nothing else marks the spec as a template
    text = "workflow:\n  name: plain\n  tasks: [{name: a, image: b, command: ['echo ${#x}']}]\n"
    # when
    rendered = render_spec(text)
    # then
    assert (rendered.text, rendered.values) == (text, {})


@pytest.mark.parametrize(
    ("raw", "value"),
    [("4", 4), ("-2", -2), ("0.5", 0.5), ("1e3", 1000.0), ("4Gi", "4Gi"), ("", ""), ("true", "true")],
    ids=["_case_int", "_case_negative", "_case_float", "_case_exponent", "_case_quantity", "_case_empty",
         "_case_word"],
)
def test_set_casts_numbers_only(raw, value):
    assert cast_value(raw) == value


def test_assignments_need_an_equals_sign():
    # when
    with pytest.raises(SpecInvalidError) as caught:
        parse_assignments(["a=1", "oops", "b=x=y"], cast=True, path="set")
    # then
    assert caught.value.to_list() == [{"path": "set[1]", "message": "expected NAME=VALUE, got 'oops'"}]
    assert parse_assignments(["a=1", "b=x=y"], cast=True, path="set") == {"a": 1, "b": "x=y"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("x: 1\n\n{{ missing }}\n", "line 3: 'missing' is undefined"),
        ("x: 1\n{% if %}\n", "line 2: Expected an expression, got 'end of statement block'"),
        ("{% for i in range(100) %}{% for j in range(100) %}{% for k in range(100) %}{% endfor %}{% endfor %}"
         "{% endfor %}", "line 1: the template takes more than 100000 steps (loop iterations and calls)"),
        ("{{ range(20000) }}", "line 1: range() of 20000 items; at most 10000"),
        ("{{ 'x' * 2000000 }}", "line 1: a value of the template grows past 1048576 characters"),
        ("{{ 7 ** 100000 }}", "line 1: 7 ** 100000 is too large"),
        ("{{ '%09999d' % 1 }}", "line 1: '%' formatting of text is not supported; join text with '~'"),
        ("{{ 'a'.ljust(100000000) }}", "line 1: the text method ljust() is not supported"),
        ("{{ 'a'|center(100000000) }}", "line 1: No filter named 'center'."),
        ("{{ ''.__class__ }}", "line 1: access to attribute '__class__' of 'str' object is unsafe."),
        ("{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}",
         "line 1: recursive loops are not supported in workflow specs"),
        ("{{ 1 / 0 }}", "line 1: ZeroDivisionError: division by zero"),
    ],
)
def test_template_errors_carry_their_line(body, message):
    assert render_errors(body) == [{"path": "template", "message": message}]


def test_output_is_bounded():
    # when
    errors = render_errors("{% for i in range(100) %}{{ 'x' * 100 }}{% endfor %}",
                           limits=TemplateLimits(max_output=5_000))
    # then
    assert errors == [{"path": "template", "message": "the rendered spec is longer than 5000 characters"}]


def test_bad_value_names_and_types_are_refused():
    # when
    errors = render_errors(QUOTED, values={"1x": 1, "ok": [1]}, env={"BAD NAME": "x"})
    # then
    assert errors == [
        {"path": "set.1x", "message": "invalid value name '1x': use letters, digits and '_', starting with a letter"},
        {"path": "set.ok", "message": "must be a string, number or boolean"},
        {"path": 'set_env["BAD NAME"]', "message": "invalid environment variable name 'BAD NAME'"},
    ]


def test_default_values_must_be_plain():
    errors = render_errors("default-values:\n  a: '{{ b }}'\nworkflow: {}\n")
    assert errors == [{"path": "default-values", "message": "default-values must be plain values, not template code"}]


def _tasks_spec(tasks: int) -> str:
    rows = "".join(f"  - {{name: t{index}, image: busybox, command: ['true']}}\n" for index in range(tasks))
    return f"workflow:\n  name: many\n  tasks:\n{rows}"


def test_set_env_that_alone_makes_the_spec_too_large_is_refused_before_it_is_dumped():
    """Replays the attack run's finding: 1 MB of ``set_env`` on 100 tasks was dumped into a 100 MB spec
    (40 s of CPU) before the size check after the dump refused it."""
    # given: 200 x 1 KB variables on 10 tasks, ~2 MB; a dump that must not run
    env = {f"V{index}": "x" * 1000 for index in range(200)}

    def dump(document):
        raise AssertionError("dumped")

    # when
    errors = render_errors(_tasks_spec(10), env=env, dump=dump)

    # then: each variable is NAME: value on a line at least (1000 + 3 + len(name))
    per_task = sum(len(name) + 1003 for name in env)
    assert errors == [{"path": "set_env", "message": f"200 environment variables of {per_task} bytes on each of 10 "
                                                     "tasks make the spec larger than 1048576 bytes"}]


def test_set_env_within_the_spec_size_is_dumped():
    # given: 100 x 1 KB on 5 tasks, ~500 KB
    env = {f"V{index}": "x" * 1000 for index in range(100)}

    # when
    rendered = render_spec(_tasks_spec(5), env=env, dump=lambda doc: yaml.safe_dump(doc, sort_keys=False))

    # then
    assert [len(task["environment"]) for task in yaml.safe_load(rendered.text)["workflow"]["tasks"]] == [100] * 5


@pytest.mark.parametrize(
    ("values", "env", "expected"),
    [
        ({}, {"E": "x" * 4097}, [{"path": "set_env.E", "message": "longer than 4096 characters"}]),
        ({}, {f"E{index}": "x" for index in range(257)},
         [{"path": "set_env", "message": "257 environment variables; at most 256"}]),
        ({f"v{index}": 1 for index in range(257)}, {}, [{"path": "set", "message": "257 values; at most 256"}]),
    ],
    ids=["_case_env_value_too_long", "_case_too_many_env", "_case_too_many_values"],
)
def test_submitted_values_and_variables_are_bounded(values, env, expected):
    """Replays the attack run's findings: a 1 MB ``set_env`` value went to every task unchecked (``set``
    values stop at 4,096 characters), and 100,000 ``set`` values were stored with the workflow."""
    # when
    errors = render_errors(QUOTED, values=values, env=env, dump=yaml.safe_dump)

    # then
    assert errors == expected
