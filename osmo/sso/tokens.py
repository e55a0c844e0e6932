"""Checking the provider's signed access tokens (JWTs) against its JWKS.

The JWKS is kept in the shared cache (every web process sees it): fetched again after
``OSMO_OIDC_JWKS_REFRESH_SECONDS``, or at once (at most every ``JWKS_MIN_REFETCH_SECONDS``) when a
token names a key it does not hold (the provider rotated its keys). When the provider cannot be
reached, the last JWKS fetched stays in use for ``OSMO_OIDC_JWKS_STALE_SECONDS``: tokens signed with
its keys keep working until they expire."""

from __future__ import annotations

import logging
import time
from typing import Any

import jwt

from osmo import config as osmo_config
from osmo.sso import config
from osmo.sso.shared_cache import cache_get, cache_set

logger = logging.getLogger(__name__)

# Asymmetric algorithms only: "none" and HMAC (whose key would be the public key) are refused.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
JWKS_MIN_REFETCH_SECONDS = 30.0
LEEWAY_SECONDS = 30
_CACHE_KEY = "osmo-sso:jwks"


class TokenRefused(Exception):
    """The token is not one this service accepts; the message says why (shown in the 401)."""


class ProviderUnreachable(Exception):
    """No JWKS could be fetched and none is cached: no token can be checked."""


def _jwks_fetch() -> dict[str, Any]:
    client = jwt.PyJWKClient(osmo_config.sso().jwks_endpoint, cache_jwk_set=False, cache_keys=False,
                             timeout=osmo_config.sso().timeout_seconds or 5)
    try:
        data: dict[str, Any] = client.fetch_data()
    except jwt.PyJWKClientError as error:
        raise ProviderUnreachable(f"the identity provider's JWKS could not be fetched: {error}") from error
    cache_set(_CACHE_KEY, {"fetched": time.time(), "jwks": data}, timeout=osmo_config.sso().jwks_stale_seconds)
    return data


def _jwks(*, kid: str | None) -> dict[str, Any]:
    cached = cache_get(_CACHE_KEY)
    if cached is not None:
        age = time.time() - cached["fetched"]
        known = any(key.get("kid") == kid for key in cached["jwks"].get("keys", []))
        stale = age > osmo_config.sso().jwks_refresh_seconds or (not known and age > JWKS_MIN_REFETCH_SECONDS)
        if not stale:
            return dict(cached["jwks"])
        try:
            return _jwks_fetch()
        except ProviderUnreachable as error:
            logger.warning("sso.jwks_stale_in_use", extra={"age_seconds": round(age), "reason": str(error)})
            return dict(cached["jwks"])
    return _jwks_fetch()


def _signing_key(kid: str | None) -> Any:
    keys = jwt.PyJWKSet.from_dict(_jwks(kid=kid)).keys
    for key in keys:
        if key.key_id == kid or (kid is None and len(keys) == 1):
            return key
    raise TokenRefused(f"it is signed with a key ({kid}) the identity provider does not publish")


def access_token_claims(token: str) -> dict[str, Any]:
    """The claims of a valid access token; :class:`TokenRefused` saying why for any other."""
    try:
        header = jwt.get_unverified_header(token)
    except jwt.InvalidTokenError as error:
        raise TokenRefused(f"it is not a JSON Web Token ({error})") from error
    algorithm = header.get("alg")
    if algorithm not in ALGORITHMS:
        raise TokenRefused(f"its algorithm {algorithm!r} is not accepted (signed tokens only: {', '.join(ALGORITHMS)})")
    key = _signing_key(header.get("kid"))
    try:
        claims: dict[str, Any] = jwt.decode(
            token, key, algorithms=[algorithm], audience=config.audiences(), issuer=osmo_config.sso().issuer,
            leeway=LEEWAY_SECONDS, options={"require": ["exp", "iat", "iss", "aud", "sub"]})
    except jwt.ExpiredSignatureError as error:
        raise TokenRefused("it has expired") from error
    except jwt.InvalidAudienceError as error:
        raise TokenRefused(f"it is for another audience (accepted: {', '.join(config.audiences())})") from error
    except jwt.InvalidIssuerError as error:
        raise TokenRefused(f"it was issued by another issuer (accepted: {osmo_config.sso().issuer})") from error
    except jwt.InvalidSignatureError as error:
        raise TokenRefused("its signature does not verify") from error
    except jwt.InvalidTokenError as error:
        raise TokenRefused(str(error)) from error
    return claims
