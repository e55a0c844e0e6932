"""``/mcp`` end to end: the official SDK's client (``streamable_http_client`` + ``ClientSession``) against a
real uvicorn process serving ``osmo.asgi``, authenticated with the user's own API key or access token
(docs/mcp.md)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.db import connection
from django.utils import timezone
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult
from rest_framework.test import APIClient

from credentials import services as credential_services
from credentials import tokens
from scheduler.models import PoolGrant
from tests.conftest import wait_for
from tests.factories import make_api_key, make_node, make_pool
from workflows.choices import WorkflowStatus
from workflows.models import Workflow
from workflows.services import workflow_cancel, workflow_submit

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = """\
workflow:
  name: {name}
  groups:
  - name: g
    tasks:
    - {{name: main, lead: true, image: ubuntu, command: [sleep, '60']}}
resources:
  default: {{cpu: 1, gpu: 1}}
"""
EXPECTED_TOOLS = {
    "osmo_health", "osmo_get_profile", "osmo_search_pools", "osmo_list_resources", "osmo_list_workflows",
    "osmo_get_resource", "osmo_get_workflow", "osmo_get_workflow_logs", "osmo_get_workflow_events",
    "osmo_get_workflow_spec",
    "osmo_validate_workflow", "osmo_submit_workflow", "osmo_cancel_workflow", "osmo_restart_workflow",
    "osmo_list_apps", "osmo_get_app", "osmo_get_app_spec", "osmo_submit_app", "osmo_list_credentials",
}


def session_run(url: str, token: str | None, steps: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Open an MCP session on ``url`` with the SDK's client (bearer ``token``) and run ``steps`` in it."""

    async def run() -> Any:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(headers=headers, follow_redirects=True, timeout=30) as http_client:
            async with streamable_http_client(f"{url}/mcp", http_client=http_client) as (read, write, _):
                async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=30)) as session:
                    await session.initialize()
                    return await steps(session)

    return asyncio.run(run())


def _content(result: CallToolResult) -> dict[str, Any]:
    """The structured content, which the text content repeats as JSON."""
    assert result.structuredContent is not None
    assert json.loads(result.content[0].text) == result.structuredContent  # type: ignore[union-attr]
    return result.structuredContent


@pytest.fixture
def pools(user, other_user):
    """``open`` (no grant: everyone's) and ``private`` (granted to other_user only), one node each."""
    open_pool = make_pool("open", keys=[])
    make_node(open_pool, "open-1", {}, gpu=8, cpu=16)
    private = make_pool("private", keys=[])
    make_node(private, "private-1", {}, gpu=8, cpu=16)
    PoolGrant.objects.create(pool=private, user=other_user)
    return open_pool, private


def test_lists_its_tools_and_answers_health_and_profile_as_the_token_s_user(user, pools, asgi_server):
    # given a live server and the user's API key
    server = asgi_server()
    key = make_api_key(user)

    # when the SDK's client lists the tools and calls health and profile
    async def steps(session: ClientSession):
        listed = await session.list_tools()
        return listed, await session.call_tool("osmo_health", {}), await session.call_tool("osmo_get_profile", {})

    listed, health, profile = session_run(server.url, key, steps)

    # then every tool is there, annotated, with its input schema; and the calls act as that user
    tools = {t.name: t for t in listed.tools}
    assert set(tools) == EXPECTED_TOOLS
    assert tools["osmo_get_workflow"].annotations.readOnlyHint is True
    assert tools["osmo_cancel_workflow"].annotations.destructiveHint is True
    assert tools["osmo_submit_workflow"].annotations.readOnlyHint is False
    assert tools["osmo_submit_workflow"].inputSchema["required"] == ["spec"]
    assert "ctx" not in tools["osmo_submit_workflow"].inputSchema["properties"]
    assert (health.isError, _content(health)) == (False, {"status": "ok", "user": user.username, "database": "ok"})
    assert _content(profile) == {"username": user.username, "is_staff": False, "teams": [], "pools": ["open"]}


