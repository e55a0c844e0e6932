"""``/api/credentials/``: the signed-in user's credentials (docs/api.md "Credentials"). Every query is
filtered by the requesting user (staff included): another user's credential is a 404, and no answer
ever holds a value. ``/api/tokens/``: the user's personal access tokens (:mod:`credentials.tokens`),
the same way: a key is in the answer that makes it, never again. A token does not make tokens: only
the user's API key or a signed-in session does (docs/design.md §15), so a leaked token dies with
its expiry instead of renewing itself."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from credentials import services, tokens
from credentials.kinds import NAME, NAME_MAX, VALUE_MAX_BYTES, Kind
from credentials.models import AccessToken, Credential
from osmo.api.pagination import OsmoLimitOffsetPagination
from osmo.api.views import NulSafeLookupMixin
from osmo.errors import ValidationFailedError
from osmo.types import signed_in
from runtime.locations import REMOTE_SCHEMES, LocationError
from runtime.locations import parse as location_parse


class CredentialOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=[kind.value for kind in Kind])
    keys = serializers.ListField(child=serializers.CharField(), help_text="The key names it holds (never values).")
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class CredentialValuesInputSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=[kind.value for kind in Kind])
    values = serializers.DictField(
        child=serializers.CharField(max_length=VALUE_MAX_BYTES),
        help_text="generic: any keys; registry: registry, username, auth; data: endpoint, access_key_id, "
                  "access_key, optional region.")


class CredentialInputSerializer(CredentialValuesInputSerializer):
    name = serializers.RegexField(f"^{NAME.pattern}$", max_length=NAME_MAX)


CredentialErrorSerializer = inline_serializer("CredentialError", fields={
    "code": serializers.CharField(), "message": serializers.CharField(), "details": serializers.DictField()})
ERRORS = {
    400: OpenApiResponse(CredentialErrorSerializer, description="Invalid input; details.errors names each field."),
    401: OpenApiResponse(CredentialErrorSerializer, description="Not authenticated."),
}
NOT_FOUND = {404: OpenApiResponse(CredentialErrorSerializer, description="You have no credential of that name.")}


def _body(request: Request) -> dict[str, Any]:
    if not isinstance(request.data, dict):
        raise ValidationFailedError([{"path": "", "message": "the body must be a JSON object"}])
    return dict(request.data)


class CredentialListView(generics.ListAPIView):
    serializer_class = CredentialOutputSerializer
    pagination_class = OsmoLimitOffsetPagination
    filter_backends: list[type] = []

    def get_queryset(self) -> QuerySet[Credential]:
        return Credential.objects.filter(owner=signed_in(self.request)).order_by("name")

    @extend_schema(operation_id="credentials_list", responses={200: CredentialOutputSerializer(many=True), **ERRORS})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Your credentials: name, kind, key names, when created and updated. Never the values."""
        return super().get(request, *args, **kwargs)

    @extend_schema(operation_id="credentials_create", request=CredentialInputSerializer,
                   responses={201: CredentialOutputSerializer, **ERRORS,
                              409: OpenApiResponse(CredentialErrorSerializer, description=(
                                  "`conflict`: the name is taken; `credential_limit`: you keep "
                                  "OSMO_MAX_CREDENTIALS_PER_USER credentials already."))})
    def post(self, request: Request) -> Response:
        """Create a credential (409 when you have one of that name: PUT replaces)."""
        body = _body(request)
        credential, _ = services.credential_set(owner=signed_in(request), name=body.get("name"),
                                                kind=body.get("kind"), values=body.get("values"), create_only=True)
        return Response(CredentialOutputSerializer(services.describe(credential)).data, status=status.HTTP_201_CREATED)


