"""``osmo task list``, ``osmo resource list|info`` and ``osmo version`` (docs/cli.md): the installed console
script against a live server, each list showing only what the API lets its user see."""

from __future__ import annotations

import json
import re

import pytest
from django.utils import timezone

from tests.factories import make_api_key, make_node, make_pool

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = """
workflow:
  name: {name}
  resources:
    default: {{gpu: 2, cpu: 4, memory: 8Gi}}
  tasks:
  - name: train
    image: busybox
    command: ["true"]
  - name: eval
    image: busybox
    command: ["true"]
"""


def submit(owner, name: str, pool: str = "lists"):
    from workflows.services import workflow_submit

    workflow, _ = workflow_submit(user=owner, pool_name=pool, spec=SPEC.format(name=name))
    return workflow


def place(workflow, node, status: str = "RUNNING") -> None:
    """The facts a placed, running task has: its node, status, start and its reservation."""
    from scheduler.models import Reservation

    for task in workflow.tasks.order_by("position"):
        task.node, task.node_name, task.status, task.started_at = node, node.name, status, timezone.now()
        task.save(update_fields=["node", "node_name", "status", "started_at"])
        Reservation.objects.create(task_id=task.pk, node=node, node_name=node.name, pool=node.pool, gpu=task.gpu,
                                   cpu_millis=task.cpu_millis, memory_bytes=task.memory_bytes)


@pytest.fixture
def cluster(user, other_user):
    pool = make_pool("lists", keys=[])
    n1 = make_node(pool, "n1", {}, gpu=8)
    n2 = make_node(pool, "n2", {}, gpu=8, used_gpu=2)
    mine = submit(user, "mine")
    place(mine, n1)
    theirs = submit(other_user, "theirs")
    place(theirs, n1)
    queued = submit(user, "queued")
    return {"pool": pool, "n1": n1, "n2": n2, "mine": mine, "theirs": theirs, "queued": queued}


def test_task_list_shows_the_users_running_tasks_with_osmos_columns(osmo_process, cluster):
    # when
    listed = osmo_process("task", "list")
    running = osmo_process("task", "list", "--status", "RUNNING", "COMPLETED", "--verbose")
    as_json = json.loads(osmo_process("task", "list", "-t", "json").stdout)

    # then: OSMO's default statuses (scheduling, initializing, running), by start time; only alice's own
    # tasks (bob's are not even counted)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["USER", "WORKFLOW", "ID", "TASK", "STATUS", "POOL", "PRIORITY", "NODE", "START",
                                "TIME"]
    assert [line.split()[:7] for line in lines[1:]] == [
        ["alice", "mine-1", "train", "RUNNING", "lists", "NORMAL", "n1"],
        ["alice", "mine-1", "eval", "RUNNING", "lists", "NORMAL", "n1"],
        ["alice", "queued-1", "train", "SCHEDULING", "lists", "NORMAL", "-"],
        ["alice", "queued-1", "eval", "SCHEDULING", "lists", "NORMAL", "-"]]
    *rows, total = [line.split() for line in running.stdout.splitlines()[1:]]
    assert [row[1:4] for row in rows] == [["mine-1", "train", "RUNNING"], ["mine-1", "eval", "RUNNING"]]
    assert running.stdout.splitlines()[0].split()[-4:] == ["STORAGE", "CPU", "MEMORY", "GPU"]  # OSMO's order
    assert rows[0][-4:] == ["0", "4", "8Gi", "2"]
    assert total == ["TOTAL", *["-"] * 7, "0", "8", "16Gi", "4"]
    assert as_json["count"] == 4 and {row["user"] for row in as_json["results"]} == {"alice"}


