"""Single sign-on through the organisation's OpenID Connect provider (docs/design.md §12).

Off unless ``OSMO_OIDC_ISSUER`` is set; local accounts and API tokens keep working either way.

- Browser: mozilla-django-oidc's authorization code flow (``backend.OIDCBackend``), the login page
  offering it and saying when the provider cannot be reached (``views``).
- API: ``authentication.OIDCAccessTokenAuthentication`` accepts the provider's signed access tokens
  (JWTs), checked with PyJWT against the provider's JWKS, which is cached so that tokens keep working
  while the provider is down (``tokens``).
- CLI: ``GET /api/auth/sso/`` tells ``osmo login --device`` where the device authorization flow is.
- Teams: the provider's groups claim decides the user's teams (``teams``), so pool grants and quotas
  follow the provider.
"""
