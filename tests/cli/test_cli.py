"""The ``osmo`` CLI against a live test server (real HTTP, real token auth, the real API)."""

from __future__ import annotations

import json
import socket
import stat
import time

import pytest

from tests.cli.conftest import Driver
from tests.factories import EXAMPLES, example_spec

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = "multiple-nvl72-same-zone"
SPEC_FILE = str(EXAMPLES / f"{SPEC}.yaml")


def no_traceback(result) -> None:
    text = getattr(result, "output", "") or f"{result.stdout}{result.stderr}"
    assert "Traceback" not in text, text


# ------------------------------------------------------------------------------------------------
# login / logout / auth errors
# ------------------------------------------------------------------------------------------------
def test_login_writes_config_and_logout_forgets_it(osmo, live_server, token, nvl72, config_file):
    bare = {"OSMO_URL": None, "OSMO_TOKEN": None}
    result = osmo("login", f"{live_server.url}/", "--token", token, env=bare)
    assert result.exit_code == 0, result.output
    assert f"Logged in to {live_server.url} as alice: token accepted; pools visible: nvl72." in result.stdout
    assert json.loads(config_file.read_text()) == {"url": live_server.url, "token": token}
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600

    listed = osmo("pool", "list", env=bare)  # from the config file alone
    assert listed.exit_code == 0, listed.output
    assert "nvl72" in listed.stdout

    result = osmo("logout", env=bare)
    assert result.exit_code == 0
    assert not config_file.exists()
    after = osmo("pool", "list", env=bare)
    assert after.exit_code == 1
    assert "error: not logged in" in after.stderr
    assert "osmo login URL --token TOKEN" in after.stderr
    no_traceback(after)


def test_login_with_a_rejected_token_saves_nothing(osmo, live_server, config_file):
    result = osmo("login", live_server.url, "--token", "not-a-token", env={"OSMO_URL": None, "OSMO_TOKEN": None})
    assert result.exit_code == 1
    assert f"error: {live_server.url} rejected this token" in result.stderr
    assert not config_file.exists()


def test_login_reads_a_piped_token_without_a_prompt_or_a_python_warning(osmo_process, live_server, token, nvl72,
                                                                        config_file):
    # given: the token on standard input, as scripts pipe it (echo $TOKEN | osmo login URL)
    bare = {"OSMO_URL": "", "OSMO_TOKEN": ""}
    # when
    piped = osmo_process("login", live_server.url, input=f"{token}\n", env=bare)
    empty = osmo_process("login", live_server.url, input="", env=bare)
    # then: no "Token:" prompt and no getpass warning quoting its source; nothing read is an error
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert piped.stdout.splitlines()[0] == (f"Logged in to {live_server.url} as alice: token accepted; "
                                            "pools visible: nvl72.")
    assert json.loads(config_file.read_text()) == {"url": live_server.url, "token": token}
    assert (empty.returncode, empty.stdout, empty.stderr) == (
        2, "", "error: no token on standard input: pass --token TOKEN, or pipe it (echo $TOKEN | osmo login URL)\n")


def test_bad_token_exits_non_zero_with_the_login_hint(osmo):
    result = osmo("workflow", "list", env={"OSMO_TOKEN": "wrong"})
    assert result.exit_code == 1
    assert "not logged in / token rejected by" in result.stderr
    assert "run: osmo login" in result.stderr
    assert result.stdout == ""
    no_traceback(result)


