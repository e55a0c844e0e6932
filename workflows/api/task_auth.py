"""A task's ``osmo`` command on the user API (docs/runtime.md, "The osmo command in a task").

The runtime gives the task's command an API token (``OSMO_TOKEN``,
:func:`workflows.scheduling.pod.runtime.task_api_env`):
:class:`TaskApiTokenAuthentication` lets it act as the workflow's submitter while the task runs, on the
workflow endpoints, ``me`` and reading pools; anything else (credentials, changing pools) is 403, so a
task cannot read or change its submitter's secrets, or outlive itself through something it made there.

Kept apart from the runtime's views: DRF imports its authentication classes when ``APIView`` is
defined, so this module must not import ``rest_framework.views``.
"""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied
from rest_framework.permissions import SAFE_METHODS
from rest_framework.request import Request

from osmo.api.authentication import KEYWORDS
from workflows.scheduling.pod.runtime import task_api_user


class TaskApiAccess:
    """``request.auth`` of a request made with a task's API token."""

    def __repr__(self) -> str:
        return "TaskApiAccess()"


#: URL names a task's API token reaches with any method, and those it may only read.
TASK_API_URL_PREFIXES = ("workflow-",)
TASK_API_URL_NAMES = frozenset({"me"})
TASK_API_READ_PREFIXES = ("pool-",)


def task_api_allowed(url_name: str, method: str) -> bool:
    if url_name in TASK_API_URL_NAMES or url_name.startswith(TASK_API_URL_PREFIXES):
        return True
    return method in SAFE_METHODS and url_name.startswith(TASK_API_READ_PREFIXES)


class TaskApiTokenAuthentication(BaseAuthentication):
    """``Authorization: Token <task API token>`` (or ``Bearer``): a task's ``osmo`` command, acting as
    its workflow's submitter while the task runs. A header that is not a task API token is left to
    the next authentication (the users' API tokens: theirs never hold a ``:``, a signed token always
    does). One whose task ended or was re-placed is 401; an endpoint outside :func:`task_api_allowed`
    is 403, decided here rather than by a permission class: views that name their own permissions
    (pools: staff or read-only) do not run the default ones."""

    def authenticate(self, request: Request) -> tuple[Any, TaskApiAccess] | None:
        parts = get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].lower() not in KEYWORDS or b":" not in parts[1]:
            return None
        found = task_api_user(parts[1].decode("ascii", "replace"))
        if found is None:
            return None
        user, why = found
        if user is None:
            raise AuthenticationFailed(f"This task's token no longer works: {why}.")
        match = getattr(request, "resolver_match", None)
        if not task_api_allowed(getattr(match, "url_name", None) or "", request.method or ""):
            raise PermissionDenied("A task's token reaches workflows, your profile and reading pools; "
                                   "use your own API token for anything else.")
        return user, TaskApiAccess()

    def authenticate_header(self, request: Request) -> str:
        return "Token"
