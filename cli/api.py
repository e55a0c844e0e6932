"""A small httpx client of the service's REST API (docs/design.md §7) that turns every failure into a :class:`CliError`.

GETs retry connection failures (httpx transport retries) and 502/503/504 answers a few times; POSTs
are sent once (a submission carries an ``Idempotency-Key``, so re-running the same command by hand
is the user's choice, never ours).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

import httpx

from cli import __version__
from cli.errors import EXIT_USAGE, ApiError, CliError, NotLoggedInError

CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0
GET_RETRIES = 2
RETRY_STATUSES = {502, 503, 504}


def q(value: str) -> str:
    """One URL path segment."""
    return quote(value, safe="")


class Api:
    def __init__(self, url: str, token: str, *, timeout: float = READ_TIMEOUT) -> None:
        self.url = url
        headers = {
            # A JWT is the identity provider's access token (osmo login --device): a bearer token.
            "Authorization": f"{'Bearer' if token.count('.') == 2 else 'Token'} {token}",
            "Accept": "application/json",
            "User-Agent": f"osmo-cli/{__version__}",
        }
        self.headers = headers  # the websockets of exec and port-forward send the same credentials (cli.sessions)
        limits = httpx.Timeout(timeout, connect=CONNECT_TIMEOUT)
        self._get_client = httpx.Client(base_url=url, headers=headers, timeout=limits,
                                        transport=httpx.HTTPTransport(retries=GET_RETRIES))
        self._post_client = httpx.Client(base_url=url, headers=headers, timeout=limits,
                                         transport=httpx.HTTPTransport(retries=0))

    def close(self) -> None:
        self._get_client.close()
        self._post_client.close()

    def __enter__(self) -> Api:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------------------
    def get(self, path: str, *, params: dict[str, Any] | None = None, not_found: str | None = None) -> Any:
        attempt = 0
        while True:
            response = self._send(self._get_client, "GET", path, params=params)
            if response.status_code in RETRY_STATUSES and attempt < GET_RETRIES:
                attempt += 1
                time.sleep(0.5 * attempt)
                continue
            return self._decode(response, path, not_found=not_found)

    def post(self, path: str, *, json: Any = None, headers: dict[str, str] | None = None,
             not_found: str | None = None) -> tuple[int, Any]:
        response = self._send(self._post_client, "POST", path, json=json, headers=headers)
        return response.status_code, self._decode(response, path, not_found=not_found)

    def put(self, path: str, *, json: Any = None, not_found: str | None = None) -> tuple[int, Any]:
        response = self._send(self._post_client, "PUT", path, json=json)
        return response.status_code, self._decode(response, path, not_found=not_found)

    def delete(self, path: str, *, not_found: str | None = None) -> tuple[int, Any]:
        response = self._send(self._post_client, "DELETE", path)
        return response.status_code, self._decode(response, path, not_found=not_found)

    def get_all(self, path: str, *, params: dict[str, Any] | None = None, not_found: str | None = None,
                page_size: int = 500) -> Iterator[dict[str, Any]]:
        """Every item of a list endpoint, paginated (``{"results", "next"}``) or not (a plain list)."""
        offset = 0
        while True:
            page = self.get(path, params={**(params or {}), "limit": page_size, "offset": offset},
                            not_found=not_found)
            items = results(page)
            yield from items
            if not isinstance(page, dict) or not page.get("next") or not items:
                return
            offset += len(items)

    def _send(self, client: httpx.Client, method: str, path: str, **kwargs: Any) -> httpx.Response:
        if kwargs.get("params") and "?" in path:  # httpx's params replace the path's query: merge them
            path, _, query = path.partition("?")
            kwargs["params"] = {**dict(parse_qsl(query)), **kwargs["params"]}
        try:
            return client.request(method, path, **kwargs)
        except httpx.ConnectError as exc:
            raise CliError(
                f"cannot connect to the osmo server at {self.url}: {_reason(exc)}",
                hint="Is the server running and the URL right? Change it with osmo login URL or OSMO_URL.",
            ) from exc
        except httpx.ConnectTimeout as exc:
            raise CliError(f"cannot connect to the osmo server at {self.url}: timed out after {CONNECT_TIMEOUT:g}s",
                           hint="Is the URL right and the server reachable from here?") from exc
        except httpx.TimeoutException as exc:
            raise CliError(f"the osmo server at {self.url} did not answer in time ({exc.__class__.__name__})",
                           hint="Try again; if it persists the server is overloaded or stuck.") from exc
        except httpx.HTTPError as exc:
            raise CliError(f"request to {self.url}{path} failed: {_reason(exc)}") from exc

    def _decode(self, response: httpx.Response, path: str, *, not_found: str | None) -> Any:
        body: Any = None
        if response.content:
            try:
                body = response.json()
            except ValueError:
                body = None
        if response.is_success:
            if body is None and response.status_code != 204:
                raise CliError(f"{self.url} does not look like an osmo server: {path} answered "
                               f"HTTP {response.status_code} without JSON")
            return body
        raise self._error(response, body, path, not_found=not_found)

    def _error(self, response: httpx.Response, body: Any, path: str, *, not_found: str | None) -> CliError:
        status = response.status_code
        envelope = body if isinstance(body, dict) else {}
        code = str(envelope.get("code") or "")
        message = str(envelope.get("message") or envelope.get("detail") or "").strip()
        details = envelope.get("details") if isinstance(envelope.get("details"), dict) else {}
        errors = [e for e in details.get("errors", []) if isinstance(e, dict)] if details else []
        if status in (400, 403, 409, 422) and not isinstance(body, dict):
            # Not the API's answer (the API's are the envelope, docs/api.md): a proxy's page, or another server's.
            return ApiError(f"{self.url} answered HTTP {status} on {path} without the osmo API's error envelope",
                            status=status, hint="Is a proxy in the way, or is this not an osmo server? "
                            "Check the URL (osmo login URL or OSMO_URL).")
        if status == 401:
            return _not_logged_in(self.url, message)
        if status == 403:
            return ApiError(f"permission denied: {message or 'you may not do this'}", status=status, code=code)
        if status == 404:
            if not isinstance(body, dict):
                return ApiError(f"{self.url} does not look like an osmo server ({path} not found)", status=status)
            return ApiError(not_found or message or "not found", status=status, code=code)
        if status == 400 or status == 422:
            lines = [f"{e.get('path') or '(whole document)'}: {e.get('message', '')}" for e in errors]
            if len(errors) == 1 and str(errors[0].get("message", "")).strip() == message:
                message = "the request is invalid"  # the detail line says it all
            return ApiError(message or "the request is invalid", status=status, code=code, errors=errors,
                            details=lines, exit_code=EXIT_USAGE)
        if status == 409:
            return ApiError(message or "conflict with the current state", status=status, code=code)
        if code == "active_workflow_limit":  # not a busy server: the user's own workflows
            return ApiError(message, status=status, code=code)
        if status == 429 or status in RETRY_STATUSES:
            retry = response.headers.get("Retry-After")
            extra = f"; retry after {retry}s" if retry else ""
            return ApiError(f"the server is busy (HTTP {status}){extra}", status=status, code=code)
        if status >= 500:
            return ApiError(f"the server failed (HTTP {status}) on {path}", status=status, code=code,
                            hint="This is a server bug, not your input; the server log has the details.")
        return ApiError(message or f"HTTP {status} on {path}", status=status, code=code)


def _not_logged_in(url: str, message: str) -> NotLoggedInError:
    said = f" ({message})" if message else ""
    return NotLoggedInError(f"not logged in / token rejected by {url}{said}")


def _reason(exc: Exception) -> str:
    text = str(exc) or exc.__class__.__name__
    if "refused" in text.lower():
        return "connection refused"
    return text


def results(page: Any) -> list[dict[str, Any]]:
    """Items of a list answer, paginated or not."""
    if isinstance(page, dict):
        items = page.get("results", [])
    else:
        items = page
    return [item for item in (items or []) if isinstance(item, dict)]


def workflow_path(workflow_id: str, action: str = "") -> str:
    """The API path of a workflow (and of its ``action``, e.g. ``"logs/"``). Ids count per owner
    (docs/design.md §7, "Workflow ids"): ``OWNER/ID`` names another user's workflow (``?user=``), for
    staff whose view holds several workflows with one id. Anything else with a ``/``, and an empty,
    ``.`` or ``..`` id, is a usage error."""
    owner, slash, bare = workflow_id.partition("/") if "/" in workflow_id else ("", "", workflow_id)
    if bare in ("", ".", "..") or "/" in bare:
        # Each would be another URL (``.``: the workflow list; ``a/b/c``: a path the API does not have)
        # or none, answered with a page that is not about the workflow at all.
        raise CliError(f"{workflow_id!r} is not a workflow id: write ID or OWNER/ID (osmo workflow list shows them)",
                       exit_code=EXIT_USAGE)
    if not slash:
        return f"/api/workflows/{q(workflow_id)}/{action}"
    return f"/api/workflows/{q(bare)}/{action}?{urlencode({'user': owner})}"