# ------------------------------------------------------------------------------------------------
# pools
# ------------------------------------------------------------------------------------------------
def test_pool_list_show_and_nodes(osmo, nvl72):
    listed = osmo("pool", "list")
    assert listed.exit_code == 0, listed.output
    header, row = listed.stdout.splitlines()[:2]
    assert header.split()[:7] == ["NAME", "STATUS", "KEYS", "NODES", "GPUS", "USED", "FREE"]
    assert row.split()[:11] == ["nvl72", "ONLINE", "zone", ">", "spine", ">", "rack", ">", "gpu-clique", "16", "64"]

    as_json = json.loads(osmo("pool", "list", "--json").stdout)
    assert [p["name"] for p in as_json["results"]] == ["nvl72"]

    shown = osmo("pool", "show", "nvl72")
    assert shown.exit_code == 0, shown.output
    out = shown.stdout
    keys = [line.split()[1] for line in out.split("Topology keys")[1].split("Capacity:")[0].splitlines()[2:] if line]
    assert keys == ["zone", "spine", "rack", "gpu-clique"]
    assert "gpu          64        0         0         64" in out
    assert "Domains of zone (2):" in out and "Domains of gpu-clique (4):" in out
    assert "z1/s1/r2/z1-s1-r2" in out
    detail = json.loads(osmo("pool", "show", "nvl72", "--json").stdout)
    assert [k["key"] for k in detail["topology_keys"]] == ["zone", "spine", "rack", "gpu-clique"]

    nodes = osmo("pool", "nodes", "nvl72")
    assert nodes.exit_code == 0, nodes.output
    assert len(nodes.stdout.splitlines()) == 1 + 16
    assert "z2-s1-r2-n04  zone=z2 spine=s1 rack=r2 gpu-clique=z2-s1-r2" in nodes.stdout
    assert len(json.loads(osmo("pool", "nodes", "nvl72", "--json").stdout)) == 16

    missing = osmo("pool", "show", "nope")
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "error: pool nope not found"


def test_submit_with_a_team_and_pool_show_lists_quota_use(osmo, nvl72, user):
    from django.contrib.auth.models import Group

    from scheduler.services.access import team_quota_set

    # given alice in two teams with a quota each in the pool
    for name, gpu in (("llm", 16), ("vision", 8)):
        team = Group.objects.create(name=name)
        user.groups.add(team)
        team_quota_set(pool=nvl72, team=team, gpu=gpu)
    # when she submits without a team, then with one, and shows the pool
    unnamed = osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72")
    named = osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72", "--team", "vision", "--json")
    shown = osmo("pool", "show", "nvl72")
    # then the first is refused naming the field, the second counts against vision
    assert unnamed.exit_code == 2
    assert "team" in unnamed.stderr and "(llm, vision)" in unnamed.stderr
    assert named.exit_code == 0, named.output
    assert json.loads(named.stdout)["team"] == "vision"
    teams = shown.stdout.split("Teams (GPUs):")[1].splitlines()
    assert teams[1].split() == ["TEAM", "QUOTA", "HIGH+NORMAL", "LOW", "(PREEMPTIBLE)"]
    assert teams[2].split() == ["llm", "16", "0", "0"]
    assert teams[3].split() == ["vision", "8", "0", "0"]


