"""The CLI's side of OSMO's spec (docs/spec.md): ``localpath`` files read relative to the spec and
sent inline, the service's warnings printed, the spec's pool used when none is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.errors import CliError
from cli.localpath import inline_localpaths
from workflows.spec import PoolContext, parse_workflow
from workflows.spec.template import render_spec

SPEC = """workflow:
  name: local
  tasks:
  - name: train
    image: pytorch
    command: [bash, /tmp/run.sh]
    files:
    - path: /tmp/run.sh
      localpath: scripts/run.sh
    - localpath: "train.py"   # the trainer
      path: /tmp/train.py
"""
RUN_SH = "set -e\n  echo {{ not a template }} {% x %} {# y #} --master_addr {{host:train}}\n\npython /tmp/train.py\n\n"
TRAIN_PY = "print({'a': 1})"


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "run.sh").write_text(RUN_SH)
    (tmp_path / "train.py").write_text(TRAIN_PY)
    (tmp_path / "train.yaml").write_text(SPEC)
    return tmp_path


def test_localpath_files_are_inlined_exactly_and_survive_rendering(spec_dir):
    # when
    sent = inline_localpaths(SPEC, spec_dir, "train.yaml")
    parsed = parse_workflow(render_spec(sent).text, pool=PoolContext(name="demo"))

    # then
    files = parsed.groups[0].tasks[0].files
    assert [(file.path, file.contents) for file in files] == [("/tmp/run.sh", RUN_SH), ("/tmp/train.py", TRAIN_PY)]
    assert "localpath" not in sent


def test_a_missing_localpath_file_names_the_spec_line(spec_dir):
    # given
    (spec_dir / "train.py").unlink()

    # when
    with pytest.raises(CliError) as caught:
        inline_localpaths(SPEC, spec_dir, "train.yaml")

    # then
    assert caught.value.message == (
        f"train.yaml line 10: localpath 'train.py': cannot read {spec_dir / 'train.py'}: No such file or directory"
    )


def test_a_directory_localpath_is_refused(spec_dir):
    # when
    with pytest.raises(CliError) as caught:
        inline_localpaths(SPEC.replace("scripts/run.sh", "scripts"), spec_dir, "train.yaml")

    # then
    assert caught.value.message == ("train.yaml line 9: localpath 'scripts' must name a file (directories are not "
                                    "uploaded; use inputs with a url)")


@pytest.mark.django_db(transaction=True)
def test_submit_sends_localpath_files_inline_and_uses_the_spec_pool(osmo, nvl72, spec_dir):
    from workflows.models import Workflow

    # given: the spec names its pool; no --pool, no OSMO_POOL, no profile default
    (spec_dir / "train.yaml").write_text(SPEC.replace("  name: local\n", "  name: local\n  pool: nvl72\n"))

    # when
    result = osmo("workflow", "submit", str(spec_dir / "train.yaml"), env={"OSMO_POOL": None})

    # then
    assert result.exit_code == 0, result.output
    assert "Submitted workflow local-1 to pool nvl72" in result.stdout
    stored = Workflow.objects.get().spec_text
    assert "localpath" not in stored
    assert "{{host:train}}" in stored


@pytest.mark.django_db(transaction=True)
def test_submit_prints_the_warnings_of_a_repeated_key(osmo, nvl72, tmp_path):
    # given
    spec = "workflow:\n  name: twice\n  name: once\n  tasks:\n  - {name: a, image: busybox, command: [sh]}\n"
    (tmp_path / "twice.yaml").write_text(spec)

    # when
    result = osmo("workflow", "submit", str(tmp_path / "twice.yaml"), "--pool", "nvl72", "--dry-run")

    # then
    assert result.exit_code == 0, result.output
    assert (f"warning: {tmp_path / 'twice.yaml'}: workflow.name: duplicate key 'name' at line 3 (first at line 2): "
            "the last value is kept") in result.stderr
    assert "workflow once is valid for pool nvl72" in result.stdout


TEMPLATE_SPEC = """workflow:
  name: tpl
  tasks:
  - name: fetch
    image: busybox
    command: [sh, -c, "echo {{ greeting }}"]
    credentials:
      hub-token:
        TOKEN: token
    outputs:
    - url: {{ bucket }}/fetched/{{workflow_id}}/
default-values:
  greeting: hi
  bucket: s3://bucket
"""


@pytest.mark.django_db(transaction=True)
def test_an_error_in_a_template_without_block_tags_names_its_line(osmo, nvl72, tmp_path):
    """Regression: `url: {{ bucket }}/...` is no YAML before rendering, so the errors of a templated
    spec (OSMO's cookbook writes its storage URLs so) were said without their line."""
    # given: a template whose submitter has no credential 'hub-token'
    path = tmp_path / "tpl.yaml"
    path.write_text(TEMPLATE_SPEC)

    # when
    result = osmo("workflow", "submit", str(path), "--pool", "nvl72", "--dry-run")

    # then: refused, the credential's line (8) named in the file
    assert result.exit_code == 2, result.output
    assert (f"workflow.tasks[0].credentials.hub-token ({path} line 8): you have no credential named 'hub-token'"
            in result.stderr)
    assert "is valid" not in result.stdout


LOOPED_SPEC = """workflow:
  name: ranks
  groups:
  - name: ranks
    tasks:
    {% for rank in range(2) %}
    - name: rank-{{ rank }}
      lead: {{ rank == 0 }}
      image: busybox
      command: [sh, /tmp/run.sh]
      files:
      - path: /tmp/train.py
        localpath: train.py
      credentials:
        hub-token:
          TOKEN: token
    {% endfor %}
"""


@pytest.mark.django_db(transaction=True)
def test_an_error_in_a_looped_template_names_its_line_in_the_file(osmo, nvl72, spec_dir):
    """Regression: errors of a template with block tags (OSMO's multi-node recipes loop over ranks)
    were said without a line; the service's template line is said in the file, past the lines a
    localpath file added to what was sent."""
    # given: a loop whose tasks name a credential the submitter does not have, after a localpath file
    path = spec_dir / "ranks.yaml"
    path.write_text(LOOPED_SPEC)

    # when
    result = osmo("workflow", "submit", str(path), "--pool", "nvl72", "--dry-run")

    # then: both ranks' errors at line 15 of the file
    assert result.exit_code == 2, result.output
    for index in (0, 1):
        assert (f"workflow.groups[0].tasks[{index}].credentials.hub-token ({path} line 15): you have no "
                "credential named 'hub-token'") in result.stderr
