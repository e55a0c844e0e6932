"""Who may see the probes' detail and the metrics (docs/operations.md, "Probes and metrics").

The probe paths are answered before the session and authentication middleware run
(:class:`ops.health.ProbeMiddleware`), so this reads the credentials itself: the metrics bearer token
(``Authorization: Bearer <OSMO_METRICS_TOKEN>``, what Prometheus sends), a staff user's API token
(``Token`` or ``Bearer``), or a staff user's session cookie.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib import auth
from django.db import Error as DjangoDatabaseError
from django.http import HttpRequest
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

from credentials.models import ApiKey
from credentials.tokens import digest
from osmo import config as osmo_config
from osmo.api.throttling import AuthFailureThrottle

logger = logging.getLogger(__name__)


def _presented_key(request: HttpRequest) -> str | None:
    parts = request.headers.get("Authorization", "").split()
    if len(parts) == 2 and parts[0].lower() in ("token", "bearer"):
        return parts[1]
    return None


def privileged(request: HttpRequest) -> bool:
    """True for the metrics token, or a staff user (API token or session). A database that cannot be
    read makes the staff checks false (the metrics token still works: it needs no database)."""
    key = _presented_key(request)
    token = osmo_config.observability().metrics_token
    if key is not None and token and constant_time_compare(key, token):
        return True
    try:
        if key is not None and "\x00" not in key:
            return _staff_token(request, key)
        session_key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
        if not session_key:
            return False
        # Django's own reading of a session's user (its password hash checked), as the middleware would.
        request.session = import_string(f"{settings.SESSION_ENGINE}.SessionStore")(session_key)
        user = auth.get_user(request)
        return bool(user.is_active and user.is_staff)
    except DjangoDatabaseError:
        logger.warning("ops.access_unreadable", exc_info=True)
        return False


def _staff_token(request: HttpRequest, key: str) -> bool:
    """Whether ``key`` is an active staff user's API token, under the API's failed-token throttle: a key
    that is no token counts as a failure of the client's address, and past the API's rate the address
    gets no answer from the tokens table (any key is refused, but those that authenticated from it
    before). Without it these paths let anyone test tokens without limit (docs/operations.md)."""
    throttle = AuthFailureThrottle()
    if throttle.blocked(request, key):
        return False
    found = ApiKey.objects.filter(digest=digest(key)).values_list("user__is_active", "user__is_staff").first()
    if found is None:
        throttle.failure_record(request)
        return False
    throttle.success_record(request, key)
    return bool(found[0] and found[1])
