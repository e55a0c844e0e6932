"""OSMO's commands and habits in the ``osmo`` CLI (docs/design.md §11): templates with --set, the
profile's default pool, validate, spec, restart, -t/-o output, list --watch, collapsed errors, and
logs/events against a fake of their endpoints."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from cli.main import app
from tests.cli.conftest import Driver
from tests.cli.fake_server import FakeServer
from tests.factories import EXAMPLES

TEMPLATE = str(EXAMPLES / "templates" / "sharded-training.yaml")
SPEC_FILE = str(EXAMPLES / "multiple-nvl72-same-zone.yaml")
db = pytest.mark.django_db(transaction=True)


@db
def test_template_submit_with_set_and_the_profiles_default_pool(osmo, nvl72, config_file):
    # given
    missing = osmo("workflow", "submit", TEMPLATE)
    chosen = osmo("profile", "set", "pool", "nvl72")
    # when
    result = osmo("workflow", "submit", TEMPLATE, "--set", "shards=3", "--set", "ngpu=2",
                  "--set-string", "image=busybox:1", "--set-env", "MODE=fast")
    # then
    assert missing.exit_code == 2
    assert "error: no pool given" in missing.stderr
    assert "osmo profile set pool NAME" in missing.stderr
    assert chosen.exit_code == 0, chosen.output
    assert json.loads(config_file.read_text())["default_pool"] == "nvl72"
    assert result.exit_code == 0, result.output
    assert "Submitted workflow sharded-training-1 to pool nvl72 (priority NORMAL): PENDING" in result.stdout
    values = osmo("workflow", "spec", "sharded-training-1", "--values")
    assert values.stdout.splitlines() == ["image=busybox:1", "ngpu=2", "shards=3"]
    spec = osmo("workflow", "spec", "sharded-training-1").stdout
    assert "- name: shard3\n" in spec and "gpu: 2\n" in spec and "MODE: fast" in spec and "{{" not in spec
    profile = json.loads(osmo("profile", "list", "-t", "json").stdout)
    assert (profile["user"], profile["default_pool"]) == ("alice", "nvl72")


@db
def test_set_takes_several_values_after_one_option_as_osmos_cli_does(osmo, nvl72):
    # given: OSMO's documented habit, `--set a=1 b=2` (its --set, --set-string and --set-env take several)
    # when
    validated = osmo("workflow", "validate", TEMPLATE, "--pool", "nvl72", "--set", "shards=3", "ngpu=2")
    submitted = osmo("workflow", "submit", TEMPLATE, "--pool", "nvl72", "--set", "shards=3", "ngpu=2",
                     "--set-string", "image=busybox:1", "--set-env", "MODE=fast", "STEPS=10")
    # then
    assert validated.exit_code == 0, validated.output
    assert validated.stdout.splitlines()[-1] == (
        "  template values: image=nvcr.io/nvidia/pytorch:24.03-py3, ngpu=2, shards=3")
    assert submitted.exit_code == 0, submitted.output
    values = osmo("workflow", "spec", "sharded-training-1", "--values")
    assert values.stdout.splitlines() == ["image=busybox:1", "ngpu=2", "shards=3"]
    spec = osmo("workflow", "spec", "sharded-training-1").stdout
    assert "MODE: fast" in spec and "STEPS: '10'" in spec and "gpu: 2\n" in spec


@db
def test_set_values_stop_at_the_next_option_or_a_text_without_equals(osmo, nvl72):
    # given: the spec file after the values, and a stray word after them
    # when
    file_last = osmo("workflow", "validate", "--pool", "nvl72", "--set", "shards=1", "ngpu=1", TEMPLATE)
    stray = osmo("workflow", "validate", TEMPLATE, "--set", "shards=1", "oops", "--pool", "nvl72")
    # then
    assert file_last.exit_code == 0, file_last.output
    assert file_last.stdout.splitlines()[-1] == (
        "  template values: image=nvcr.io/nvidia/pytorch:24.03-py3, ngpu=1, shards=1")
    assert stray.exit_code == 2
    assert "Got unexpected extra argument(s) (oops)" in stray.output


@db
def test_profile_set_refuses_an_unknown_pool_or_key(osmo, nvl72, config_file):
    # when
    pool = osmo("profile", "set", "pool", "nope")
    key = osmo("profile", "set", "colour", "red")
    # then
    assert (pool.exit_code, pool.stderr.strip()) == (1, "error: pool nope not found (see osmo pool list)")
    assert (key.exit_code, key.stderr.strip()) == (2, "error: unknown profile key 'colour'; known: pool")
    assert not config_file.exists()


@db
def test_validate_exits_0_when_valid_and_2_when_invalid_or_never_fitting(osmo, nvl72, tmp_path):
    # given
    broken = tmp_path / "broken.yaml"
    broken.write_text("workflow:\n  name: b\n  tasks:\n" + "".join(
        f"  - {{name: shard{i}, image: busybox}}\n" for i in range(1, 31)))
    never = tmp_path / "never.yaml"
    never = tmp_path / "never.yaml"
    tasks = ", ".join(f"{{name: t{i}, image: b, command: [c]{', lead: true' if i == 1 else ''}}}" for i in range(1, 10))
    never.write_text(f"workflow:\n  name: huge\n  groups: [{{name: g, tasks: [{tasks}]}}]\n"
                     "resources:\n  default: {gpu: 4, topology: [{key: rack}]}\n")
    # when
    valid = osmo("workflow", "validate", TEMPLATE, "--pool", "nvl72", "--set", "shards=3")
    invalid = osmo("workflow", "validate", str(broken), "--pool", "nvl72")
    never_fits = osmo("workflow", "validate", str(never), "--pool", "nvl72")
    # then
    assert valid.exit_code == 0, valid.output
    assert valid.stdout.splitlines() == [
        f"{TEMPLATE} is valid for pool nvl72: workflow sharded-training, 1 group(s), 3 task(s).",
        "  train: placement now placed",
        "  template values: image=nvcr.io/nvidia/pytorch:24.03-py3, ngpu=4, shards=3",
    ]
    assert invalid.exit_code == 2
    assert invalid.stderr.splitlines()[1:] == [
        f"  workflow.tasks[*].command ({broken} line 4 and 29 more): this field is required (30 times)"]
    assert never_fits.exit_code == 2, never_fits.output
    assert "can never be placed in pool nvl72" in never_fits.stderr


@db
def test_restart_submits_the_stored_spec_again(osmo, nvl72):
    # given
    osmo("workflow", "submit", TEMPLATE, "--pool", "nvl72", "--set", "shards=1", "--priority", "high")
    # when
    result = osmo("workflow", "restart", "sharded-training-1")
    # then
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == ("Restarted sharded-training-1 as workflow sharded-training-2 in pool "
                                             "nvl72 (priority HIGH): PENDING")
    first, second = (osmo("workflow", "spec", f"sharded-training-{n}").stdout for n in (1, 2))
    assert first == second
    assert osmo("workflow", "restart", "nope-1").stderr.strip() == "error: workflow nope-1 not found"


@db
def test_restart_does_not_render_the_stored_spec_again(osmo, nvl72, tmp_path):
    # given: a template whose rendering leaves text that looks like Jinja ({% raw %}), run with a value
    spec = tmp_path / "raw.yaml"
    spec.write_text("default-values:\n  greeting: hello\nworkflow:\n  name: rawtest\n  tasks:\n  - name: t\n"
                    "    image: busybox\n"
                    "    command: [sh, -c, \"echo {{ greeting }} '{% raw %}{{ .State }}{% endraw %}'\"]\n")
    assert osmo("workflow", "submit", str(spec), "--pool", "nvl72", "--set", "greeting=hi").exit_code == 0
    # when
    result = osmo("workflow", "restart", "rawtest-1")
    # then: it was refused with "template: line 8: 'State' is undefined", and the restart's values were
    # the defaults (greeting=hello), not the ones it ran with
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == ("Restarted rawtest-1 as workflow rawtest-2 in pool nvl72 "
                                             "(priority NORMAL): PENDING")
    assert osmo("workflow", "spec", "rawtest-2", "--values").stdout == "greeting=hi\n"
    assert osmo("workflow", "spec", "rawtest-2").stdout == osmo("workflow", "spec", "rawtest-1").stdout


@db
def test_format_type_output_json_and_wide(osmo, nvl72):
    # given
    osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72")
    # when
    as_t = json.loads(osmo("workflow", "list", "-t", "json").stdout)
    as_o = json.loads(osmo("workflow", "list", "-o", "json").stdout)
    as_alias = json.loads(osmo("workflow", "list", "--json").stdout)
    wide = osmo("workflow", "list", "-o", "wide").stdout.splitlines()[0].split()
    query = json.loads(osmo("workflow", "query", "multiple-nvl72-same-zone-1", "--format-type", "json").stdout)
    pools = json.loads(osmo("pool", "list", "-o", "json").stdout)
    # then
    assert as_t == as_o == as_alias
    assert [w["id"] for w in as_t["results"]] == ["multiple-nvl72-same-zone-1"]
    assert wide == ["ID", "STATUS", "POOL", "PRIORITY", "USER", "TASKS", "SUBMITTED", "STARTED", "FINISHED",
                    "LABELS", "TAGS", "FAILURE"]
    assert query["groups"][0]["waiting"]["position"] == 1
    assert [p["name"] for p in pools["results"]] == ["nvl72"]


@db
def test_query_says_why_a_gang_waits(osmo, nvl72):
    # given: a gang queued behind nothing, with no placement cycle run yet
    osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72")
    # when
    out = osmo("workflow", "query", "multiple-nvl72-same-zone-1").stdout
    # then
    assert "  Waiting:\n    Queue: first in the pool's queue; nothing is ahead of it.\n" in out


@db
def test_list_watch_prints_a_row_when_a_status_changes(osmo, nvl72):
    # given
    osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72")

    def finish() -> None:
        from workflows.models import Workflow

        time.sleep(1.5)  # the CLI's first listing comes before (its start takes well under that, even loaded)
        Workflow.objects.update(status="RUNNING")

    driver = Driver(finish).start()
    # when
    result = osmo("workflow", "list", "--watch", "--interval", "0.1", "--timeout", "5")
    driver.join()
    # then
    assert result.exit_code == 0, result.output
    rows = [line.split()[:2] for line in result.stdout.splitlines()]
    assert rows == [["ID", "STATUS"], ["multiple-nvl72-same-zone-1", "PENDING"],
                    ["multiple-nvl72-same-zone-1", "RUNNING"]]


@db
def test_logs_and_events_against_the_api_on_a_simulated_pool(osmo, user):
    # given a one-task workflow on a simulated pool, dispatched 20 s ago (so finished), and one not yet placed
    from datetime import timedelta

    from django.utils import timezone

    from tests.factories import make_node, make_pool
    from tests.pipeline.helpers import gang_spec
    from workflows.models import Task
    from workflows.scheduling.cycle import placement_cycle_run
    from workflows.services import workflow_submit

    pool = make_pool("sim", keys=[("rack", "rack")], sim_task_seconds=10)
    make_node(pool, "n1", {"rack": "r1"}, gpu=4)
    workflow, _ = workflow_submit(user=user, pool_name="sim", spec=gang_spec("hello", 1, 4, key=None))
    placement_cycle_run(pool_id=pool.pk)
    Task.objects.filter(workflow=workflow).update(dispatched_at=timezone.now() - timedelta(seconds=20))
    waiting, _ = workflow_submit(user=user, pool_name="sim", spec=gang_spec("later", 1, 4, key=None))
    # when
    logs = osmo("workflow", "logs", workflow.workflow_id, "--tail", "3")
    events = osmo("workflow", "events", workflow.workflow_id)
    not_yet = osmo("workflow", "logs", waiting.workflow_id)
    # then
    assert logs.exit_code == 0, logs.output
    lines = logs.stdout.splitlines()
    assert len(lines) == 3 and lines[-1].endswith("[osmo-sim] task t0 finished: exit code 0")
    assert "truncated: only the last lines are shown" in logs.stderr
    rows = [line.split()[2:4] for line in events.stdout.splitlines()[1:]]
    assert ["backend", "t0"] in rows and ["service", "-"] in rows
    assert not_yet.exit_code == 1
    assert "has no pod yet" in not_yet.stderr


@db
def test_logs_of_a_workflow_of_several_tasks_show_every_task_prefixed(osmo, user):
    """Replays ``osmo workflow logs ID`` on a workflow of two tasks, which exited 2 with "name one
    with task=<name>": every task's log comes, each line prefixed with its task; ``--task`` narrows."""
    # given a two-task workflow on a simulated pool, dispatched 20 s ago (so finished)
    from datetime import timedelta

    from django.utils import timezone

    from tests.factories import make_node, make_pool
    from tests.pipeline.helpers import gang_spec
    from workflows.models import Task
    from workflows.scheduling.cycle import placement_cycle_run
    from workflows.services import workflow_submit

    pool = make_pool("sim", keys=[("rack", "rack")], sim_task_seconds=10)
    make_node(pool, "n1", {"rack": "r1"}, gpu=8)
    workflow, _ = workflow_submit(user=user, pool_name="sim", spec=gang_spec("pair", 2, 4, key=None))
    placement_cycle_run(pool_id=pool.pk)
    Task.objects.filter(workflow=workflow).update(dispatched_at=timezone.now() - timedelta(seconds=20))
    # when
    both = osmo("workflow", "logs", workflow.workflow_id, "--tail", "2")
    one = osmo("workflow", "logs", workflow.workflow_id, "--task", "t1", "--tail", "2")
    # then
    assert both.exit_code == 0, both.output
    lines = both.stdout.splitlines()
    assert [line.split(" ", 1)[0] for line in lines] == ["[t0]", "[t0]", "[t1]", "[t1]"]
    assert lines[1].endswith("[osmo-sim] task t0 finished: exit code 0")
    assert lines[3].endswith("[osmo-sim] task t1 finished: exit code 0")
    assert "truncated: only the last lines of each task are shown" in both.stderr
    assert one.exit_code == 0, one.output
    assert one.stdout.splitlines()[-1].endswith("[osmo-sim] task t1 finished: exit code 0")
    assert len(one.stdout.splitlines()) == 2 and not one.stdout.startswith("[t1]")