def test_task_list_filters_by_pool_workflow_node_and_user(osmo_process, cluster, staff_user):
    # when
    by_workflow = osmo_process("task", "list", "-s", "SCHEDULING", "-w", "queue")
    by_node = osmo_process("task", "list", "--node", "n2")
    other_pool = osmo_process("task", "list", "--pool", "elsewhere")
    bob = osmo_process("task", "list", "--user", "bob")  # alice may not see bob's tasks: none
    high = osmo_process("task", "list", "--priority", "HIGH", "LOW")
    today = timezone.localdate().isoformat()
    started_today = osmo_process("task", "list", "--started-after", today, "-t", "json")
    long_ago = osmo_process("task", "list", "--started-before", "2000-01-01")
    staff_all = osmo_process("task", "list", "--all-users", "-t", "json", env={"OSMO_TOKEN": make_api_key(staff_user)})
    staff_bob = osmo_process("task", "list", "-u", "bob", "-t", "json", env={"OSMO_TOKEN": make_api_key(staff_user)})

    # then
    assert {line.split()[1] for line in by_workflow.stdout.splitlines()[1:]} == {"queued-1"}
    for empty in (by_node, other_pool, bob, high, long_ago):
        assert empty.stdout.strip() == "There are no tasks to view.", empty.stderr
    assert {(row["workflow_id"], row["status"]) for row in json.loads(started_today.stdout)["results"]} == {
        ("mine-1", "RUNNING")}  # tasks not started yet are in no day
    assert sorted({row["user"] for row in json.loads(staff_all.stdout)["results"]}) == ["alice", "bob"]
    assert {row["workflow_id"] for row in json.loads(staff_bob.stdout)["results"]} == {"theirs-1"}


def test_task_list_summary_and_aggregate_by_workflow_add_up_the_requests(osmo_process, cluster, staff_user):
    # when
    summary = osmo_process("task", "list", "--summary")
    by_workflow = osmo_process("task", "list", "-W")
    running_only = osmo_process("task", "list", "-S", "-s", "RUNNING", "-t", "json")
    staff = json.loads(osmo_process("task", "list", "--summary", "--all-users", "-t", "json",
                                    env={"OSMO_TOKEN": make_api_key(staff_user)}).stdout)
    staff_workflows = json.loads(osmo_process("task", "list", "-W", "-a", "-c", "1", "-f", "1", "-t", "json",
                                              env={"OSMO_TOKEN": make_api_key(staff_user)}).stdout)
    none = osmo_process("task", "list", "--summary", "--pool", "elsewhere")
    no_workflows = osmo_process("task", "list", "-W", "-s", "FAILED")
    both = osmo_process("task", "list", "--summary", "--verbose")

    # then: alice's running (mine-1) and scheduling (queued-1) tasks, 2 GPUs, 4 CPUs, 8Gi each
    assert summary.returncode == 0, summary.stderr
    assert [line.split() for line in summary.stdout.splitlines()] == [
        ["USER", "POOL", "PRIORITY", "STORAGE", "CPU", "MEMORY", "GPU"],
        ["alice", "lists", "NORMAL", "0", "16", "32Gi", "8"],
        ["TOTAL", "-", "-", "0", "16", "32Gi", "8"]]
    assert [line.split() for line in by_workflow.stdout.splitlines()] == [
        ["USER", "WORKFLOW", "ID", "POOL", "PRIORITY", "STORAGE", "CPU", "MEMORY", "GPU"],
        ["alice", "mine-1", "lists", "NORMAL", "0", "8", "16Gi", "4"],
        ["alice", "queued-1", "lists", "NORMAL", "0", "8", "16Gi", "4"],
        ["TOTAL", "-", "-", "-", "0", "16", "32Gi", "8"]]
    assert json.loads(running_only.stdout)["results"] == [
        {"user": "alice", "pool": "lists", "priority": "NORMAL", "tasks": 2, "gpu": 4, "cpu_millis": 8000,
         "memory_bytes": 16 * 2**30, "storage_bytes": 0}]
    assert [(row["user"], row["tasks"], row["gpu"]) for row in staff["results"]] == [("alice", 4, 8), ("bob", 2, 4)]
    assert staff_workflows["count"] == 3
    assert [(row["workflow_id"], row["user"]) for row in staff_workflows["results"]] == [("queued-1", "alice")]
    assert none.stdout.strip() == "There are no summaries to view."
    assert no_workflows.stdout.strip() == "There are no workflows to view."
    assert both.returncode == 2 and both.stderr == "error: give either --verbose or --summary, not both\n"


