"""Under /api/ Django's own refusals are the error envelope with DEBUG on too (docs/api.md, "Errors").

``make run`` serves with DEBUG on (``osmo.settings.local``). Django then answers an unknown URL and a
``Host`` not in ``ALLOWED_HOSTS`` with its debug pages, not with ``handler404``/``handler400``: the
API answered HTML, and ``osmo login http://127.1:8000`` said only "error: the request is invalid"."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def debug(settings):
    settings.DEBUG = True
    return settings


def test_an_unknown_api_url_is_the_404_envelope(debug, client):
    response = client.get("/api/no-such-endpoint/")
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"code": "not_found", "message": "No API endpoint at /api/no-such-endpoint/.",
                               "details": {}}


def test_a_host_not_allowed_is_the_400_envelope_naming_it(debug, client):
    response = client.get("/api/pools/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["code"] == "bad_request"
    assert "'evil.example'" in body["message"] and "ALLOWED_HOSTS" in body["message"]


def test_pages_keep_djangos_debug_pages(debug, client):
    # outside /api/ a developer still gets Django's debug 404 page
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_the_apis_own_answers_are_left_as_they_are(debug, client, user):
    # a browser asking for a workflow that is not there gets DRF's browsable page with the API's message
    client.force_login(user)
    response = client.get("/api/workflows/nope-1/", HTTP_ACCEPT="text/html")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert "nope-1" in response.content.decode() and "No API endpoint" not in response.content.decode()