def test_logs_of_every_task_say_which_have_none_and_what_was_left_out(tmp_path):
    # given an answer for every task: t2 without a log, two tasks beyond the cap
    answer = {"workflow": "w-1", "task": None, "pod": None, "lines": ["[t1] a", "[t10] b"], "truncated": False,
              "tasks": [{"task": "t1", "pod": "p1", "truncated": False, "error": None},
                        {"task": "t2", "pod": "", "truncated": False,
                         "error": "Task t2 of workflow w-1 has no pod yet (it is SCHEDULING)."},
                        {"task": "t10", "pod": "p10", "truncated": False, "error": None}],
              "tasks_omitted": 2}
    runner = CliRunner()
    with FakeServer({"/api/workflows/w-1/logs/": (200, answer)}) as fake:
        env = {"OSMO_URL": fake.url, "OSMO_TOKEN": "tok", "OSMO_CONFIG": str(tmp_path / "c.json")}
        # when
        shown = runner.invoke(app, ["workflow", "logs", "w-1"], env=env)
        # then
        assert shown.exit_code == 0, shown.output
        assert shown.stdout == "[t1] a\n[t10] b\n"
        assert shown.stderr.splitlines() == [
            "(task t2: Task t2 of workflow w-1 has no pod yet (it is SCHEDULING).)",
            "(2 more tasks are not shown: the answer is capped; name one with --task)",
        ]
        assert fake.requests[0]["query"] == ""