# ------------------------------------------------------------------------------------------------
# submit
# ------------------------------------------------------------------------------------------------
def test_dry_run_prints_the_tree_and_the_placement_and_stores_nothing(osmo, nvl72):
    from workflows.models import Workflow

    result = osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72", "--dry-run")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"Dry run: workflow {SPEC} is valid for pool nvl72; nothing was submitted." in out
    assert "Group group1" in out
    assert "    group1\n    └─ zone=workflow-group (required)\n" in out
    assert "       ├─ gpu-clique=model-1-group (required): model1-shard1, model1-shard2, model1-shard3, " \
           "model1-shard4\n" in out
    assert "       └─ gpu-clique=model-2-group (required): model2-shard1" in out
    assert "  Placement preview: placed" in out
    placed = [line.split() for line in out.splitlines() if line.strip().startswith(("model1-", "model2-"))]
    assert len(placed) == 8
    zones = {node.split("-")[0] for _task, node in placed}
    assert len(zones) == 1  # the whole gang in one zone
    assert "CONSTRAINT" in out and "workflow-group/model-1-group" in out
    assert Workflow.objects.count() == 0

    answer = json.loads(osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72", "--dry-run", "--json").stdout)
    assert answer["valid"] is True
    assert answer["groups"][0]["placement"]["status"] == "placed"


def test_dry_run_says_why_a_gang_cannot_be_placed(osmo, nvl72):
    """A gang that can never fit the pool is refused (never_fits): the dry run exits non-zero and
    says which constraint cannot be met."""
    spec = example_spec(SPEC).replace("gpu: 4", "gpu: 3").replace("    - key: zone\n", "    - key: rack\n")
    spec = spec.replace("model1-shard4", "model1-shard4").replace("group: workflow-group", "group: one-rack")
    result = osmo("workflow", "submit", "-", "--pool", "nvl72", "--dry-run", input=spec)
    assert result.exit_code != 0, result.output
    assert "can never be placed in pool nvl72" in result.output
    assert "rack" in result.output.split("can never be placed")[1]


def test_submit_creates_a_workflow_then_list_query_cancel(osmo, nvl72, user):
    from workflows.models import Workflow

    result = osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72", "--priority", "high")
    assert result.exit_code == 0, result.output
    assert f"Submitted workflow {SPEC}-1 to pool nvl72 (priority HIGH): PENDING" in result.stdout
    workflow = Workflow.objects.get()
    assert (workflow.workflow_id, workflow.priority, workflow.submitted_by_id) == (f"{SPEC}-1", "HIGH", user.pk)
    assert workflow.idempotency_key  # sent by the CLI

    stdin = osmo("workflow", "submit", "-", "--pool", "nvl72", "--json", input=example_spec(SPEC))
    assert stdin.exit_code == 0, stdin.output
    assert json.loads(stdin.stdout)["id"] == f"{SPEC}-2"

    listed = osmo("workflow", "list")
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["ID", "STATUS", "POOL", "PRIORITY", "USER", "TASKS", "SUBMITTED"]
    assert [line.split()[:6] for line in lines[1:]] == [
        [f"{SPEC}-2", "PENDING", "nvl72", "NORMAL", "alice", "8"],
        [f"{SPEC}-1", "PENDING", "nvl72", "HIGH", "alice", "8"],
    ]
    limited = osmo("workflow", "list", "--limit", "1")
    assert "(1-1 of 2; see more with --offset 1)" in limited.stdout
    assert osmo("workflow", "list", "--status", "completed").stdout.strip() == "No workflows match."
    assert osmo("workflow", "list", "--pool", "nvl72", "--name", "nothing-like-it").stdout.strip() == (
        "No workflows match.")
    unknown_pool = osmo("workflow", "list", "--pool", "other")  # a pool that does not exist is said to be so
    assert unknown_pool.exit_code == 1, unknown_pool.output
    assert "pool other not found (osmo pool list shows them)" in unknown_pool.output
    assert json.loads(osmo("workflow", "list", "--name", "same-zone", "--json").stdout)["count"] == 2

    query = osmo("workflow", "query", f"{SPEC}-1")
    assert query.exit_code == 0, query.output
    out = query.stdout
    assert out.startswith(f"Workflow {SPEC}-1  PENDING\n  pool nvl72 · priority HIGH · submitted by alice\n")
    assert "Group group1  SCHEDULING" in out
    assert "└─ zone=workflow-group (required)" in out
    assert "model1-shard1 (lead)  SCHEDULING" in out
    detail = json.loads(osmo("workflow", "query", f"{SPEC}-1", "--json").stdout)
    assert len(detail["groups"][0]["tasks"]) == 8

    cancelled = osmo("workflow", "cancel", f"{SPEC}-1")
    assert cancelled.exit_code == 0, cancelled.output
    assert cancelled.stdout.strip() == f"Cancelled workflow {SPEC}-1: FAILED_CANCELED"
    again = osmo("workflow", "cancel", f"{SPEC}-1")
    assert again.exit_code == 1
    assert "can no longer be cancelled" in again.stderr

    missing = osmo("workflow", "query", "nope-1")
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "error: workflow nope-1 not found"
    assert osmo("workflow", "cancel", "nope-1").stderr.strip() == "error: workflow nope-1 not found"


def test_invalid_spec_prints_each_path_and_message_and_exits_2(osmo, nvl72, tmp_path):
    from workflows.models import Workflow

    bad = example_spec(SPEC).replace("key: zone", "key: datacenter").replace("memory: 64Gi", "memory: lots")
    path = tmp_path / "bad.yaml"
    path.write_text(bad)
    result = osmo("workflow", "submit", str(path), "--pool", "nvl72")
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: Workflow spec is invalid (")
    details = [line.strip() for line in lines[1:]]
    lineno = bad.splitlines().index("    - key: datacenter", 0) + 1
    assert any(d.startswith(f"resources.model-1.topology[1].key ({path} line {lineno}): ") and "datacenter" in d
               for d in details), details
    assert any(d.startswith("resources.model-1.memory (") for d in details), details
    assert all(": " in d for d in details)
    assert result.stdout == ""
    no_traceback(result)
    assert Workflow.objects.count() == 0

    dry = osmo("workflow", "submit", str(path), "--pool", "nvl72", "--dry-run")
    assert dry.exit_code == 2 and dry.stderr == result.stderr

    no_pool = osmo("workflow", "submit", SPEC_FILE, "--pool", "nowhere")
    assert no_pool.exit_code == 2
    assert "  pool: Pool 'nowhere' does not exist. Available pools: nvl72." in no_pool.stderr

    unreadable = osmo("workflow", "submit", str(tmp_path / "missing.yaml"), "--pool", "nvl72")
    assert unreadable.exit_code == 2
    assert "cannot read" in unreadable.stderr

    usage = osmo("workflow", "submit", SPEC_FILE)  # --pool missing: a usage error
    assert usage.exit_code == 2


# ------------------------------------------------------------------------------------------------
# --wait, with the statuses driven from the test (no Celery worker here)
# ------------------------------------------------------------------------------------------------
def drive_workflow(final: str, *, step: float = 0.4) -> Driver:
    def run() -> None:
        from django.db import transaction

        from scheduler.models import Node
        from workflows.lifecycle import transitions as services
        from workflows.models import TaskGroup, Workflow

        deadline = time.monotonic() + 20
        while (workflow := Workflow.objects.filter(name=SPEC).first()) is None:
            assert time.monotonic() < deadline, "the CLI never submitted"
            time.sleep(0.05)
        group = workflow.groups.get()
        time.sleep(step)
        TaskGroup.objects.filter(pk=group.pk).update(
            unschedulable_reason={"status": "unschedulable", "message": "largest free zone fits 6 of 8 tasks"})
        time.sleep(step)

        def move(status: str, message: str = "") -> None:
            group.refresh_from_db()
            for task in group.tasks.order_by("position"):
                services.task_status_set(task, status, message=message)
            services.group_status_set(group, status, message=message)
            workflow.refresh_from_db()
            services.workflow_status_refresh(workflow)

        # like the placement cycle: nodes, the cleared reason and INITIALIZING in one transaction, so
        # a poll sees either nothing placed or all of it
        with transaction.atomic():
            tasks = list(group.tasks.order_by("position"))
            nodes = list(Node.objects.filter(pool=workflow.pool, name__startswith="z1-").order_by("name"))
            for task, node in zip(tasks, nodes, strict=False):
                task.node = node
                task.save(update_fields=["node"])
            TaskGroup.objects.filter(pk=group.pk).update(unschedulable_reason=None)
            move("INITIALIZING")
        time.sleep(step)
        move("RUNNING")
        time.sleep(step)
        move(final, "exit code 3" if final != "COMPLETED" else "")

    return Driver(run).start()


def test_wait_follows_the_workflow_to_completed_and_exits_0(osmo, nvl72):
    driver = drive_workflow("COMPLETED")
    result = osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72", "--wait", "--interval", "0.1",
                  "--timeout", "30")
    driver.join()
    assert result.exit_code == 0, result.output
    out = result.stdout
    events = [line.split("] ", 1)[1].strip() for line in out.splitlines() if line.startswith("[")]
    # Each object's changes come in order. Between objects the order is the polls': a poll reads the
    # workflow, then its groups, in statements that each see the latest commit, so a change committed
    # between the two is seen on the group first and on the workflow at the next poll.
    workflow_expected = [f"workflow {SPEC}-1: PENDING", f"workflow {SPEC}-1: RUNNING", f"workflow {SPEC}-1: COMPLETED"]
    group_expected = [
        "group group1: SCHEDULING",
        "group group1 waiting: unschedulable: largest free zone fits 6 of 8 tasks",
        "group group1: INITIALIZING",
        "group group1 placed:",
        "group group1: RUNNING",
        "group group1: COMPLETED",
    ]
    assert [e for e in events if e in workflow_expected] == workflow_expected, events
    assert [e for e in events if e in group_expected] == group_expected, events
    assert events.index(f"workflow {SPEC}-1: PENDING") < events.index("group group1: SCHEDULING"), events
    assert "model1-shard1 -> z1-s1-r1-n01  zone=z1 spine=s1 rack=r1 gpu-clique=z1-s1-r1" in out
    assert f"Workflow {SPEC}-1 COMPLETED" in out
    final = out.split(f"Workflow {SPEC}-1 COMPLETED")[1]
    assert "model2-shard4  z1-s1-r2-n04  zone=z1 spine=s1 rack=r2 gpu-clique=z1-s1-r2  COMPLETED" in final


def test_wait_exits_1_when_the_workflow_fails(osmo, nvl72):
    driver = drive_workflow("FAILED", step=0.25)
    result = osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72", "--wait", "--interval", "0.1", "--json")
    driver.join()
    assert result.exit_code == 1, result.output
    assert "group group1 failed: exit code 3" in result.stderr
    final = json.loads(result.stdout)  # --json: the final workflow on stdout, progress on stderr
    assert final["status"] == "FAILED"
    assert final["failure_message"] == "group1: exit code 3"

    again = osmo("workflow", "wait", final["id"], "--interval", "0.1")
    assert again.exit_code == 1
    assert f"Workflow {final['id']} FAILED\n  failure: group1: exit code 3" in again.stdout


def test_wait_gives_up_after_its_timeout(osmo, nvl72):
    result = osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72", "--wait", "--interval", "0.1",
                  "--timeout", "0.5")
    assert result.exit_code == 1
    assert "gave up waiting after 0.5s" in result.stderr
    assert f"osmo workflow wait {SPEC}-1" in result.stderr