def test_task_list_refuses_a_bad_filter_naming_it(osmo_process, cluster):
    # when
    bad_status = osmo_process("task", "list", "--status", "DANCING")
    both = osmo_process("task", "list", "--user", "bob", "--all-users")
    bad_day = osmo_process("task", "list", "--started-after", "2026-13-01", "--priority", "URGENT")

    # then
    assert bad_status.returncode == 2
    assert bad_status.stderr.splitlines()[0] == "error: A filter of the task list is invalid."
    assert bad_status.stderr.splitlines()[1].startswith("  status: unknown status 'DANCING'; one of WAITING")
    assert both.returncode == 2 and both.stderr.strip() == "error: give either --user or --all-users, not both"
    assert bad_day.returncode == 2 and bad_day.stderr.splitlines()[1:] == [
        "  priority: unknown priority 'URGENT'; one of LOW, NORMAL, HIGH",
        "  started_after: must be a date YYYY-MM-DD, not '2026-13-01'"]
    assert "Traceback" not in bad_status.stderr + both.stderr + bad_day.stderr


def test_resource_list_shows_nodes_with_use_and_only_visible_holders(osmo_process, cluster):
    # when
    used = osmo_process("resource", "list", "--pool", "lists")
    free = osmo_process("resource", "list", "--all", "--mode", "free")
    as_json = json.loads(osmo_process("resource", "list", "-a", "-t", "json").stdout)

    # then: n1 holds 4 GPUs of alice's workflow and 4 of bob's, counted but not named to alice; OSMO's columns,
    # order and units (storage and memory in Gi, CPU in cores), and a type
    lines = used.stdout.splitlines()
    assert used.returncode == 0, used.stderr
    assert re.split(r"\s{2,}", lines[0]) == ["NODE", "POOL", "PLATFORM", "TYPE", "STORAGE [Gi]", "CPU [#]",
                                             "MEMORY [Gi]", "GPU [#]", "WORKFLOWS"]
    n1, n2, total = (line.split() for line in lines[1:])
    assert n1 == ["n1", "lists", "-", "GPU", "0/4096", "16/144", "32/960", "8/8", "mine-1,+1", "other"]
    assert n2 == ["n2", "lists", "-", "GPU", "0/4096", "0/144", "0/960", "2/8", "-"]
    assert total == ["TOTAL", "-", "-", "-", "0/8192", "16/288", "32/1920", "10/16", "-"]
    assert [line.split()[4:8] for line in free.stdout.splitlines()[1:]] == [
        ["4096", "128", "928", "0"], ["4096", "144", "960", "6"], ["8192", "272", "1888", "6"]]
    first = as_json[0]
    assert first["workflows"] == [{"workflow_id": "mine-1", "user": "alice", "tasks": 2, "gpu": 4}]
    assert first["other_workflows"] == 1 and "theirs-1" not in json.dumps(as_json)
    assert first["capacity"]["gpu"] == 8 and first["reserved"]["gpu"] == 8 and first["free"]["gpu"] == 0
    assert first["resource_type"] == "GPU"


def test_resource_list_and_info_by_platform(osmo_process, cluster):
    from scheduler.models import PoolPlatform

    cluster["n1"].labels = {"size": "big"}
    cluster["n1"].save(update_fields=["labels"])
    make_node(cluster["pool"], "c1", {}, gpu=0)
    PoolPlatform.objects.create(pool=cluster["pool"], name="any", node_selector={})
    PoolPlatform.objects.create(pool=cluster["pool"], name="big", node_selector={"size": "big"},
                                allow_host_network=True, host_mounts=["/data", "/scratch"])

    # when
    listed = osmo_process("resource", "list", "-p", "lists")
    big = osmo_process("resource", "list", "-p", "lists", "--platform", "big")
    info = osmo_process("resource", "info", "n1", "-p", "lists", "-pl", "big")
    info_all = osmo_process("resource", "info", "n1")
    not_big = osmo_process("resource", "info", "n2", "--platform", "big")
    no_such = osmo_process("resource", "info", "n1", "--platform", "nope")

    # then: a row per node and platform, the node's name, type and amounts on its first
    rows = [line.split()[:5] for line in listed.stdout.splitlines()[1:]]
    assert rows == [["c1", "lists", "any", "CPU", "0/4096"], ["n1", "lists", "any", "GPU", "0/4096"],
                    ["-", "lists", "big", "-", "-"], ["n2", "lists", "any", "GPU", "0/4096"],
                    ["TOTAL", "-", "-", "-", "0/12288"]]
    assert [line.split()[:3] for line in big.stdout.splitlines()[1:-1]] == [["n1", "lists", "any"],
                                                                            ["-", "lists", "big"]]
    assert info.returncode == 0, info.stderr
    assert "Pool: lists   Platforms: any, big   Type: GPU   Schedulable: yes" in info.stdout
    assert info.stdout.count("Task configurations of platform") == 1
    assert ("Task configurations of platform big:\n  Host Network Allowed: yes\n  Privileged Mode Allowed: no\n"
            "  Allowed Mounts: /data, /scratch\n") in info.stdout
    assert info_all.stdout.count("Task configurations of platform") == 2
    assert not_big.returncode == 1
    assert not_big.stderr == "error: Node 'n2' is not in any pool you can see as a node of platform 'big'.\n"
    assert no_such.returncode == 2 and "platform" in no_such.stderr


