from django.conf import settings
from django.db import models
from django.utils import timezone

from credentials.kinds import Kind


class Credential(models.Model):
    """One user's named secret. ``sealed`` is the Fernet token of the values (with owner and name,
    :mod:`credentials.crypto`); ``keys`` are the value's key names, kept in clear so the list can say
    what a credential holds without decrypting it."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="credentials")
    name = models.CharField(max_length=63)
    kind = models.CharField(max_length=16, choices=[(kind.value, kind.name.title()) for kind in Kind])
    keys = models.JSONField(default=list)
    sealed = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="credential_owner_name_unique")]

    def __str__(self) -> str:
        # Never the values: this is what logs and the admin print.
        return f"{self.name} ({self.kind})"


class AccessToken(models.Model):
    """A personal access token (OSMO's ``osmo token set``): named, with an expiry, for scripts and CI.
    Only the SHA-256 ``digest`` of the key is kept; the key is shown once, when it is made
    (:mod:`credentials.tokens`)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_tokens")
    name = models.CharField(max_length=63)
    description = models.CharField(max_length=200, blank=True, default="")
    digest = models.CharField(max_length=64, unique=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="access_token_user_name_unique")]

    def __str__(self) -> str:
        return f"{self.name} (expires {self.expires_at:%Y-%m-%d})"


class ApiKey(models.Model):
    """A user's API key (``Authorization: Token <key>``; ``drf_create_token``, ``make run``): one per user,
    no expiry. Only the SHA-256 ``digest`` of the key is kept, as for access tokens; the key is shown
    once, by the command that makes it (:mod:`credentials.tokens`)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_key")
    digest = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"API key of user {self.user_id}"