def test_submit_then_query_list_spec_events_and_cancel_with_an_access_token(user, pools, asgi_server):
    # given a live server and one of the user's access tokens (osmo token set)
    server = asgi_server()
    _, key = tokens.token_create(user=user, name="assistant", expires_at=tokens.ABSENT, description="")

    # when a workflow is validated, submitted, found, read and cancelled through the tools
    async def steps(session: ClientSession):
        answers = {"validate": await session.call_tool("osmo_validate_workflow",
                                                       {"spec": SPEC.format(name="viamcp"), "pool": "open"})}
        submission = {"spec": SPEC.format(name="viamcp"), "pool": "open", "priority": "HIGH",
                      "idempotency_key": "7d1e0c4a-assistant-retry"}
        answers["submit"] = await session.call_tool("osmo_submit_workflow", submission)
        answers["retry"] = await session.call_tool("osmo_submit_workflow", submission)
        answers["reused"] = await session.call_tool("osmo_submit_workflow", {**submission, "priority": "LOW"})
        workflow_id = _content(answers["submit"])["id"]
        answers["query"] = await session.call_tool("osmo_get_workflow", {"workflow_id": workflow_id})
        answers["list"] = await session.call_tool("osmo_list_workflows", {"status": ["PENDING", "RUNNING"]})
        answers["spec"] = await session.call_tool("osmo_get_workflow_spec", {"workflow_id": workflow_id})
        answers["events"] = await session.call_tool("osmo_get_workflow_events", {"workflow_id": workflow_id})
        answers["cancel"] = await session.call_tool("osmo_cancel_workflow", {"workflow_id": workflow_id})
        return answers

    answers = session_run(server.url, key, steps)

    # then the dry run stored nothing and placed the group; the submission is the user's workflow
    assert _content(answers["validate"])["groups"][0]["placement"]["status"] == "placed"
    submitted = _content(answers["submit"])
    workflow = Workflow.objects.get()
    assert (submitted["id"], submitted["pool"], submitted["priority"], submitted["submitted_by"]) == (
        workflow.workflow_id, "open", "HIGH", user.username)
    assert (submitted["warnings"], submitted["created"]) == ([], True)
    # and the retry with the same idempotency key answered that workflow, making none
    assert (_content(answers["retry"])["id"], _content(answers["retry"])["created"]) == (workflow.workflow_id, False)
    assert (answers["reused"].isError, _content(answers["reused"])["status"]) == (True, 422)
    # and query, list, spec and events read it as the API does
    query = _content(answers["query"])
    assert (query["id"], query["status"], [g["name"] for g in query["groups"]]) == (workflow.workflow_id, "PENDING",
                                                                                    ["g"])
    assert [row["id"] for row in _content(answers["list"])["results"]] == [workflow.workflow_id]
    assert _content(answers["spec"])["spec"] == workflow.spec_text
    assert _content(answers["spec"])["truncated"] is False
    assert any(event["kind"] == "status" for event in _content(answers["events"])["events"])
    # and the cancellation went through the service
    assert _content(answers["cancel"])["status"] == WorkflowStatus.FAILED_CANCELED
    workflow.refresh_from_db()
    assert workflow.status == WorkflowStatus.FAILED_CANCELED


def test_another_user_s_pool_is_refused_as_the_api_refuses_it_and_nothing_is_stored(user, pools, asgi_server):
    # given a pool granted to another user only
    server = asgi_server()
    key = make_api_key(user)

    # when the user submits to it, lists its nodes, and queries a workflow that does not exist
    async def steps(session: ClientSession):
        return (await session.call_tool("osmo_submit_workflow", {"spec": SPEC.format(name="x"), "pool": "private"}),
                await session.call_tool("osmo_list_resources", {"pool": "private"}),
                await session.call_tool("osmo_list_resources", {}),
                await session.call_tool("osmo_get_workflow", {"workflow_id": "nope-1"}),
                await session.call_tool("osmo_submit_workflow", {"spec": "workflow: [", "pool": "open"}))

    submit, nodes, visible, missing, invalid = session_run(server.url, key, steps)

    # then each is a tool error carrying the API's status and envelope, naming the pool or the field
    assert submit.isError is True
    refusal = _content(submit)
    assert (refusal["status"], refusal["code"], refusal["details"]) == (403, "pool_forbidden", {"pool": "private"})
    assert (_content(nodes)["status"], _content(nodes)["code"]) == (403, "pool_forbidden")
    assert [node["name"] for node in _content(visible)["nodes"]] == ["open-1"]  # the private pool's are not listed
    assert (_content(missing)["status"], _content(missing)["code"]) == (404, "not_found")
    assert invalid.isError is True
    assert (_content(invalid)["status"], _content(invalid)["code"]) == (400, "spec_invalid")
    assert "line 1" in _content(invalid)["details"]["errors"][0]["message"]
    assert not Workflow.objects.exists()
    # and each call is one log line with its tool, user and status, never its arguments
    calls = [line for line in server.log().splitlines() if "mcp.tool_call" in line]
    assert len(calls) == 5
    assert all(f"user={user.username}" in line for line in calls)
    assert any("tool=osmo_submit_workflow" in line and "status=403" in line for line in calls)
    assert "sleep" not in server.log()


