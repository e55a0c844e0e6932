"""The task page in real Chromium (Playwright) against a real ASGI server (uvicorn on osmo.asgi, as `make
run` serves it) and tasks running for real on a local pool: the terminal, the log that follows, the events,
"Open port" (HTTP and websockets through the service), and its refusals (docs/pages.md, "Task page")."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
import websocket
from django.test import Client

from scheduler.dispatch import backend_for
from tests.factories import make_node, make_pool
from tests.pages.conftest import Console
from tests.sessions.conftest import ROOT, running, wait_listening
from workflows.models import Task, TaskSession
from workflows.scheduling.pod.request import pod_request

pytestmark = pytest.mark.django_db(transaction=True)

HTTP_TASK = ["sh", "-c", "cd /tmp && echo '<h1>served by the task</h1>' > index.html && "
                         "exec python3 -m http.server 8765 --bind 127.0.0.1"]

# A websocket echo server written with the standard library only (the task's python3 has no packages): it
# answers each text message with the path it was opened on, its X-Forwarded-Prefix and the message.
WS_ECHO = r'''
import base64, hashlib, socket, threading
def serve(c):
    data = b""
    while b"\r\n\r\n" not in data:
        data += c.recv(4096)
    head, buf = data.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    path = lines[0].split()[1]
    h = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
    accept = base64.b64encode(hashlib.sha1((h["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11")
                                           .encode()).digest()).decode()
    c.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Accept: " + accept + "\r\n\r\n").encode())
    def take(n):
        nonlocal buf
        while len(buf) < n:
            more = c.recv(4096)
            if not more:
                raise EOFError
            buf += more
        out, buf = buf[:n], buf[n:]
        return out
    while True:
        b0, b1 = take(2)
        size = b1 & 127
        if size == 126:
            size = int.from_bytes(take(2), "big")
        mask = take(4)
        payload = bytes(x ^ mask[i % 4] for i, x in enumerate(take(size)))
        if b0 & 15 == 8:
            c.sendall(bytes([0x88, 0]))
            return
        reply = (path + " " + h.get("x-forwarded-prefix", "-") + " " + payload.decode()).encode()
        c.sendall(bytes([0x81, len(reply)]) + reply)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 8766))
s.listen()
while True:
    threading.Thread(target=serve, args=(s.accept()[0],), daemon=True).start()
'''

# An HTTP server that answers what it received (path, cookies, prefix, body), sets two cookies (one named as
# the service's session cookie) and redirects /redirect to an absolute path.
HTTP_ECHO = r'''
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def answer(self):
        size = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(size) if size else b""
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/elsewhere")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        out = json.dumps({"method": self.command, "path": self.path, "cookie": self.headers.get("cookie"),
                          "prefix": self.headers.get("x-forwarded-prefix"), "size": len(body),
                          "tail": body[-8:].decode()}).encode()
        self.send_response(200)
        self.send_header("Set-Cookie", "sessionid=from-the-task; Path=/")
        self.send_header("Set-Cookie", "app=kept; Path=/")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    do_GET = do_POST = answer
ThreadingHTTPServer(("127.0.0.1", 8767), H).serve_forever()
'''


@pytest.fixture(scope="session")
def collected_static(tmp_path_factory):
    """The static files as production serves them (`collectstatic`; links, to be quick): WhiteNoise in the
    uvicorn process serves them from there (the test settings have DEBUG off)."""
    folder = tmp_path_factory.mktemp("static")
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "--link", "-v0"], cwd=ROOT, check=True,
                   env={**__import__("os").environ, "STATIC_ROOT": str(folder),
                        "DJANGO_SETTINGS_MODULE": "osmo.settings.test"})
    return folder


@pytest.fixture
def web(asgi_server, collected_static, browser):
    """``web(username, password)``: the ASGI server and a Chromium page signed in to it through the form."""
    server = asgi_server(env={"STATIC_ROOT": str(collected_static), "OSMO_PAGE_REFRESH_MS": "400",
                                 "OSMO_METRICS_TOKEN": "metrics-token"})
    contexts = []

    def sign_in(username: str, password: str):
        context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        contexts.append(context)
        page = context.new_page()
        console = Console(page)
        page.goto(f"{server.url}/accounts/login/")
        page.fill("#id_username", username)
        page.fill("#id_password", password)
        page.click("#login-form button[type=submit]")
        page.wait_for_selector("#status-counts")
        return server, page, console

    yield sign_in
    for context in contexts:
        context.close()


def _task_url(server, workflow, task="main") -> str:
    return f"{server.url}/workflows/{workflow.workflow_id}/tasks/{task}/"


def _cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def _get(url: str, cookie: str | None = None, headers: dict[str, str] | None = None) -> tuple[int, str, Any]:
    request = urllib.request.Request(url, headers={**({"Cookie": cookie} if cookie else {}), **(headers or {})})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=15) as answer:
            return answer.status, answer.read().decode(), answer.headers
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), error.headers


def _ended_sessions(workflow, **filters):
    deadline = time.monotonic() + 10
    while TaskSession.objects.filter(workflow=workflow, ended_at__isnull=True, started_at__isnull=False).exists():
        assert time.monotonic() < deadline, "a session did not end"
        time.sleep(0.1)
    return list(TaskSession.objects.filter(workflow=workflow, started_at__isnull=False, **filters))


def test_the_terminal_runs_a_command_and_the_log_follows(user, local_pool, web, tmp_path, screenshots):
    # given: a task that writes one line, then a second once /tmp/go exists (in its own /tmp)
    workflow = running(user, local_pool, tasks={"main": [
        "sh", "-c", "echo first-line; while [ ! -e /tmp/go ]; do sleep 0.1; done; echo second-line; sleep 300"]})
    server, page, console = web("alice", "alice-password")

    # when: its page, from the workflow page's link
    page.goto(f"{server.url}/workflows/{workflow.workflow_id}/")
    page.click('tr[data-task="main"] a.task-link')
    page.wait_for_url(_task_url(server, workflow))
    page.wait_for_function("() => document.getElementById('task-log').textContent.includes('first-line')")
    page.evaluate("window.__noReload = true")

    # and: the task writes a line after the page loaded
    task = Task.objects.select_related("node", "group", "workflow").get(workflow=workflow)
    pod = pod_request(task, local_pool)
    process = backend_for("local").exec_start(namespace=pod.namespace, pod_name=pod.pod_name,  # type: ignore[attr-defined]
                                              argv=["touch", "/tmp/go"])
    assert process.wait(10) == 0
    process.close()

    # then: it appears without a reload
    page.wait_for_function("() => document.getElementById('task-log').textContent.includes('second-line')",
                           timeout=10_000)
    assert page.evaluate("window.__noReload") is True
    assert page.inner_text("#task-log").splitlines()[-2:] == ["first-line", "second-line"]

    # when: a terminal, where `echo hi` is typed
    page.click("#terminal-open")
    page.wait_for_function("() => document.getElementById('terminal-state').textContent.startsWith('Connected')")
    page.click("#terminal")
    page.keyboard.type("echo hi")
    page.keyboard.press("Enter")

    # then: the shell's answer shows, on a line of its own
    page.wait_for_function("() => Array.from(document.querySelectorAll('#terminal .xterm-rows > div'))"
                           ".some(row => row.textContent.trim() === 'hi')", timeout=10_000)

    # when: the terminal's size is asked for
    page.keyboard.type("stty size")
    page.keyboard.press("Enter")

    # then: the size the page sent (resize frames), that of the box it fills, not a default 24x80 or 0x0
    page.wait_for_function("() => Array.from(document.querySelectorAll('#terminal .xterm-rows > div'))"
                           ".some(row => /^\\d+ \\d+$/.test(row.textContent.trim()))", timeout=10_000)
    rows = page.locator("#terminal .xterm-rows > div").all_inner_texts()
    size = next(row.strip() for row in rows if re.fullmatch(r"\d+ \d+", row.strip()))
    height, width = map(int, size.split())
    assert height == len(rows) and width > 100

    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(screenshots / "task.png"), full_page=True)

    # when: the shell ends
    page.keyboard.type("exit")
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('terminal-state').textContent === 'The shell exited.'")

    # then: the session is recorded as the browser's, and shows among the task's events
    sessions = _ended_sessions(workflow, kind="exec")
    assert len(sessions) == 1 and sessions[0].browser and sessions[0].tty and sessions[0].exit_code == 0
    assert sessions[0].bytes_in >= len("echo hi\rexit\r") and sessions[0].bytes_out > 0
    page.wait_for_selector('#task-events tr[data-kind="SessionEnded"]', timeout=10_000)
    assert "alice (browser): exec" in page.inner_text('#task-events tr[data-kind="SessionStarted"]')

    # when: the whole log is downloaded
    with page.expect_download() as download:
        page.click("#log-download")
    text = (tmp_path / "log.txt")
    download.value.save_as(text)

    # then
    assert text.read_text() == "first-line\nsecond-line\n"
    assert console.errors == []


def test_open_port_shows_the_tasks_page_and_is_recorded(user, local_pool, web):
    # given: a task serving HTTP on its port 8765
    workflow = running(user, local_pool, tasks={"main": HTTP_TASK})
    wait_listening(workflow, "main", 8765)
    server, page, console = web("alice", "alice-password")
    page.goto(_task_url(server, workflow))

    # when: "Open port" 8765
    page.fill("#port-number", "8765")
    with page.context.expect_page() as opened:
        page.click("#open-port-button")
    tab = opened.value
    tab.wait_for_load_state()

    # then: the task's page, under the service's URL
    assert tab.url == f"{_task_url(server, workflow)}ports/8765/"
    assert tab.inner_text("h1") == "served by the task"

    # and: the request was a recorded session of the browser, and counted in the metrics
    sessions = _ended_sessions(workflow, kind="port-forward")
    assert sessions and all(s.browser and s.port == 8765 for s in sessions)
    assert any(s.bytes_out >= len("<h1>served by the task</h1>\n") for s in sessions)
    status, metrics, _ = _get(f"{server.url}/metrics", headers={"Authorization": "Bearer metrics-token"})
    assert status == 200
    assert 'osmo_browser_sessions_total{kind="port-forward"}' in metrics
    assert console.errors == []


def test_the_proxy_carries_websockets_and_keeps_the_prefix_as_asked(user, local_pool, asgi_server):
    # given: a task serving websockets on 8766, and HTTP on 8765 (files) and 8767 (an echo)
    workflow = running(user, local_pool, tasks={"main": ["sh", "-c", f"python3 -c '{WS_ECHO}' & "
                                                                     f"python3 -c '{HTTP_ECHO}' & " + HTTP_TASK[2]]})
    for port in (8765, 8766, 8767):
        wait_listening(workflow, "main", port)
    server = asgi_server()
    cookie = _cookie(user)
    base = f"/workflows/{workflow.workflow_id}/tasks/main"
    ws = server.url.replace("http://", "ws://")

    # when: a websocket through each form of the proxy, and plain requests
    stripped = websocket.create_connection(f"{ws}{base}/ports/8766/echo?x=1", cookie=cookie, timeout=15)
    stripped.send("hello")
    stripped_answer = stripped.recv()
    stripped.close()
    absolute = websocket.create_connection(f"{ws}{base}/absolute-ports/8766/lab", cookie=cookie, timeout=15)
    absolute.send("again")
    absolute_answer = absolute.recv()
    absolute.close()
    page = _get(f"{server.url}{base}/ports/8765/index.html", cookie)
    bare = _get(f"{server.url}{base}/ports/8765", cookie)
    signed_out = _get(f"{server.url}{base}/ports/8765/")
    upload = b"0123456789" * 100_000 + b"the-end!"
    posted = urllib.request.urlopen(urllib.request.Request(
        f"{server.url}{base}/ports/8767/upload?kind=big", data=upload, method="POST",
        headers={"Cookie": f"{cookie}; app=1; csrftoken=abc", "Content-Type": "application/octet-stream"}), timeout=30)
    posted_body, posted_cookies = json.loads(posted.read()), posted.headers.get_all("Set-Cookie")
    redirected = _get(f"{server.url}{base}/ports/8767/redirect", cookie)
    encoded = _get(f"{server.url}{base}/ports/8767/api/contents/a%2Fb.ipynb?x=%20", cookie)

    # then: the task's server saw the path after the prefix (or the whole path), and the prefix
    assert stripped_answer == f"/echo?x=1 {base}/ports/8766 hello"
    assert absolute_answer == f"{base}/absolute-ports/8766/lab {base}/absolute-ports/8766 again"
    assert page[:2] == (200, "<h1>served by the task</h1>\n")
    assert (bare[0], bare[2]["location"]) == (302, f"{base}/ports/8765/")
    assert signed_out[0] == 302 and signed_out[2]["location"].startswith("/accounts/login/?next=")
    # and: a request body streams through whole; the service's cookies never reach the task, nor come back
    assert posted_body == {"method": "POST", "path": "/upload?kind=big", "cookie": "app=1", "size": len(upload),
                           "prefix": f"{base}/ports/8767", "tail": "the-end!"}
    assert posted_cookies == ["app=kept; Path=/"]
    assert (redirected[0], redirected[2]["location"]) == (302, f"{base}/ports/8767/elsewhere")
    assert json.loads(encoded[1])["path"] == "/api/contents/a%2Fb.ipynb?x=%20"  # as the browser wrote it
    sockets = [s for s in _ended_sessions(workflow, kind="port-forward") if s.port == 8766]
    assert len(sockets) == 2 and all(s.browser and s.bytes_in == 5 and s.bytes_out > 5 for s in sockets)


def test_another_user_another_site_and_a_port_not_listened_on_are_refused(user, other_user, local_pool,
                                                                          asgi_server):
    # given: alice's task serving HTTP
    workflow = running(user, local_pool, tasks={"main": HTTP_TASK})
    wait_listening(workflow, "main", 8765)
    server = asgi_server()
    base = f"{server.url}/workflows/{workflow.workflow_id}/tasks/main"
    ws = base.replace("http://", "ws://")

    # when
    bob = _get(f"{base}/ports/8765/", _cookie(other_user))
    missing = _get(f"{server.url}/workflows/no-such-1/tasks/main/ports/8765/", _cookie(other_user))
    service_port = _get(f"{base}/ports/{server.url.rsplit(':', 1)[1]}/", _cookie(user))
    with pytest.raises(websocket.WebSocketBadStatusException) as bob_ws:
        websocket.create_connection(f"{ws}/ports/8765/", cookie=_cookie(other_user), timeout=15)
    with pytest.raises(websocket.WebSocketBadStatusException) as foreign:
        websocket.create_connection(f"{ws}/ports/8765/", cookie=_cookie(user), origin="http://evil.example",
                                    timeout=15)
    bob_page = Client()
    bob_page.force_login(other_user)
    bob_task_page = bob_page.get(f"/workflows/{workflow.workflow_id}/tasks/main/")

    # then: bob gets what a missing workflow gets, in the API's envelope; the service's own port is not the
    # task's; another site's page cannot open a websocket with alice's cookie
    assert (bob[0], bob[2]["Content-Type"]) == (404, "application/json")
    assert bob[1].replace(workflow.workflow_id, "X") == missing[1].replace("no-such-1", "X")
    assert service_port[0] == 409 and '"code": "port_not_listening"' in service_port[1]
    assert bob_ws.value.status_code == 404
    assert foreign.value.status_code == 403
    assert bob_task_page.status_code == 404
    assert not TaskSession.objects.filter(user=other_user).exists()


def test_with_browser_forwarding_off_the_page_hides_open_port_and_the_proxy_refuses(user, local_pool, asgi_server):
    # given: a pool whose administrator turned browser forwarding off
    local_pool.browser_forwarding = False
    local_pool.save(update_fields=["browser_forwarding"])
    workflow = running(user, local_pool, tasks={"main": HTTP_TASK})
    wait_listening(workflow, "main", 8765)
    server = asgi_server()
    client = Client()
    client.force_login(user)

    # when
    page = client.get(f"/workflows/{workflow.workflow_id}/tasks/main/")
    proxied = _get(f"{server.url}/workflows/{workflow.workflow_id}/tasks/main/ports/8765/", _cookie(user))
    with pytest.raises(websocket.WebSocketBadStatusException) as refused_ws:
        websocket.create_connection(f"{server.url.replace('http', 'ws')}/workflows/{workflow.workflow_id}/tasks/main/"
                                    "ports/8765/", cookie=_cookie(user), timeout=15)

    # then: no button, a clear 403 naming the pool; the terminal stays
    html = page.content.decode()
    assert page.status_code == 200
    assert 'id="open-port"' not in html and 'id="forwarding-off"' in html and 'id="terminal-open"' in html
    assert proxied[0] == 403
    assert '"code": "browser_forwarding_off"' in proxied[1] and "pool local" in proxied[1]
    assert refused_ws.value.status_code == 403
    assert not TaskSession.objects.filter(kind="port-forward").exists()


def test_the_page_says_why_there_is_no_terminal(user, staff_user, settings):
    # given: a running task of a simulated pool, and a waiting one of the same workflow
    pool = make_pool("sim", keys=[])
    make_node(pool, "n1", {}, gpu=0)
    workflow = running(user, pool, tasks={"main": ["true"], "second": ["true"]})
    Task.objects.filter(workflow=workflow, name="second").update(status="INITIALIZING")
    owner, staff = Client(), Client()
    owner.force_login(user)
    staff.force_login(staff_user)

    # when
    simulated = owner.get(f"/workflows/{workflow.workflow_id}/tasks/main/").content.decode()
    waiting = owner.get(f"/workflows/{workflow.workflow_id}/tasks/second/").content.decode()
    as_staff = staff.get(f"/workflows/{workflow.workflow_id}/tasks/main/?user=alice").content.decode()
    unknown = owner.get(f"/workflows/{workflow.workflow_id}/tasks/nope/")

    # then: no terminal and no "Open port", and the reason in words
    assert 'id="terminal-open"' not in simulated + waiting + as_staff
    assert 'id="open-port"' not in simulated + waiting + as_staff
    assert "Pool sim runs no process (its backend is simulated): no terminal." in simulated
    assert "The task is INITIALIZING: a terminal and its ports open while it is RUNNING." in waiting
    assert "Only the workflow&#x27;s owner (alice) may open a terminal or a port of its tasks." in as_staff
    assert unknown.status_code == 404


def test_a_task_server_that_does_not_answer_ends_at_the_idle_timeout_as_504(user, local_pool, asgi_server):
    # given: a task that takes connections on 8768 and never answers; sessions idle out after 1 s
    silent = 'import socket\ns = socket.socket()\ns.bind(("127.0.0.1", 8768))\ns.listen()\nheld = []\n' \
             'while True:\n    held.append(s.accept())\n'
    workflow = running(user, local_pool, tasks={"main": ["python3", "-c", silent]})
    wait_listening(workflow, "main", 8768)
    server = asgi_server(env={"OSMO_SESSION_IDLE_SECONDS": "1"})

    # when
    status, body, _ = _get(f"{server.url}/workflows/{workflow.workflow_id}/tasks/main/ports/8768/", _cookie(user))

    # then: the API's envelope, and the session ended for it
    assert status == 504 and json.loads(body)["code"] == "gateway_timeout"
    assert "OSMO_SESSION_IDLE_SECONDS (1 s)" in json.loads(body)["message"]
    [session] = _ended_sessions(workflow, kind="port-forward")
    assert session.browser and session.end_reason == "idle for 1 s"
