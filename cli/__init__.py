"""The `osmo` command-line client: talks to the service's REST API only (httpx), never imports the server."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("osmo-workflows")
except PackageNotFoundError:  # pragma: no cover - running from a tree that is not installed
    __version__ = "0.0.0"