APP_SPEC = """\
workflow:
  name: trainer
  pool: open
  groups:
  - name: g
    tasks:
    - {name: main, lead: true, image: ubuntu, command: [sleep, '{{seconds}}']}
resources:
  default: {cpu: 1, gpu: {{gpus}}}
default-values:
  seconds: 60  # how long it sleeps
  gpus: 1
"""


def test_apps_are_listed_shown_and_launched_with_values_and_unknown_values_or_pools_refused(user, other_user,
                                                                                             pools, asgi_server):
    # given an app of another user's with two versions, and a live server
    from catalog import services as app_services

    app_services.app_create(owner=other_user, name="trainer", description="Sleeps", spec=APP_SPEC)
    app_services.app_update(user=other_user, name="trainer", spec=APP_SPEC.replace("60  #", "90  #"))
    server = asgi_server()
    key = make_api_key(user)

    # when the user lists every app, shows it, launches version 1 with a value, and tries bad launches
    async def steps(session: ClientSession):
        return (await session.call_tool("osmo_list_apps", {"all_users": True}),
                await session.call_tool("osmo_list_apps", {}),
                await session.call_tool("osmo_get_app", {"name": "trainer"}),
                await session.call_tool("osmo_submit_app", {"name": "trainer", "version": 1,
                                                            "values": {"gpus": 2}}),
                await session.call_tool("osmo_submit_app", {"name": "trainer", "values": {"nope": 1}}),
                await session.call_tool("osmo_submit_app", {"name": "trainer", "pool": "private"}),
                await session.call_tool("osmo_get_app", {"name": "missing"}),
                await session.call_tool("osmo_get_app_spec", {"name": "trainer", "version": 1}))

    every, mine, shown, launched, unknown, forbidden, missing, spec = session_run(server.url, key, steps)

    # then the list and the show answer as `osmo app list --all-users` and `osmo app show` do
    assert [row["name"] for row in _content(every)["apps"]] == ["trainer"]
    assert _content(mine)["apps"] == []  # by default: apps the user made a version of or started from
    detail = _content(shown)
    assert (detail["version"], [v["version"] for v in detail["versions"]]) == (2, [2, 1])
    assert {p["name"]: (p["default"], p["comment"]) for p in detail["parameters"]}["seconds"] == (
        90, "how long it sleeps")
    # and the launch is a workflow of the user's recording the app version, with the value given
    assert launched.isError is False
    assert _content(launched)["app"] == {"name": "trainer", "version": 1}
    workflow = Workflow.objects.get()
    assert (workflow.submitted_by, workflow.app_name, workflow.app_version) == (user, "trainer", 1)
    assert (workflow.template_values["gpus"], workflow.template_values["seconds"]) == (2, 60)
    # and an unknown value, another user's pool and a missing app are the API's refusals, storing nothing
    assert (_content(unknown)["status"], _content(unknown)["code"]) == (400, "spec_invalid")
    assert _content(unknown)["details"]["errors"][0]["path"] == "set.nope"
    assert (_content(forbidden)["status"], _content(forbidden)["code"]) == (403, "pool_forbidden")
    assert (_content(missing)["status"], _content(missing)["code"]) == (404, "app_not_found")
    assert Workflow.objects.count() == 1
    assert (_content(spec)["version"], _content(spec)["spec"]) == (1, APP_SPEC)


def test_labels_go_over_the_spec_s_and_select_workflows_and_a_bad_label_is_refused(user, other_user, pools,
                                                                                   asgi_server):
    # given an app and a live server
    from catalog import services as app_services

    app_services.app_create(owner=other_user, name="trainer", description="Sleeps", spec=APP_SPEC)
    server = asgi_server()
    key = make_api_key(user)

    # when a workflow and an app are submitted with labels, the list is filtered by selectors, and a label of
    # bad syntax is given
    async def steps(session: ClientSession):
        first = await session.call_tool("osmo_submit_workflow", {"spec": SPEC.format(name="plain"), "pool": "open",
                                                                 "labels": {"team": "vision"}})
        second = await session.call_tool("osmo_submit_app", {"name": "trainer", "labels": {"team": "speech"}})
        return (first, second,
                await session.call_tool("osmo_list_workflows", {"label": ["team=vis*"]}),
                await session.call_tool("osmo_list_workflows", {"label": ["team=(vision|speech)"]}),
                await session.call_tool("osmo_list_workflows", {"label": ["team=(unclosed"]}),
                await session.call_tool("osmo_submit_workflow", {"spec": SPEC.format(name="bad"), "pool": "open",
                                                                 "labels": {"bad key!": "x"}}))

    first, second, vision, both, unparsed, bad = session_run(server.url, key, steps)

    # then the labels are stored on each workflow and the selectors pick them as the API's ?label= does
    assert (first.isError, second.isError) == (False, False)
    labels = dict(Workflow.objects.values_list("name", "labels"))
    assert (labels["plain"], labels["trainer"]) == ({"team": "vision"}, {"team": "speech"})
    assert [row["name"] for row in _content(vision)["results"]] == ["plain"]
    assert sorted(row["name"] for row in _content(both)["results"]) == ["plain", "trainer"]
    # and a selector that does not parse and a label of bad syntax are the API's 400s naming the field
    assert (_content(unparsed)["status"], unparsed.isError) == (400, True)
    assert "label" in json.dumps(_content(unparsed)["details"])
    assert (_content(bad)["status"], bad.isError) == (400, True)
    assert any(error["path"].startswith("labels[") for error in _content(bad)["details"]["errors"]), _content(bad)
    assert Workflow.objects.count() == 2


