"""Shared serializer behaviour of the API."""

from __future__ import annotations

import copy
from typing import Any, ClassVar

from django.db import models
from rest_framework import serializers


def keys_sorted(value: Any) -> Any:
    """``value`` with every object's keys in sorted order, at every depth."""
    if isinstance(value, dict):
        return {key: keys_sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [keys_sorted(item) for item in value]
    return value


class SortedJSONField(serializers.JSONField):
    """A JSON value answered with its objects' keys sorted: the same bytes whether the value was just
    written (a submission's answer, built from the rows it wrote) or read back from PostgreSQL (whose
    jsonb keeps keys in an order of its own)."""

    def to_representation(self, value: Any) -> Any:
        return keys_sorted(super().to_representation(value))



class OutputModelSerializer(serializers.ModelSerializer):
    """A ModelSerializer whose fields are built from the model once per class, not once per instance.

    DRF's ``ModelSerializer.get_fields`` reads the model's metadata and builds every field each time a
    serializer is instantiated (a detail answer instantiates four); here the built set is kept on the
    class and each instance gets deep copies of it, which is what DRF does for declared fields anyway.
    The set depends only on the class (``Meta`` and declared fields), never on the instance or context.
    """

    _fields_built: ClassVar[dict[str, Any] | None] = None  # per class: read through cls.__dict__
    serializer_field_mapping = {**serializers.ModelSerializer.serializer_field_mapping,
                                models.JSONField: SortedJSONField}

    def get_fields(self) -> dict[str, Any]:
        cls = type(self)
        built = cls.__dict__.get("_fields_built")
        if built is None:
            built = super().get_fields()
            cls._fields_built = built  # a race builds it twice, with the same result
        return copy.deepcopy(built)


class StrictCharField(serializers.CharField):
    """Text only: DRF's CharField turns a number into its text (``"label": 0`` was stored as ``"0"``),
    which the OpenAPI schema (``type: string``) does not allow."""

    default_error_messages = {"not_text": "Must be text, not {kind}."}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("not_text", kind=type(data).__name__)
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A number, not a boolean: DRF's FloatField takes ``false`` as 0.0, which the schema does not allow."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)