class CredentialDetailView(NulSafeLookupMixin, APIView):
    @extend_schema(operation_id="credentials_retrieve", responses={200: CredentialOutputSerializer, **ERRORS,
                                                                   **NOT_FOUND})
    def get(self, request: Request, name: str) -> Response:
        """One of your credentials, without its values."""
        credential = services.credential_get(owner=signed_in(request), name=name)
        return Response(CredentialOutputSerializer(services.describe(credential)).data)

    @extend_schema(operation_id="credentials_set", request=CredentialValuesInputSerializer,
                   responses={200: CredentialOutputSerializer, 201: CredentialOutputSerializer, **ERRORS,
                              409: OpenApiResponse(CredentialErrorSerializer, description=(
                                  "`credential_limit`: creating it would pass OSMO_MAX_CREDENTIALS_PER_USER."))})
    def put(self, request: Request, name: str) -> Response:
        """Create the credential ``name`` (201) or replace its kind and values (200)."""
        body = _body(request)
        if "name" in body and body["name"] != name:
            raise ValidationFailedError([{"path": "name", "message": f"the body names {str(body['name'])[:80]!r} "
                                                                     f"but the URL {name[:80]!r}"}])
        credential, created = services.credential_set(owner=signed_in(request), name=name, kind=body.get("kind"),
                                                      values=body.get("values"))
        return Response(CredentialOutputSerializer(services.describe(credential)).data,
                        status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    @extend_schema(operation_id="credentials_destroy", responses={204: None, 401: ERRORS[401], **NOT_FOUND})
    def delete(self, request: Request, name: str) -> Response:
        """Delete one of your credentials. Workflows already submitted that name it fail at dispatch."""
        services.credential_delete(owner=signed_in(request), name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class AccessTokenOutputSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    expires_at = serializers.DateTimeField(help_text="The token works until this moment (the end of its "
                                                     "expiry date, UTC).")
    expired = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def get_expired(self, token: AccessToken) -> bool:
        return tokens.expired(token)


class AccessTokenCreatedSerializer(AccessTokenOutputSerializer):
    token = serializers.CharField(help_text="The key: shown in this answer only.")


class AccessTokenInputSerializer(serializers.Serializer):
    name = serializers.RegexField(f"^{NAME.pattern}$", max_length=NAME_MAX)
    expires_at = serializers.DateField(required=False, help_text=f"Last day it works (UTC), YYYY-MM-DD; default "
                                                                 f"{tokens.DEFAULT_DAYS} days from today.")
    description = serializers.CharField(required=False, max_length=tokens.DESCRIPTION_MAX)


class AccessTokenListView(generics.ListAPIView):
    """``/api/tokens/``: your personal access tokens (OSMO's ``osmo token``), never their keys."""

    serializer_class = AccessTokenOutputSerializer
    pagination_class = OsmoLimitOffsetPagination
    filter_backends: list[type] = []

    def get_queryset(self) -> QuerySet[AccessToken]:
        return AccessToken.objects.filter(user=signed_in(self.request)).order_by("name")

    @extend_schema(operation_id="tokens_list", responses={200: AccessTokenOutputSerializer(many=True), **ERRORS})
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Your access tokens: name, description, expiry, whether expired. Never the keys."""
        return super().get(request, *args, **kwargs)

    @extend_schema(operation_id="tokens_create", request=AccessTokenInputSerializer,
                   responses={201: AccessTokenCreatedSerializer, **ERRORS,
                              403: OpenApiResponse(CredentialErrorSerializer, description=(
                                  "`permission_denied`: the request was made with an access token (or a "
                                  "task's token); make tokens with your API key or a signed-in session.")),
                              409: OpenApiResponse(CredentialErrorSerializer, description=(
                                  "`conflict`: the name is taken; `access_token_limit`: you have "
                                  f"{tokens.MAX_PER_USER} already."))})
    def post(self, request: Request) -> Response:
        """Make an access token. The answer's ``token`` is the key, shown this once. Only with your API
        key or a signed-in session: a request made with an access token is refused (403)."""
        if isinstance(request.auth, AccessToken):
            raise PermissionDenied("An access token cannot make access tokens (a leaked one would renew itself): "
                                   "use your API key or sign in.")
        body = _body(request)
        token, key = tokens.token_create(user=signed_in(request), name=body.get("name"),
                                         expires_at=body.get("expires_at", tokens.ABSENT),
                                         description=body.get("description", ""))
        data = dict(AccessTokenOutputSerializer(token).data)
        return Response({**data, "token": key}, status=status.HTTP_201_CREATED)


class AccessTokenDetailView(NulSafeLookupMixin, APIView):
    @extend_schema(operation_id="tokens_destroy", responses={204: None, 401: ERRORS[401], 404: OpenApiResponse(
        CredentialErrorSerializer, description="You have no access token of that name.")})
    def delete(self, request: Request, name: str) -> Response:
        """Delete one of your access tokens: its key stops working at once."""
        tokens.token_delete(user=signed_in(request), name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)


class DataCredentialInputSerializer(serializers.Serializer):
    url = serializers.CharField(help_text="A storage URL: s3://, gs://, azure://, tos:// or swift://.")


class DataCredentialOutputSerializer(serializers.Serializer):
    url = serializers.CharField()
    credential = serializers.CharField(help_text="The name of your data credential whose endpoint covers the URL.")
    values = serializers.DictField(child=serializers.CharField(), help_text=(
        "Its values: endpoint, access_key_id, access_key, and region and override_url when set."))


class DataCredentialView(APIView):
    """``POST /api/data/credential/``: the values of the caller's own data credential for a storage URL, so
    that ``osmo data`` transfers from the caller's machine with the credential their tasks use (docs/design.md
    §15). The one answer that holds credential values: to their owner only, never to a task's token."""

    @extend_schema(operation_id="data_credential", request=DataCredentialInputSerializer,
                   responses={200: DataCredentialOutputSerializer, **ERRORS,
                              403: OpenApiResponse(CredentialErrorSerializer, description=(
                                  "A task's token (tasks get their credentials through their spec)."))})
    def post(self, request: Request) -> Response:
        """Your data credential for a storage URL (the longest endpoint covering it). 400 naming `url` for a
        URL that is not a remote storage URL, or that none of your data credentials covers
        (`data_credential_missing`)."""
        url = _body(request).get("url")
        if not isinstance(url, str) or not url.strip():
            raise ValidationFailedError([{"path": "url", "message": "required: a storage URL like s3://bucket/path"}])
        try:
            location = location_parse(url)
        except LocationError as exc:
            raise ValidationFailedError([{"path": "url", "message": str(exc)}]) from exc
        if location.scheme not in REMOTE_SCHEMES:
            raise ValidationFailedError([{"path": "url", "message": (
                f"{location.scheme}:// is read on your own machine, with no credential; schemes with one: "
                f"{', '.join(REMOTE_SCHEMES)}")}])
        name, values = services.data_credential_for(owner=signed_in(request), url=location.url)
        response = Response({"url": location.url, "credential": name, "values": values})
        response["Cache-Control"] = "no-store"
        return response


urlpatterns = [
    path("data/credential/", DataCredentialView.as_view(), name="data-credential"),
    path("credentials/", CredentialListView.as_view(), name="credential-list"),
    path("credentials/<str:name>/", CredentialDetailView.as_view(), name="credential-detail"),
    path("tokens/", AccessTokenListView.as_view(), name="token-list"),
    path("tokens/<str:name>/", AccessTokenDetailView.as_view(), name="token-detail"),
]
