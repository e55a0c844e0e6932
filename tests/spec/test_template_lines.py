"""The template line of an error found in a rendered spec (workflows.spec.template_lines; docs/spec.md,
"Templates"): a loop's tasks carry the line of the loop's body, a branch's task its branch's line."""

from __future__ import annotations

from workflows.spec.template import TemplateLimits, render_spec
from workflows.spec.template_lines import template_lines

LOOPED = """workflow:
  name: {{ name }}
  groups:
  - name: ranks
    tasks:
    {% for rank in range(ranks) %}
    {% if rank == 0 %}
    - name: leader
      lead: true
    {% else %}
    - name: rank-{{ rank }}
    {% endif %}
      image: busybox
      command: [sh, -c, "echo {{ rank }} of {{host:leader}}"]
      credentials:
        hub-token:
          TOKEN: token
    {% endfor %}
default-values:
  name: ranked
  ranks: 3
"""


def lines_of(text: str, paths: list[str], **values: object) -> dict[str, int]:
    rendered = render_spec(text, values=values)  # type: ignore[arg-type]
    return template_lines(text, rendered.values, rendered.text, paths, TemplateLimits())


def test_paths_of_a_looped_template_have_the_lines_of_the_template():
    # given: paths in the rendered spec, three tasks written by one loop body
    paths = ["workflow.name", "workflow.groups[0].tasks[0].name", "workflow.groups[0].tasks[2].name",
             "workflow.groups[0].tasks[1].credentials.hub-token", "workflow.groups[0].tasks[2].command[2]"]

    # when
    lines = lines_of(LOOPED, paths)

    # then: each at its template line, whatever the iteration
    assert lines == {"workflow.name": 2, "workflow.groups[0].tasks[0].name": 8,
                     "workflow.groups[0].tasks[2].name": 11, "workflow.groups[0].tasks[1].credentials.hub-token": 16,
                     "workflow.groups[0].tasks[2].command[2]": 14}


def test_a_path_not_in_the_rendered_spec_or_written_by_a_tag_has_no_line():
    # given: task lines written by a line that holds a tag (a mark there would change the tag's text)
    text = ("workflow:\n  name: w\n  tasks:\n"
            "{% for t in ['a', 'b'] %}  - {name: {{ t }}, image: busybox, command: [sh]}\n{% endfor %}\n")

    # when
    lines = lines_of(text, ["workflow.tasks[1].name", "workflow.resources.gpu", "workflow.name"])

    # then: only the plain line is known
    assert lines == {"workflow.name": 2}


def test_a_template_whose_marked_rendering_differs_gives_no_lines():
    # given: a template that prints its own source lines back (a mark would change what it renders)
    text = "workflow:\n  name: w{{ '' }}\n  tasks: []\n"
    rendered = "workflow:\n  name: w-other\n  tasks: []\n"

    # when
    lines = template_lines(text, {}, rendered, ["workflow.name"], TemplateLimits())

    # then
    assert lines == {}


def test_a_template_with_windows_line_ends_has_its_lines():
    # given a template saved with CRLF line ends (Jinja renders them as "\n")
    text = ("workflow:\r\n  name: '{{ \"w\" }}'\r\n  tasks:\r\n  - name: a\r\n    image: busybox\r\n"
            "    command: [sh]\r\n")

    # when
    lines = lines_of(text, ["workflow.name", "workflow.tasks[0].image"])

    # then
    assert lines == {"workflow.name": 2, "workflow.tasks[0].image": 5}


def test_a_rendering_holding_a_character_yaml_counts_as_a_line_break_has_the_lines_of_its_text():
    """PyYAML counts U+2028 (and U+2029, U+0085) as line breaks, the rendering's lines do not: a path
    after such a value would be given the template line of another path."""
    # given a value of three U+2028, and a path on a line after it
    text = ("workflow:\n  name: w\n  tasks:\n  - {name: a, image: '{{ \"\\u2028\" * 3 }}', command: [sh]}\n"
            "  - {name: b, image: busybox, command: [sh]}\n  labels:\n    x: y\n  timeout: 1\n  pool: p\n")

    # when
    lines = lines_of(text, ["workflow.tasks[1].name"])

    # then line 5, not line 8 (the YAML line of the path, counting the three)
    assert lines == {"workflow.tasks[1].name": 5}
