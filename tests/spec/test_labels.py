"""The pure label rules (workflows/spec/labels.py): --label assignments, OSMO's selectors, the policy."""

from __future__ import annotations

import pytest

from workflows.spec import SpecInvalidError
from workflows.spec.labels import (
    LabelPolicy,
    LabelSelector,
    SelectorError,
    label_assignments,
    labels_merge,
    policy_problems,
    selector_parse,
)


def test_assignments_are_checked_and_the_last_one_of_a_key_wins():
    assert label_assignments(["team=a", "run=r1", "team=b"]) == {"team": "b", "run": "r1"}
    with pytest.raises(SpecInvalidError) as caught:
        label_assignments(["team", "ok=yes", "bad key=x", "v=a b"], path="label")
    assert [error.path for error in caught.value.errors] == ["label[0]", "label[2]", "label[3]"]


def test_the_command_line_wins_over_the_spec():
    assert labels_merge({"team": "a", "project": "p"}, {"team": "b"}) == {"team": "b", "project": "p"}
    assert labels_merge({"team": "a"}, None) == {"team": "a"}


@pytest.mark.parametrize(("text", "patterns"), [
    ("team=robotics", ("robotics",)),
    ("team=robotics_**", ("robotics_*",)),
    ("team=*", ("*",)),
    ("team=(a|b)", ("a", "b")),
    ("team=robotics_(a|b)", ("robotics_a", "robotics_b")),
    ("project=(sim_*|hil_*)", ("sim_*", "hil_*")),
    ("example.com/team=x", ("x",)),
])
def test_selectors_parse_as_osmos(text, patterns):
    assert selector_parse(text).patterns == patterns


@pytest.mark.parametrize(("text", "says"), [
    ("team", "is not KEY=SELECTOR"),
    ("team=", "the selector is empty"),
    ("team=(a", "has no ')'"),
    ("team=(a)", "at least two"),
    ("team=a|b", "unexpected '|'"),
    ("team=((a|b)|c)", "cannot be nested"),
    ("-team=a", "invalid label key"),
    ("team=a b", "can match no label value"),
    ("team=" + "(a|b)" * 6, "more than 32 patterns"),
])
def test_selectors_that_do_not_parse_say_why(text, says):
    with pytest.raises(SelectorError, match=None) as caught:
        selector_parse(text)
    assert says in str(caught.value)


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    (LabelSelector("team", ("robotics_*",)), {"team": "robotics_a"}, True),
    (LabelSelector("team", ("robotics_*",)), {"team": "vision"}, False),
    (LabelSelector("team", ("*_a",)), {"team": "robotics_a"}, True),
    (LabelSelector("team", ("a", "b")), {"team": "b"}, True),
    (LabelSelector("team", ("*",)), {"project": "x"}, False),
])
def test_a_selector_matches_a_workflows_labels(selector, labels, matches):
    assert selector.matches(labels) is matches


def test_the_policy_allows_requires_counts_and_chooses_pod_labels_and_metrics():
    # given
    policy = LabelPolicy(allowed_keys=("team", "run", "project"), required_keys=("run",), max_labels=2,
                         pod_label_keys=("team",), pod_label_prefix="example.com/",
                         metric_values=(("team", ("robotics",)),))
    labels = {"team": "vision", "project": "p", "owner": "me"}
    # then
    assert [(error.path, error.message.split(";")[0]) for error in policy.check(labels)] == [
        ("labels", "3 labels"),
        ("labels.owner", "label key 'owner' is not allowed"),
        ("labels.run", "label 'run' is required (set it in the spec's workflow.labels or with --label run=VALUE)"),
    ]
    assert policy.pod_labels(labels) == {"example.com/team": "vision"}
    assert policy.metric_dimensions({"team": "vision"}) == [("team", "other")]
    assert policy.metric_dimensions({"team": "robotics"}) == [("team", "robotics")]
    assert policy.metric_dimensions({}) == [("team", "")]
    assert LabelPolicy().pod_labels(labels) == labels  # the default: every key, no prefix


def test_a_prefix_that_makes_a_key_too_long_is_refused_at_the_key():
    policy = LabelPolicy(pod_label_prefix="x" * 60 + "-")
    assert [error.path for error in policy.check({"team-name": "a"})] == ["labels.team-name"]


def test_a_policy_an_admin_writes_is_checked():
    assert policy_problems(LabelPolicy()) == {}
    problems = policy_problems(LabelPolicy(allowed_keys=("a",), required_keys=("b",), max_labels=17,
                                           pod_label_prefix="has space/",
                                           metric_values=tuple((f"k{i}", ()) for i in range(5))))
    assert sorted(problems) == ["max_labels", "metric_values", "pod_label_prefix", "required_keys"]
