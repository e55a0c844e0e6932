"""Lines of error paths in YAML text and in templates (parsing.yamlpos): what a hostile text may cost,
and that a rendered spec is read as the YAML it is."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from parsing.yamlpos import lines_of, yaml_shape
from workflows.spec.isolation import ProcessLimitError, ProcessLimits, run_isolated
from workflows.spec.template import TemplateLimits, render_spec
from workflows.spec.template_lines import template_lines

_REGEX = re.compile(r"\{\{.*?\}\}")  # what yaml_shape replaces, as a regex (quadratic on a line of "{{")


@given(st.text(alphabet="{} x\n", max_size=40))
def test_expressions_are_replaced_as_the_regex_replaces_them(text):
    # given any text of braces / when shaped / then as the one-line regex would
    assert yaml_shape(text) == (text if "{%" in text or "{{" not in text
                                else _REGEX.sub(lambda match: "x" * len(match.group(0)), text))


def test_a_line_of_a_megabyte_of_open_expressions_is_shaped_in_one_pass():
    """Replays a finding of the review: the regex read to the line's end from each ``{{``, so 160 KB of
    them took 200 s of a web process (a template printing ``{{ '{{' * 80000 }}`` beside any error).
    The bound below is three orders of magnitude above what one pass costs."""
    # given
    text = 'junk: "' + "{{" * 500_000 + '"\nname: 1\n'

    # when shaped in a process bounded to 20 s of CPU
    try:
        shaped = run_isolated(yaml_shape, (text,), ProcessLimits(max_cpu_seconds=20, max_wall_seconds=120))
        outcome = "unchanged" if shaped == text else "changed"
    except ProcessLimitError as exc:
        outcome = exc.limit

    # then
    assert outcome == "unchanged"


def test_the_lines_of_a_rendered_spec_read_a_left_expression_as_data():
    # given a template whose rendering holds "{{" and "}}" as two items of one list
    text = 'workflow:\n  name: w\n  tags: ["{{ "{{" }}", "{{ "}}" }}", {k: v}]\n'
    rendered = render_spec(text, values={})

    # when the line of the third item's key is asked of the rendering and of the template
    path = "workflow.tags[2].k"
    in_rendered = lines_of(rendered.text, [path], template=False)
    in_template = template_lines(text, rendered.values, rendered.text, [path], TemplateLimits())

    # then it is found on line 3 (shaped, the rendering held two items: "xxxxxxxx" and the mapping)
    assert rendered.text.splitlines()[2] == '  tags: ["{{", "}}", {k: v}]'
    assert in_rendered == [3]
    assert in_template == {path: 3}


def test_a_repeated_key_has_the_line_of_its_last_occurrence_the_one_the_spec_keeps():
    # given a key written twice: the loader keeps the last value (with a warning), as OSMO's does
    text = "workflow:\n  name: first\n  tasks: []\n  name: second\n"

    # when
    lines = lines_of(text, ["workflow.name"], template=False)

    # then the error of the kept value points at it
    assert lines == [4]


@pytest.mark.parametrize("breaker", ["\u2028", "\u2029", "\x85"], ids=["_case_u2028", "_case_u2029", "_case_nel"])
def test_lines_are_the_files_lines_when_a_value_holds_a_break_pyyaml_counts(breaker):
    """PyYAML also ends a line at U+2028, U+2029 and U+0085; an editor does not. The CLI names the
    file's line (a finding of the review: the CLI's line was one off after such a value)."""
    text = f'workflow:\n  name: "a{breaker}b"\n  tasks:\n  - name: t\n    image: x\n'
    assert lines_of(text, ["workflow.tasks[0].image", "workflow.name"]) == [5, 2]
