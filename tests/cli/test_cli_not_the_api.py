"""An error answer that is not the API's envelope (an HTML page of a proxy, or of another server) is
said as such, with its status and path. A 400 page said only "error: the request is invalid" (exit 2,
the code of the user's own bad input), for example when a server's Django refused the URL's host."""

from __future__ import annotations

from typer.testing import CliRunner

from cli.main import app
from tests.cli.fake_server import FakeServer


def test_an_html_400_names_the_status_and_says_it_is_not_the_apis_answer(tmp_path):
    page = b"<html><body><h1>400 Bad Request</h1>Request Header Or Cookie Too Large</body></html>"
    with FakeServer({"/api/pools/": (400, page)}) as fake:
        env = {"OSMO_URL": fake.url, "OSMO_TOKEN": "t", "OSMO_CONFIG": str(tmp_path / "config.json")}
        result = CliRunner().invoke(app, ["pool", "list"], env=env)
    assert result.exit_code == 1
    assert result.stderr.splitlines()[0] == (
        f"error: {fake.url} answered HTTP 400 on /api/pools/ without the osmo API's error envelope")
    assert "Traceback" not in result.output