def test_credentials_are_listed_by_name_never_with_their_values(user, pools, asgi_server):
    # given a credential with a secret value
    server = asgi_server()
    credential_services.credential_set(owner=user, name="hf", kind="generic", values={"token": "s3cr3t-value"})

    # when the tool lists them
    result = session_run(server.url, make_api_key(user),
                         lambda session: session.call_tool("osmo_list_credentials", {}))

    # then the names and key names are there, the value nowhere
    [credential] = _content(result)["credentials"]
    assert (credential["name"], credential["kind"], credential["keys"]) == ("hf", "generic", ["token"])
    assert "s3cr3t-value" not in result.model_dump_json()


def test_without_a_valid_token_the_http_request_is_refused_before_any_tool_runs(user, pools, asgi_server):
    # given a live server
    server = asgi_server()
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    expired_token, expired_key = tokens.token_create(user=user, name="old", expires_at=tokens.ABSENT, description="")
    expired_token.expires_at = timezone.now() - timedelta(days=1)
    expired_token.save(update_fields=["expires_at"])

    # when the MCP endpoint is called without a token, with a wrong one, with an expired one
    missing = httpx.post(f"{server.url}/mcp", json=initialize, headers=headers)
    wrong = httpx.post(f"{server.url}/mcp", json=initialize, headers={**headers, "Authorization": "Bearer nope"})
    expired = httpx.post(f"{server.url}/mcp", json=initialize,
                         headers={**headers, "Authorization": f"Bearer {expired_key}"})

    # then each is a 401 in the API's envelope, with the bearer challenge
    assert (missing.status_code, missing.json()["code"]) == (401, "not_authenticated")
    assert "Authorization: Bearer" in missing.json()["message"]
    assert missing.headers["www-authenticate"] == 'Bearer realm="osmo"'
    assert (wrong.status_code, wrong.json()["code"]) == (401, "authentication_failed")
    assert (expired.status_code, expired.json()["code"]) == (401, "authentication_failed")
    assert "expired" in expired.json()["message"]
    # and the SDK's client cannot open a session without one
    with pytest.raises(BaseException) as raised:  # noqa: B017,PT011  (the SDK raises the HTTP error in a group)
        session_run(server.url, None, lambda session: session.list_tools())
    assert "401" in repr(raised.value) or "Unauthorized" in repr(raised.value)
    # and the rest of the service is unchanged by the router in front of it
    assert httpx.get(f"{server.url}/healthz").json() == {"status": "ok"}


def test_tool_errors_are_the_api_s_answers_for_the_same_requests(user, pools, asgi_server):
    # given a workflow of the user's, not dispatched yet (no worker runs here), and the API's client
    server = asgi_server()
    workflow, _ = workflow_submit(user=user, pool_name="open", spec=SPEC.format(name="parity"))
    api = APIClient()
    api.force_authenticate(user)
    wid = workflow.workflow_id

    # when the same requests go through the tools and through the API
    async def steps(session: ClientSession):
        return {
            "logs": await session.call_tool("osmo_get_workflow_logs", {"workflow_id": wid, "task": "main"}),
            "restart": await session.call_tool("osmo_restart_workflow", {"workflow_id": wid, "pool": "private"}),
            "owner": await session.call_tool("osmo_get_workflow", {"workflow_id": wid, "owner": "bob"}),
            "nodes": await session.call_tool("osmo_list_resources", {"pool": "missing"}),
            "team": await session.call_tool("osmo_validate_workflow", {"spec": SPEC.format(name="t"), "pool": "open",
                                                                        "team": "nobody"}),
        }

    tools = session_run(server.url, make_api_key(user), steps)
    answers = {
        "logs": api.get(f"/api/workflows/{wid}/logs/?task=main"),
        "restart": api.post(f"/api/workflows/{wid}/restart/", {"pool": "private"}, format="json"),
        "owner": api.get(f"/api/workflows/{wid}/?user=bob"),
        "nodes": api.get("/api/pools/missing/nodes/"),
        "team": api.post("/api/workflows/", {"spec": SPEC.format(name="t"), "pool": "open", "team": "nobody",
                                             "dry_run": True}, format="json"),
    }

    # then each tool error is the API's status and envelope, field for field
    for name, response in answers.items():
        assert response.status_code >= 400, name
        assert tools[name].isError is True, name
        assert _content(tools[name]) == {"status": response.status_code, **response.json()}, name
    # and the refused restart stored nothing
    assert list(Workflow.objects.values_list("workflow_id", flat=True)) == [wid]