def test_logs_and_events_against_the_endpoints_contract(tmp_path):
    # given
    logs = {"workflow": "w-1", "task": "t1", "pod": "osmo-w-1-t1", "lines": ["hello", "world"], "truncated": True}
    events = {"workflow": "w-1", "events": [
        {"time": "2026-01-02T03:04:05Z", "source": "service", "task": None, "kind": "status",
         "message": "submitted"},
        {"time": "2026-01-02T03:04:06Z", "source": "backend", "task": "t1", "kind": "Scheduled",
         "message": "pod bound to node n1"},
    ]}
    routes = {"/api/workflows/w-1/logs/": (200, logs), "/api/workflows/w-1/events/": (200, events),
              "/api/workflows/w-2/logs/": (409, {"code": "not_dispatched", "message": "task t1 has no pod yet",
                                                 "details": {}})}
    runner = CliRunner()
    with FakeServer(routes) as fake:
        env = {"OSMO_URL": fake.url, "OSMO_TOKEN": "tok", "OSMO_CONFIG": str(tmp_path / "c.json")}
        # when
        shown = runner.invoke(app, ["workflow", "logs", "w-1", "--task", "t1", "--tail", "2"], env=env)
        listed = runner.invoke(app, ["workflow", "events", "w-1", "-o", "json"], env=env)
        table = runner.invoke(app, ["workflow", "events", "w-1"], env=env)
        conflict = runner.invoke(app, ["workflow", "logs", "w-2"], env=env)
        # then
        assert shown.exit_code == 0, shown.output
        assert shown.stdout == "hello\nworld\n"
        assert "(log of task t1, pod osmo-w-1-t1, truncated: only the last lines are shown)" in shown.stderr
        assert fake.requests[0] == {"path": "/api/workflows/w-1/logs/", "query": "task=t1&tail=2",
                                    "authorization": "Token tok"}
        assert json.loads(listed.stdout) == events
        lines = table.stdout.splitlines()
        assert lines[0].split() == ["TIME", "SOURCE", "TASK", "KIND", "MESSAGE"]
        assert lines[1].split()[2:] == ["service", "-", "status", "submitted"]
        assert lines[2].split()[2:] == ["backend", "t1", "Scheduled", "pod", "bound", "to", "node", "n1"]
        assert (conflict.exit_code, conflict.stderr.strip()) == (1, "error: task t1 has no pod yet")


