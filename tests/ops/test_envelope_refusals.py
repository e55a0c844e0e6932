"""Every answer under /api/ is the JSON error envelope, Django's and gunicorn's own refusals included
(docs/api.md): a disallowed Host, a NUL in a header, a request line past the limit."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import httpx
import pytest

from osmo.gunicorn_worker import refusal
from tests.factories import make_api_key, make_node, make_pool
from tests.ops.conftest import production_env

pytestmark = pytest.mark.django_db


def test_a_disallowed_host_under_api_is_the_envelope(client):
    # when a request names a Host not in ALLOWED_HOSTS
    api = client.get("/api/pools/", HTTP_HOST="evil.example")
    page = client.get("/", HTTP_HOST="evil.example")
    # then the API answers the envelope, the pages Django's page
    assert api.status_code == 400
    assert api["Content-Type"] == "application/json"
    body = api.json()
    assert (body["code"], body["details"]) == ("bad_request", {})
    assert "evil.example" in body["message"]
    assert page.status_code == 400
    assert page["Content-Type"].startswith("text/html")


def _raw(base_url: str, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` as bytes (httpx refuses to send what gunicorn must refuse) and read the answer."""
    url = urlsplit(base_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


@pytest.mark.django_db(transaction=True)
def test_gunicorn_refusals_are_the_envelope_and_a_4096_character_value_fits(gunicorn_server, worker_env, tmp_path,
                                                                             django_user_model):
    """Replays the attack run's findings: a request line over 4,094 bytes (a documented 4,096-character
    set_string value) and a NUL in a header got gunicorn's HTML pages."""
    # given the production server, a user's token and a pool
    server = gunicorn_server(production_env(worker_env, tmp_path / "data"))
    token = make_api_key(django_user_model.objects.create_user(username="carol", password="x"))
    pool = make_pool("long", keys=[("rack", "rack")])
    make_node(pool, "a1", {"rack": "r1"}, gpu=4)
    spec = "workflow:\n  name: long\n  tasks:\n  - {name: t, image: busybox, command: [echo, '{{ text }}']}\n" \
           "resources:\n  default: {gpu: 1}\n"
    value = "v" * 4096
    # when a dry run is sent with a 4,096-character value in the query string
    fits = httpx.post(f"{server.base_url}/api/workflows/", params={"pool": "long", "dry_run": "true",
                                                                   "set_string": f"text={value}"},
                      content=spec, headers={"Authorization": f"Token {token}", "Content-Type": "application/yaml"},
                      timeout=60)
    # and requests gunicorn refuses itself
    too_long = _raw(server.base_url, b"GET /api/pools/?x=" + b"a" * 9000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    nul = _raw(server.base_url, b"GET /api/pools/ HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: a\x00b\r\n\r\n")
    # then the value fits
    assert fits.status_code == 200, fits.text
    assert value in fits.text
    # and the refusals are the envelope
    status, headers, body = too_long
    assert (status, headers["Content-Type"]) == (414, "application/json")
    assert httpx.Response(200, content=body).json()["code"] == "request_line_too_long"
    status, headers, body = nul
    assert (status, headers["Content-Type"]) == (400, "application/json")
    assert set(httpx.Response(200, content=body).json()) == {"code", "message", "details"}


def test_an_unexpected_gunicorn_error_is_a_500_envelope_code():
    # given an error gunicorn does not know as a client's
    # when / then
    assert refusal(RuntimeError("boom")) == (500, "Internal Server Error", "server_error", "Internal server error.")
