"""A real OpenID Connect provider (django-oauth-toolkit, tests/sso/provider/) in its own gunicorn
process for the single sign-on tests, and osmo's settings pointing at it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import jwt
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwcrypto import jwk

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Provider:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.issuer = f"{self.base}/o"
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode()
        self.kid = jwk.JWK.from_pem(self.key_pem.encode()).thumbprint()
        (directory / "key.pem").write_text(self.key_pem)
        self.process: subprocess.Popen | None = None
        self.env = {
            **os.environ, "DJANGO_SETTINGS_MODULE": "tests.sso.provider.settings",
            "PROVIDER_DB": str(directory / "provider.sqlite3"), "PROVIDER_ISSUER": self.issuer,
            "PROVIDER_KEY_FILE": str(directory / "key.pem"), "PYTHONPATH": str(ROOT),
        }

    def setup(self) -> None:
        for command in (["-m", "django", "migrate", "-v0"], ["-m", "tests.sso.provider.seed"]):
            subprocess.run([sys.executable, *command], cwd=ROOT, env=self.env, check=True, timeout=300)

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4",
             "--log-level", "warning", "tests.sso.provider.wsgi"],
            cwd=ROOT, env=self.env, stdout=open(self.directory / "provider.log", "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(f"{self.issuer}/.well-known/jwks.json", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"the test provider did not start: {(self.directory / 'provider.log').read_text()}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)
            self.process = None

    def token(self, username: str, password: str, *, client: str = "osmo-tests") -> dict:
        """Real tokens from the provider's token endpoint (password grant of a test client)."""
        response = requests.post(f"{self.issuer}/token/", timeout=10, data={
            "grant_type": "password", "username": username, "password": password,
            "scope": "openid profile email groups", "client_id": client, "client_secret": f"{client}-secret"})
        assert response.status_code == 200, response.text
        return response.json()

    def forge(self, claims: dict, *, key: str | None = None, algorithm: str = "RS256") -> str:
        """A token signed with the provider's own key (or ``key``): for claims the provider would
        never issue on request (expired, another issuer)."""
        return jwt.encode(claims, key or self.key_pem, algorithm=algorithm, headers={"kid": self.kid})


@pytest.fixture(scope="session")
def provider(tmp_path_factory):
    instance = Provider(tmp_path_factory.mktemp("oidc-provider"))
    instance.setup()
    instance.start()
    yield instance
    instance.stop()


@pytest.fixture
def stopped_provider(provider):
    """The provider, down for the test (started again after it)."""
    provider.stop()
    yield provider
    provider.start()


@pytest.fixture
def sso(settings, provider):
    """osmo's single sign-on settings pointing at the test provider (the cached JWKS and provider state
    cleared, so no test sees another's)."""
    from django.core.cache import cache

    from osmo.sso import tokens, views

    settings.OSMO_OIDC_ISSUER = provider.issuer
    settings.OIDC_RP_CLIENT_ID = "osmo-web"
    settings.OIDC_RP_CLIENT_SECRET = "osmo-web-secret"
    settings.OIDC_OP_AUTHORIZATION_ENDPOINT = f"{provider.issuer}/authorize/"
    settings.OIDC_OP_TOKEN_ENDPOINT = f"{provider.issuer}/token/"
    settings.OIDC_OP_USER_ENDPOINT = f"{provider.issuer}/userinfo/"
    settings.OIDC_OP_JWKS_ENDPOINT = f"{provider.issuer}/.well-known/jwks.json"
    settings.OSMO_OIDC_END_SESSION_ENDPOINT = f"{provider.issuer}/logout/"
    settings.OSMO_OIDC_DEVICE_AUTHORIZATION_ENDPOINT = f"{provider.issuer}/device-authorization/"
    settings.OSMO_OIDC_CLI_CLIENT_ID = "osmo-cli"
    settings.OSMO_OIDC_AUDIENCE = ["osmo-web", "osmo-cli", "osmo-tests"]
    cache.delete_many([tokens._CACHE_KEY, views.PROVIDER_STATUS_KEY])
    yield provider
    cache.delete_many([tokens._CACHE_KEY, views.PROVIDER_STATUS_KEY])
