"""Where the CLI finds its server and token.

Order: the environment (``OSMO_URL``, ``OSMO_TOKEN``) wins over the config file written by
``osmo login`` (``$OSMO_CONFIG``, else ``$XDG_CONFIG_HOME/osmo/config.json``, else
``~/.config/osmo/config.json``). The file holds a secret, so it is written with mode 0600. It also
keeps the profile's ``default_pool`` (``osmo profile set pool NAME``; ``OSMO_POOL`` wins over it).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from cli.device import refreshed
from cli.errors import CliError, NotLoggedInError

ENV_URL = "OSMO_URL"
ENV_TOKEN = "OSMO_TOKEN"
ENV_CONFIG = "OSMO_CONFIG"
ENV_POOL = "OSMO_POOL"
# What `osmo login --device` saves beside the token (cli.device); `osmo login --token` drops them.
SSO_ENTRIES = ("refresh_token", "token_endpoint", "client_id", "expires_at")


@dataclass(frozen=True, slots=True)
class Settings:
    url: str
    token: str
    url_source: str  # "OSMO_URL" or the config path: said in error messages
    token_source: str


def config_path() -> Path:
    explicit = os.environ.get(ENV_CONFIG)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "osmo" / "config.json"


def normalize_url(url: str) -> str:
    """``localhost:8000``, ``http://host/``, ``http://host/api/`` -> ``http://host`` (no trailing slash)."""
    text = url.strip()
    if not text:
        raise CliError("the server URL is empty", exit_code=2)
    if "://" not in text:
        text = f"http://{text}"
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018  # parsed on access: a port out of range or not a number raises here
    except ValueError as exc:  # e.g. "http://[::1": an IPv6 address without its closing bracket
        raise CliError(f"{url!r} is not a valid URL ({exc}); example: http://localhost:8000", exit_code=2) from None
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise CliError(f"{url!r} is not an http(s) URL (example: http://localhost:8000)", exit_code=2)
    path = parts.path.rstrip("/")
    if path.endswith("/api"):
        path = path[: -len("/api")]
    return f"{parts.scheme}://{parts.netloc}{path}"


def config_read(path: Path | None = None) -> dict[str, str]:
    path = path or config_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise CliError(f"cannot read the config file {path}: {exc}. Fix or delete it, then run osmo login.") from exc
    if not isinstance(data, dict):
        raise CliError(f"the config file {path} is not a JSON object. Delete it, then run osmo login.")
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


def config_write(data: dict[str, str], path: Path | None = None) -> Path:
    """Write atomically with mode 0600 (directory 0700 when we create it)."""
    path = path or config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".json", dir=path.parent)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, indent=2)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    os.chmod(path, 0o600)
    return path


def config_delete(path: Path | None = None) -> bool:
    path = path or config_path()
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def settings_load() -> Settings:
    """The server and token to use, or :class:`NotLoggedInError`."""
    path = config_path()
    stored = config_read(path)
    if not os.environ.get(ENV_TOKEN):
        renewed = refreshed(stored)  # a single sign-on token about to expire
        if renewed:
            stored = {**stored, **renewed}
            config_write(stored, path)
    url = os.environ.get(ENV_URL) or stored.get("url")
    token = os.environ.get(ENV_TOKEN) or stored.get("token")
    if not url or not token:
        missing = "server URL" if not url else "token"
        raise NotLoggedInError(f"not logged in (no {missing})")
    return Settings(
        url=normalize_url(url),
        token=token,
        url_source=ENV_URL if os.environ.get(ENV_URL) else str(path),
        token_source=ENV_TOKEN if os.environ.get(ENV_TOKEN) else str(path),
    )
