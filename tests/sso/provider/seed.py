"""The test provider's users and clients (run once by tests/sso/conftest.py after migrate).

- alice (groups gpu-team and no-such-team), carol (no group: her tokens carry no groups claim)
- osmo-web: osmo's confidential client of the browser flow (loopback redirect, any port: RFC 8252)
- osmo-cli: the public client of `osmo login --device`
- osmo-tests: a password-grant client osmo accepts, to mint real tokens for the API tests
- other-app: a client of another service: its tokens are for another audience
"""

import django

django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from oauth2_provider.models import Application  # noqa: E402

alice = User.objects.create_user("alice", "alice@example.com", "alice-sso-password")
alice.groups.set([Group.objects.create(name="gpu-team"), Group.objects.create(name="no-such-team")])
User.objects.create_user("carol", "carol@example.com", "carol-sso-password")

for client_id, client_type, grant, secret in [
    ("osmo-web", Application.CLIENT_CONFIDENTIAL, Application.GRANT_AUTHORIZATION_CODE, "osmo-web-secret"),
    ("osmo-cli", Application.CLIENT_PUBLIC, Application.GRANT_DEVICE_CODE, ""),
    ("osmo-tests", Application.CLIENT_CONFIDENTIAL, Application.GRANT_PASSWORD, "osmo-tests-secret"),
    ("other-app", Application.CLIENT_CONFIDENTIAL, Application.GRANT_PASSWORD, "other-app-secret"),
]:
    Application.objects.create(
        name=client_id, client_id=client_id, client_secret=secret, client_type=client_type,
        authorization_grant_type=grant, algorithm=Application.RS256_ALGORITHM, skip_authorization=True,
        redirect_uris="http://127.0.0.1/oidc/callback/" if client_id == "osmo-web" else "",
        post_logout_redirect_uris="http://127.0.0.1/accounts/login/" if client_id == "osmo-web" else "")
