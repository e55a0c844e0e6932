"""Signed JWT access tokens and the groups claim of the test provider (tests/sso/provider/settings.py)."""

from __future__ import annotations

import time
import uuid

import jwt
from django.conf import settings
from jwcrypto import jwk
from oauth2_provider.models import get_device_grant_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc8628.grant_types.device_code import DeviceCodeGrant


def _key() -> tuple[str, str]:
    pem = settings.OAUTH2_PROVIDER["OIDC_RSA_PRIVATE_KEY"]
    # The kid the provider's JWKS publishes for this key (django-oauth-toolkit uses the thumbprint).
    return pem, jwk.JWK.from_pem(pem.encode()).thumbprint()


def _groups(user) -> list[str]:
    return sorted(user.groups.values_list("name", flat=True))


def signed_access_token(request) -> str:
    """The access token: a JWT for the client that asked, with the user's groups when they have any
    (a user in no group gets no groups claim at all, as providers do)."""
    pem, kid = _key()
    now = int(time.time())
    claims = {
        "iss": settings.ISSUER,
        "aud": request.client.client_id,
        "sub": str(request.user.pk),
        "preferred_username": request.user.get_username(),
        "email": request.user.email,
        "iat": now,
        "exp": now + settings.OAUTH2_PROVIDER["ACCESS_TOKEN_EXPIRE_SECONDS"],
        "jti": uuid.uuid4().hex,
        "scope": " ".join(request.scopes or []),
    }
    groups = _groups(request.user)
    if groups:
        claims["groups"] = groups
    return jwt.encode(claims, pem, algorithm="RS256", headers={"kid": kid})


class GroupsValidator(OAuth2Validator):
    """ID token and userinfo carry preferred_username, email and (when there are any) groups."""

    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self, request):
        claims = {"preferred_username": request.user.get_username(), "email": request.user.email}
        groups = _groups(request.user)
        if groups:
            claims["groups"] = groups
        return claims

    def validate_device_code(self, client_id, code, request, *args, **kwargs):
        """oauthlib 4 asks the validator for the device code's state (django-oauth-toolkit 3.4.1's
        token view has already checked it is authorized); the user and scopes come from the grant."""
        model = get_device_grant_model()
        grant = model.objects.filter(client_id=client_id, device_code=code).first()
        if grant is None:
            return None
        statuses = {model.AUTHORIZED: DeviceCodeGrant.DEVICE_CODE_AUTHORIZED,
                    model.AUTHORIZATION_PENDING: DeviceCodeGrant.DEVICE_CODE_PENDING,
                    model.EXPIRED: DeviceCodeGrant.DEVICE_CODE_EXPIRED,
                    model.DENIED: DeviceCodeGrant.DEVICE_CODE_DENIED}
        request.user = grant.user
        request.scopes = grant.scope.split()
        return statuses.get(grant.status)