def test_restart_logs_and_bounded_lists(user, pools, asgi_server):
    # given a cancelled workflow of the user's, and a pool of 5 nodes
    server = asgi_server()
    workflow, _ = workflow_submit(user=user, pool_name="open", spec=SPEC.format(name="again"))
    workflow_cancel(workflow_pk=workflow.pk, user=user)
    for index in range(2, 6):
        make_node(pools[0], f"open-{index}", {}, gpu=8, cpu=16)

    # when it is restarted, the pools searched, the nodes listed 3 at a time, and the list filtered by name
    async def steps(session: ClientSession):
        return (await session.call_tool("osmo_restart_workflow", {"workflow_id": workflow.workflow_id}),
                await session.call_tool("osmo_search_pools", {"search": "OPE"}),
                await session.call_tool("osmo_list_resources", {"limit": 3}),
                await session.call_tool("osmo_get_resource", {"node": "open-4"}),
                await session.call_tool("osmo_get_resource", {"node": "private-1"}),
                await session.call_tool("osmo_list_workflows", {"name": "again", "limit": 1}),
                await session.call_tool("osmo_list_workflows", {"status": ["NOT_A_STATUS"]}))

    restarted, found, nodes, one, hidden, listed, bad_status = session_run(server.url, make_api_key(user), steps)

    # then the restart is a new workflow of the user's with the next id of that name
    new = _content(restarted)
    assert (new["id"], new["status"], new["pool"], new["created"]) == ("again-2", "PENDING", "open", True)
    assert Workflow.objects.filter(workflow_id="again-2", submitted_by=user).exists()
    # and the pool search, the bounded node list and the paged workflow list say what they left out
    assert [pool["name"] for pool in _content(found)["pools"]] == ["open"]
    assert _content(found)["pools"][0]["totals"]["capacity"]["gpu"] == 40
    assert (_content(nodes)["count"], _content(nodes)["truncated"], len(_content(nodes)["nodes"])) == (5, True, 3)
    assert (_content(one)["name"], _content(one)["pool"], _content(one)["capacity"]["gpu"]) == ("open-4", "open", 8)
    assert (_content(hidden)["status"], _content(hidden)["code"]) == (404, "not_found")  # another user's pool
    assert (_content(listed)["count"], [row["id"] for row in _content(listed)["results"]]) == (2, ["again-2"])
    # and an argument outside the tool's schema is a tool error naming it, before the tool runs
    assert bad_status.isError is True and "NOT_A_STATUS" in bad_status.content[0].text  # type: ignore[union-attr]


def test_the_server_keeps_no_database_connection_after_its_calls(user, pools, asgi_server):
    # given a server that keeps no connection between requests (CONN_MAX_AGE=0, as a request's would close;
    # without osmo.asgi's pool, which keeps its idle connections open by design, up to DATABASE_POOL_MAX)
    server = asgi_server(env={"CONN_MAX_AGE": "0", "DATABASE_POOL": "false"})

    def others() -> int:
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                           "AND pid <> pg_backend_pid()")
            return cursor.fetchone()[0]

    before = others()

    # when twenty tool calls run, reads and writes, some of them refused
    async def steps(session: ClientSession):
        for index in range(5):
            await session.call_tool("osmo_get_profile", {})
            await session.call_tool("osmo_list_workflows", {})
            await session.call_tool("osmo_submit_workflow", {"spec": SPEC.format(name=f"c{index}"), "pool": "open"})
            await session.call_tool("osmo_submit_workflow", {"spec": SPEC.format(name="x"), "pool": "private"})

    session_run(server.url, make_api_key(user), steps)

    # then every connection the tools and the authentication opened in their threads is closed again
    assert Workflow.objects.count() == 5
    wait_for(lambda: others() == before, timeout=10, message="the server's connections to close")