def test_template_values_spread_repeats_the_option_for_each_further_assignment():
    # given
    from cli.spread import template_values_spread

    cases = [
        (["f.yaml", "--set", "a=1", "b=2"], ["f.yaml", "--set", "a=1", "--set", "b=2"]),
        (["--set=a=1", "b=2", "f.yaml"], ["--set=a=1", "--set", "b=2", "f.yaml"]),
        (["--set-env", "A=1", "B=2", "--pool", "p", "c=3"], ["--set-env", "A=1", "--set-env", "B=2", "--pool", "p",
                                                            "c=3"]),
        (["--set-string", "a=x", "--set", "b=1", "c=2"], ["--set-string", "a=x", "--set", "b=1", "--set", "c=2"]),
        (["--set", "a=1", "--", "b=2"], ["--set", "a=1", "--", "b=2"]),
        (["--set", "a=1", "-x=2"], ["--set", "a=1", "-x=2"]),
    ]
    # when
    spread = [template_values_spread(args) for args, _ in cases]
    # then
    assert spread == [expected for _, expected in cases]


def test_logs_take_osmos_short_options_t_for_the_task_and_n_for_the_last_lines(tmp_path):
    # given: OSMO's `osmo workflow logs ID -t TASK -n N`; -t json/text stays the output format
    logs = {"workflow": "w-1", "task": "t1", "pod": "osmo-w-1-t1", "lines": ["hello", "world"], "truncated": True}
    runner = CliRunner()
    with FakeServer({"/api/workflows/w-1/logs/": (200, logs)}) as fake:
        env = {"OSMO_URL": fake.url, "OSMO_TOKEN": "tok", "OSMO_CONFIG": str(tmp_path / "c.json")}
        # when
        osmo_style = runner.invoke(app, ["workflow", "logs", "w-1", "-t", "t1", "-n", "2"], env=env)
        as_json = runner.invoke(app, ["workflow", "logs", "w-1", "--task", "t1", "-t", "json"], env=env)
        both = runner.invoke(app, ["workflow", "logs", "w-1", "--task", "t1", "-t", "t2"], env=env)
        # then
        assert osmo_style.exit_code == 0, osmo_style.output
        assert osmo_style.stdout == "hello\nworld\n"
        assert json.loads(as_json.stdout) == logs
        assert [request["query"] for request in fake.requests] == ["task=t1&tail=2", "task=t1"]
        assert (both.exit_code, both.stderr.strip()) == (
            2, "error: two tasks given: --task t1 and -t t2 (-t is OSMO's --task, or the output format text|json)")


