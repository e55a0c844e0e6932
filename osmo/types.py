"""Types shared by the apps' service and read layers."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

#: Who a read is for: a signed-in user, or nobody (sees nothing of its own).
Viewer = User | AnonymousUser



def signed_in(request: HttpRequest) -> User:
    """The request's user where authentication is required (the view's permission or login check
    already refused anonymous requests)."""
    user = request.user
    if not isinstance(user, User):
        raise PermissionDenied("sign in first")
    return user


__all__ = ["User", "Viewer", "signed_in"]