# ------------------------------------------------------------------------------------------------
# The installed console script, as a user runs it
# ------------------------------------------------------------------------------------------------
def test_console_script_against_the_live_server(osmo_process, nvl72):
    pools = osmo_process("pool", "list", "--json")
    assert pools.returncode == 0, pools.stderr
    assert json.loads(pools.stdout)["results"][0]["name"] == "nvl72"

    dry = osmo_process("workflow", "submit", f"examples/{SPEC}.yaml", "--pool", "nvl72", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "└─ zone=workflow-group (required)" in dry.stdout
    assert "Placement preview: placed" in dry.stdout

    submitted = osmo_process("workflow", "submit", "-", "--pool", "nvl72", input=example_spec(SPEC))
    assert submitted.returncode == 0, submitted.stderr
    assert f"Submitted workflow {SPEC}-1" in submitted.stdout

    rejected = osmo_process("workflow", "query", f"{SPEC}-1", env={"OSMO_TOKEN": "wrong"})
    assert rejected.returncode == 1
    assert "token rejected" in rejected.stderr and "osmo login" in rejected.stderr
    assert "Traceback" not in rejected.stderr


def test_console_script_says_when_the_server_is_unreachable(osmo_process):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    result = osmo_process("workflow", "list", env={"OSMO_URL": url})
    assert result.returncode == 1
    assert result.stderr.splitlines()[0] == f"error: cannot connect to the osmo server at {url}: connection refused"
    assert "Traceback" not in result.stderr


def test_submit_past_the_active_workflow_limit_says_so_not_that_the_server_is_busy(osmo, nvl72, settings):
    # given a user at the limit of one workflow that has not ended
    settings.OSMO_MAX_ACTIVE_WORKFLOWS_PER_USER = 1
    assert osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72").exit_code == 0

    # when another is submitted
    result = osmo("workflow", "submit", SPEC_FILE, "--pool", "nvl72")

    # then the server's words are printed
    assert result.exit_code != 0
    assert "Your workflows that have not ended are at the limit of 1 per user; " in result.output
    assert "busy" not in result.output