@db
def test_list_takes_osmos_count_and_cancel_takes_several_ids(osmo, nvl72):
    # given: two queued workflows (no worker runs here)
    for _ in range(2):
        assert osmo("workflow", "submit", TEMPLATE, "--pool", "nvl72", "--set", "shards=1").exit_code == 0
    # when
    counted = osmo("workflow", "list", "--count", "1")
    short = osmo("workflow", "list", "-c", "1", "-f", "1")
    cancelled = osmo("workflow", "cancel", "sharded-training-1", "nope-1", "sharded-training-2")
    # then
    assert counted.exit_code == 0, counted.output
    assert [line.split()[0] for line in counted.stdout.splitlines()[1:]] == ["sharded-training-2", "(1-1"]
    assert [line.split()[0] for line in short.stdout.splitlines()[1:]] == ["sharded-training-1"]
    assert cancelled.exit_code == 1
    assert cancelled.stdout.splitlines() == ["Cancelled workflow sharded-training-1: FAILED_CANCELED",
                                             "Cancelled workflow sharded-training-2: FAILED_CANCELED"]
    assert cancelled.stderr.strip() == "error: workflow nope-1 not found"


def test_events_take_osmos_t_for_the_task(tmp_path):
    # given: OSMO's `osmo workflow events ID -t TASK`
    events = {"workflow": "w-1", "backend_error": None, "events": [
        {"time": "2026-01-02T03:04:05Z", "source": "service", "task": None, "kind": "status", "message": "submitted"},
        {"time": "2026-01-02T03:04:06Z", "source": "backend", "task": "t1", "kind": "Scheduled", "message": "on n1"},
        {"time": "2026-01-02T03:04:07Z", "source": "backend", "task": "t2", "kind": "Scheduled", "message": "on n2"},
    ]}
    runner = CliRunner()
    with FakeServer({"/api/workflows/w-1/events/": (200, events)}) as fake:
        env = {"OSMO_URL": fake.url, "OSMO_TOKEN": "tok", "OSMO_CONFIG": str(tmp_path / "c.json")}
        # when
        one = runner.invoke(app, ["workflow", "events", "w-1", "-t", "t2"], env=env)
        as_json = runner.invoke(app, ["workflow", "events", "w-1", "--task", "t1", "-t", "json"], env=env)
        none = runner.invoke(app, ["workflow", "events", "w-1", "--task", "t9"], env=env)
        # then
        assert one.exit_code == 0, one.output
        header, *rows = one.stdout.splitlines()
        assert header.split() == ["TIME", "SOURCE", "TASK", "KIND", "MESSAGE"]
        assert [row.split()[2:] for row in rows] == [["backend", "t2", "Scheduled", "on", "n2"]]
        assert json.loads(as_json.stdout) == {**events, "events": [events["events"][1]]}
        assert none.stdout == "No events for task t9 of workflow w-1 yet.\n"


