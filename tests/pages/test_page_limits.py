"""What a hostile spec costs the status pages (docs/design.md §7: no input yields a 5xx, and none holds
a web process): the submit page's error rows."""

from __future__ import annotations

import pytest

from pages import forms
from pages.forms import yaml_lines_for_paths
from workflows.models import Workflow

pytestmark = pytest.mark.django_db


def _unknown_resources_spec(tasks: int) -> str:
    lines = ["workflow:", "  name: many-errors", "  resources:", "    default: {gpu: 1}", "  tasks:"]
    for index in range(tasks):
        lines += [f"  - name: t{index}", "    image: busybox", "    command: [a]", f"    resource: missing{index}"]
    return "\n".join(lines) + "\n"


def test_a_thousand_distinct_errors_compose_the_spec_once(alice_client, scene, monkeypatch):
    """Replays the attack run's finding: the submit page composed the whole YAML once per error row, so
    a 70 KB spec of 1,000 tasks each naming an unknown resource (1,000 distinct messages) held the web
    process for 240 s of CPU before answering."""
    # given
    spec = _unknown_resources_spec(1000)
    composed: list[int] = []

    class Counted(forms.DocumentLoader):
        def get_single_node(self):
            composed.append(1)
            return super().get_single_node()

    monkeypatch.setattr(forms, "DocumentLoader", Counted)
    before = Workflow.objects.count()

    # when
    response = alice_client.post("/submit/", {"spec": spec, "pool": "nvl72", "action": "dry_run"})

    # then every row shown has its own line, from one composition of the text
    text = response.content.decode()
    assert response.status_code == 400
    assert composed == [1]
    assert "The spec has 1000 problems" in text
    lines = spec.splitlines()
    for index in (0, 117, 199):
        line = lines.index(f"    resource: missing{index}") + 1
        assert f"(line {line})</span>: unknown resource &#x27;missing{index}&#x27;" in text
    assert Workflow.objects.count() == before


def test_the_page_lists_the_first_200_rows_and_counts_the_rest(alice_client, scene):
    """Replays the attack run's finding: 24,000 errors (as many resources with a negative gpu) made a
    5.8 MB page that took the web process 7 s to render."""
    # given
    spec = _unknown_resources_spec(1000)

    # when
    response = alice_client.post("/submit/", {"spec": spec, "pool": "nvl72", "action": "dry_run"})

    # then
    text = response.content.decode()
    assert response.status_code == 400
    assert text.count('<span class="path">') == 200
    assert "missing199&#x27;" in text and "missing200&#x27;" not in text
    assert 'id="errors-hidden" data-hidden="800">and 800 more' in text


@pytest.mark.parametrize(
    "text",
    ["workflow: " + "[" * 200_000 + "]" * 200_000, "workflow: [unclosed"],
    ids=["_case_nested_past_the_recursion_limit", "_case_unreadable"],
)
def test_a_spec_that_cannot_be_composed_has_no_lines(text):
    # when
    lines = yaml_lines_for_paths(text, ["workflow.name", ""])

    # then
    assert lines == [None, None]


def test_paths_that_name_no_element_do_not_compose_the_spec(monkeypatch):
    # given
    monkeypatch.setattr(forms, "DocumentLoader", lambda *args, **kwargs: pytest.fail("composed"))

    # when
    lines = yaml_lines_for_paths("workflow: " + "[" * 5000, ["", "(whole spec)"])

    # then
    assert lines == [None, None]


def test_a_regex_nested_past_the_recursion_limit_is_a_spec_error_on_the_page(alice_client, scene):
    """Replays the attack run's finding: an input ``regex`` of 5,000 nested groups answered the submit
    page with a 500 (RecursionError from ``re.compile``)."""
    # given
    spec = ("workflow:\n  name: rx\n  tasks:\n  - name: t0\n    image: busybox\n    command: [a]\n    inputs:\n"
            f"    - url: s3://bucket/data\n      regex: '{'(' * 5000 + ')' * 5000}'\n")
    before = Workflow.objects.count()

    # when
    response = alice_client.post("/submit/", {"spec": spec, "pool": "nvl72", "action": "dry_run"})

    # then
    assert response.status_code == 400
    assert "does not compile: it nests groups too deeply" in response.content.decode()
    assert Workflow.objects.count() == before


@pytest.mark.parametrize("url", ["/pools/%00/", "/pools/a%00b/?page=1"], ids=["_case_nul", "_case_nul_inside"])
def test_a_pool_page_named_with_a_nul_is_a_404(alice_client, scene, url):
    """Replays the attack run's finding: ``/pools/%00/`` answered 500 on PostgreSQL (a NUL in the query)."""
    # when
    response = alice_client.get(url)

    # then
    assert response.status_code == 404


def test_a_template_hiding_a_megabyte_of_values_in_comments_is_not_composed_past_the_limits(alice_client, scene,
                                                                                             monkeypatch):
    """Replays the attack run's finding: ``# {% if false %}`` before 480,000 values (which the rendering
    drops, so the API refuses the rest in 0.02 s) made the submit page compose all of them to find the
    error lines: 10 s of CPU and 300 MB."""
    # given
    spec = ("# {% if false %}\njunk: [" + ",".join(["1"] * 120_000) + "]\n# {% endif %}\n\n"
            "workflow:\n  name: tpl\n  tasks:\n  - {name: t0, image: busybox, command: [a], resource: missing}\n")

    monkeypatch.setattr(forms, "DocumentLoader", lambda *args, **kwargs: pytest.fail("composed"))

    # when
    response = alice_client.post("/submit/", {"spec": spec, "pool": "nvl72", "action": "dry_run"})

    # then the row has the template line the service found, and the page composed nothing
    text = response.content.decode()
    assert response.status_code == 400
    assert "(line 8)</span>: unknown resource &#x27;missing&#x27;" in text


def test_lines_are_found_within_the_limits():
    # given
    text = "workflow:\n  name: wf\n  tasks:\n  - name: a\n    image: b\n"

    # when
    lines = yaml_lines_for_paths(text, ["workflow.tasks[0].image", "workflow.tasks[3]", "workflow.nope"])

    # then: the element, else its closest ancestor
    assert lines == [5, 3, 1]


TEMPLATE_WITH_A_BRANCH = """workflow:
  name: branched
  tasks:
  - name: a
    image: busybox
    command: [sh]
  {% if extra %}
  - name: extra
    image: busybox
    command: [sh]
  {% endif %}
  - name: b
    image: busybox
    command: [sh]
    bogus: 1
default-values:
  extra: false
"""


def test_an_error_of_a_template_shows_the_template_line_the_service_found(alice_client, scene):
    """A finding of the review: the service adds each template error's line (docs/spec.md, "Templates"),
    but the page composed the template itself, which is no YAML with block tags: no line was shown."""
    # when
    response = alice_client.post("/submit/", {"spec": TEMPLATE_WITH_A_BRANCH, "pool": "nvl72", "action": "dry_run"})

    # then the row says the line of `bogus: 1` and shows it
    text = response.content.decode()
    assert response.status_code == 400
    assert "(line 15)</span>: unknown field &#x27;bogus&#x27;" in text


def test_a_repeated_key_has_the_line_of_its_last_occurrence_on_the_page():
    # given a key written twice: the loader keeps the last value (with a warning), as OSMO's does
    text = "workflow:\n  name: first\n  tasks: []\n  name: second\n"

    # when
    lines = yaml_lines_for_paths(text, ["workflow.name"])

    # then
    assert lines == [4]
