"""The browser's single sign-on in real Chromium against the real provider: sign in there, come back
signed in with the provider's teams; log out (here and at the provider); the login page says when the
provider is down, and what a missing groups claim means."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def site(live_server):
    # The provider's registered redirect is the loopback address (any port, RFC 8252), not "localhost".
    return live_server.url.replace("localhost", "127.0.0.1")


@pytest.fixture
def context(browser):
    context = browser.new_context()
    yield context
    context.close()


def _sign_in(page, site: str, username: str, password: str) -> None:
    page.goto(f"{site}/")
    page.wait_for_selector("#sso-login")
    page.click("#sso-login")
    page.wait_for_selector("#provider-login")  # the provider's own page
    assert page.url.startswith("http://127.0.0.1:") and "/accounts/login/" in page.url and site not in page.url
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#provider-login button[type=submit]")
    page.wait_for_selector("header .who")


def test_sign_in_through_the_provider_then_log_out(context, site, sso):
    # given: the team the provider's group names
    Group.objects.create(name="gpu-team")
    page = context.new_page()

    # when
    _sign_in(page, site, "alice", "alice-sso-password")

    # then: back on the dashboard, signed in as the provider's alice, in her team
    assert page.url == f"{site}/"
    assert page.inner_text("header .who") == "alice"
    alice = User.objects.get(username="alice")
    assert list(alice.groups.values_list("name", flat=True)) == ["gpu-team"]
    assert alice.has_usable_password() is False
    assert page.locator(".messages").count() == 0

    # when: logging out
    page.click("header form.logout button[type=submit]")
    page.wait_for_url(f"{site}/accounts/login/**")

    # then: the session is gone here, and at the provider (signing in asks for the password again)
    page.goto(f"{site}/workflows/")
    page.wait_for_url(f"{site}/accounts/login/?next=/workflows/")
    page.click("#sso-login")
    page.wait_for_selector("#provider-login")


def test_missing_groups_claim_signs_in_with_a_clear_message(context, site, sso):
    # given
    Group.objects.create(name="gpu-team")
    page = context.new_page()

    # when: carol, in no group at the provider
    _sign_in(page, site, "carol", "carol-sso-password")

    # then
    assert page.inner_text("header .who") == "carol"
    assert page.inner_text(".messages") == (
        "The identity provider sent no 'groups' claim, so you are in no team: pools granted to teams are closed "
        "to you. Ask your administrator to release the 'groups' claim to this service.")
    assert list(User.objects.get(username="carol").groups.all()) == []


def test_login_page_says_when_the_provider_is_down(context, site, sso, stopped_provider, django_user_model):
    # given
    django_user_model.objects.create_user(username="dave", password="dave-password")
    page = context.new_page()

    # when
    page.goto(f"{site}/accounts/login/")

    # then: no sign-in button, the reason, and local accounts still work
    assert page.locator("#sso-login").count() == 0
    assert page.inner_text("#sso-down") == (
        f"The identity provider ({sso.issuer}) cannot be reached, so sign-in through single sign-on is "
        "unavailable right now. Local accounts still work.")
    page.fill("#id_username", "dave")
    page.fill("#id_password", "dave-password")
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("header .who")
    assert page.inner_text("header .who") == "dave"


def test_login_page_without_single_sign_on_offers_only_local_accounts(context, site, settings):
    # given
    settings.OSMO_OIDC_ISSUER = ""
    page = context.new_page()

    # when
    page.goto(f"{site}/accounts/login/")

    # then
    assert page.locator("#sso").count() == 0
    assert page.locator("#login-form").count() == 1
