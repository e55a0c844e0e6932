"""An app's parameters read from its spec's default-values (pure: no database)."""

from __future__ import annotations

import pytest

from catalog.parameters import Parameter, name_problems, parameters, ref_parse, unknown_values
from workflows.spec import SpecInvalidError

SPEC = """\
workflow:
  name: {{ workflow_name }}
  tasks:
  - name: t
    image: {{ image }}
default-values:
  workflow_name: my-workflow-name # Name to assign to the workflow
  # The image every task runs
  # (any registry)
  image: "ubuntu#22"
  steps: 100
  sizes: [1, 2]   # a list
  nested:   # a mapping
    a: 1   # not a parameter
  quoted: 'a # b'   # a hash inside quotes is no comment
"""


def test_parameters_keep_their_order_defaults_and_comments():
    # when
    found = parameters(SPEC)
    # then
    assert found == [
        Parameter("workflow_name", "my-workflow-name", "Name to assign to the workflow"),
        Parameter("image", "ubuntu#22", "The image every task runs (any registry)"),
        Parameter("steps", 100, ""),
        Parameter("sizes", [1, 2], "a list"),
        Parameter("nested", {"a": 1}, "a mapping"),
        Parameter("quoted", "a # b", "a hash inside quotes is no comment"),
    ]


def test_a_spec_without_default_values_has_no_parameters_and_a_bad_section_is_refused():
    assert parameters("workflow:\n  name: x\n") == []
    with pytest.raises(SpecInvalidError) as refused:
        parameters("workflow:\n  name: x\ndefault-values:\n  - a\n")
    assert [error.path for error in refused.value.errors] == ["default-values"]


def test_unknown_values_name_the_value_and_the_parameters_there_are():
    known = parameters(SPEC)
    errors = unknown_values({"steps": 3, "unknown": 1}, known)
    assert [(error.path, error.message) for error in errors] == [
        ("set.unknown", "'unknown' is not a parameter of this app; its parameters: workflow_name, image, steps, "
                        "sizes, nested, quoted")]


@pytest.mark.parametrize(("ref", "expected"), [("a", ("a", None)), ("my-app_2:3", ("my-app_2", 3))])
def test_refs(ref, expected):
    assert ref_parse(ref) == expected


@pytest.mark.parametrize("ref", ["", ":1", "a:", "a:x", "a:0", "a:1:2"])
def test_bad_refs(ref):
    with pytest.raises(ValueError):
        ref_parse(ref)


def test_name_problems():
    assert name_problems("good-name_1") == []
    assert name_problems("bad name") == [("name", "'bad name': an app name has only letters, digits, '-' and '_'")]
    assert name_problems("x" * 64) == [("name", "at most 63 characters")]
    assert name_problems(None) == [("name", "required: letters, digits, '-' and '_'")]