def test_resource_list_of_a_pool_granted_to_others_or_unknown_is_refused_naming_it(osmo_process, cluster,
                                                                                  other_user):
    from scheduler.models import PoolGrant

    private = make_pool("private", keys=[])
    make_node(private, "p1", {})
    PoolGrant.objects.create(pool=private, user=other_user)

    # when
    forbidden = osmo_process("resource", "list", "--pool", "private")
    unknown = osmo_process("resource", "list", "-p", "nowhere")
    listed = json.loads(osmo_process("resource", "list", "--all", "--json").stdout)
    info = osmo_process("resource", "info", "p1")

    # then
    assert forbidden.returncode == 1 and forbidden.stderr.strip() == (
        "error: permission denied: You have no access to pool 'private'.")
    assert unknown.returncode == 1 and unknown.stderr.strip() == "error: Pool 'nowhere' not found."
    assert {node["pool"] for node in listed} == {"lists"}
    assert info.returncode == 1 and info.stderr.strip() == "error: Node 'p1' is not in any pool you can see."


def test_resource_info_shows_a_nodes_capacity_use_and_holders(osmo_process, cluster):
    # when
    info = osmo_process("resource", "info", "n1")
    as_json = json.loads(osmo_process("resource", "info", "n1", "--json").stdout)

    # then
    assert info.returncode == 0, info.stderr
    out = info.stdout
    assert out.startswith("Resource Name: n1\n\nPool: lists   Platforms: -   Type: GPU   Schedulable: yes\n")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line.startswith(("GPU", "CPU"))}
    assert rows == {"GPU": ["8", "0", "8", "0"], "CPU": ["144", "0", "16", "128"]}
    assert "mine-1       alice  2      4" in out
    assert "(and 1 workflow(s) of other users)" in out
    assert as_json["node"] == "n1" and as_json["resources"][0]["pool"] == "lists"


def test_version_prints_client_and_service_and_warns_when_they_differ(osmo_process, live_server, monkeypatch):
    from cli import __version__

    # when
    same = osmo_process("version")
    as_json = json.loads(osmo_process("version", "-t", "json").stdout)
    unreachable = osmo_process("version", env={"OSMO_URL": "http://127.0.0.1:9"})
    monkeypatch.setattr("ops.version.service_version", lambda: "9.9.9")
    differs = osmo_process("version")

    # then
    assert same.returncode == 0, same.stderr
    assert same.stdout == f"OSMO client version:  {__version__}\nOSMO service version: {__version__}\n"
    assert same.stderr == ""
    fields = {"version": __version__, **dict(zip(("major", "minor", "revision"), map(int, __version__.split(".")),
                                                 strict=True))}
    assert as_json == {"client": fields, "service": fields}
    assert unreachable.stdout == f"OSMO client version:  {__version__}\n"
    assert unreachable.stderr.startswith("warning: the service's version is unknown: cannot connect")
    assert differs.stdout.endswith("OSMO service version: 9.9.9\n")
    assert differs.stderr.strip() == (f"warning: the client ({__version__}) and the service (9.9.9) differ: "
                                      "install the client of the service's version")
