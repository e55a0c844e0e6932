"""Static files through the production server with DEBUG off (docs/design.md §10)."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.ops.conftest import manage, production_env

ASSET_RE = re.compile(r'(?:href|src)="(/static/[^"]+)"')


def _assets(html: str) -> list[str]:
    return sorted(set(ASSET_RE.findall(html)))


@pytest.mark.django_db(transaction=True)
def test_pages_admin_and_api_docs_get_their_css_and_js_with_debug_off(gunicorn_server, worker_env, tmp_path):
    """Replays the production setup that ran `runserver`: with DEBUG off nothing served static files,
    so the admin, the pages and /api/docs/ had no CSS or JS."""
    # given the image's build step (collectstatic) and the production server with DEBUG off
    env = production_env(worker_env, tmp_path / "data")
    manage(env, "collectstatic", "--no-input", "-v0")
    server = gunicorn_server(env)
    with httpx.Client(base_url=server.base_url, timeout=10) as client:
        pages = {path: client.get(path) for path in ("/api/docs/", "/admin/login/", "/accounts/login/")}
        assert {path: response.status_code for path, response in pages.items()} == dict.fromkeys(pages, 200)
        assets = {path: _assets(response.text) for path, response in pages.items()}
        # when every stylesheet and script those pages reference is fetched
        fetched = {url: client.get(url) for urls in assets.values() for url in urls}

    # then each page references its assets by hashed name, and every one is served, cacheable forever
    assert any("swagger-ui" in url and url.endswith(".css") for url in assets["/api/docs/"])
    assert any("swagger-ui-bundle" in url and url.endswith(".js") for url in assets["/api/docs/"])
    assert any(url.startswith("/static/admin/css/base.") for url in assets["/admin/login/"])
    osmo_assets = [url for url in assets["/accounts/login/"] if url.startswith("/static/osmo/")]
    assert [re.sub(r"\.[0-9a-f]{12}\.", ".", url) for url in osmo_assets] == [
        "/static/osmo/favicon.svg", "/static/osmo/live.js", "/static/osmo/site.css"
    ]
    assert {url: response.status_code for url, response in fetched.items()} == dict.fromkeys(fetched, 200)
    content_types = {url: response.headers["content-type"].split(";")[0] for url, response in fetched.items()}
    assert {url for url, kind in content_types.items() if url.endswith(".css") and kind != "text/css"} == set()
    assert {url for url, kind in content_types.items() if url.endswith(".js") and kind != "text/javascript"} == set()
    assert {url for url, response in fetched.items()
            if "max-age=315360000" not in response.headers["cache-control"]} == set()