def test_list_takes_several_statuses_after_one_status_option_as_osmos_cli_does(tmp_path):
    # given: OSMO's `osmo workflow list --status RUNNING PENDING`
    page = {"count": 0, "next": None, "previous": None, "results": []}
    runner = CliRunner()
    with FakeServer({"/api/workflows/": (200, page)}) as fake:
        env = {"OSMO_URL": fake.url, "OSMO_TOKEN": "tok", "OSMO_CONFIG": str(tmp_path / "c.json")}
        # when
        several = runner.invoke(app, ["workflow", "list", "--status", "RUNNING", "pending", "-c", "5"], env=env)
        short = runner.invoke(app, ["workflow", "list", "-s", "completed", "failed", "--status=failed_canceled",
                                    "running"], env=env)
        bad = runner.invoke(app, ["workflow", "list", "--status", "running", "soon"], env=env)
        # then
        assert several.exit_code == 0, several.output
        assert short.exit_code == 0, short.output
        assert [request["query"] for request in fake.requests] == [
            "limit=5&offset=0&status=RUNNING&status=PENDING",
            "limit=20&offset=0&status=COMPLETED&status=FAILED&status=FAILED_CANCELED&status=RUNNING"]
        assert bad.exit_code == 2
        assert "'soon' is not one of" in bad.output


@pytest.mark.parametrize("flag", [pytest.param(["-t", "json"], id="_case_t"),
                                  pytest.param(["-o", "json"], id="_case_o"),
                                  pytest.param(["--json"], id="_case_json")])
def test_every_read_takes_t_json_o_json_and_json(tmp_path, flag):
    # given: docs/cli.md, "Every read takes -t/--format-type json, -o json or --json"
    workflow = {"id": "w-1", "name": "w", "status": "COMPLETED", "groups": []}
    routes = {"/api/workflows/w-1/spec/": (200, {"workflow": "w-1", "spec": "x", "template_values": {}}),
              "/api/workflows/w-1/logs/": (200, {"workflow": "w-1", "task": "t", "lines": [], "truncated": False}),
              "/api/workflows/w-1/": (200, workflow),
              "/api/credentials/": (200, {"count": 0, "next": None, "previous": None, "results": []}),
              "/api/me/": (200, {"username": "alice", "is_staff": False})}
    runner = CliRunner()
    with FakeServer(routes) as fake:
        env = {"OSMO_URL": fake.url, "OSMO_TOKEN": "tok", "OSMO_CONFIG": str(tmp_path / "c.json")}
        # when
        answers = {" ".join(command): runner.invoke(app, [*command, *flag], env=env) for command in (
            ["workflow", "spec", "w-1"], ["workflow", "logs", "w-1"], ["workflow", "wait", "w-1"],
            ["credential", "list"], ["profile", "list"])}
        # then
        assert {name: (result.exit_code, result.stdout[:1]) for name, result in answers.items()} == {
            name: (0, "[" if name == "credential list" else "{") for name in answers}
