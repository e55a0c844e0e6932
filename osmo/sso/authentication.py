"""``Authorization: Bearer <JWT>``: the identity provider's access tokens on the API."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import APIException, AuthenticationFailed

from osmo.sso import config
from osmo.sso.notice import notice_set
from osmo.sso.teams import LocalAccountConflict, user_sync
from osmo.sso.tokens import ProviderUnreachable, TokenRefused, access_token_claims


class ProviderUnavailable(APIException):
    status_code = 503
    default_code = "identity_provider_unavailable"
    default_detail = "The identity provider cannot be reached and its keys are not cached: retry shortly."


class OIDCAccessTokenAuthentication(BaseAuthentication):
    """A bearer token that is a JWT (three dot-separated parts) is the provider's: it must verify,
    or the request gets 401. Any other bearer value is left to the local token authentication
    (osmo.api.authentication), as everything is while single sign-on is off."""

    def authenticate(self, request):
        if not config.enabled():
            return None
        parts = get_authorization_header(request).split()
        if len(parts) != 2 or parts[0].lower() != b"bearer" or parts[1].count(b".") != 2:
            return None
        try:
            claims = access_token_claims(parts[1].decode("ascii"))
            user, notice = user_sync(claims)
        except UnicodeDecodeError as error:
            raise AuthenticationFailed("Access token refused: it is not ASCII.") from error
        except (TokenRefused, ValueError, LocalAccountConflict) as error:
            raise AuthenticationFailed(f"Access token refused: {error}.") from error
        except ProviderUnreachable as error:
            raise ProviderUnavailable() from error
        if not user.is_active:
            raise AuthenticationFailed("User inactive or deleted.")
        notice_set(notice)
        return user, claims

    def authenticate_header(self, request):
        return 'Bearer realm="api"' if config.enabled() else "Token"


class OIDCAccessTokenScheme(OpenApiAuthenticationExtension):
    target_class = OIDCAccessTokenAuthentication
    name = "oidcAccessToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                "description": "An access token of the organisation's identity provider (single sign-on)."}
