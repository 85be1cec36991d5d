"""Request fields of the API with strict JSON types and the bounds the database holds: a number
must be a JSON number, a string a JSON string, an id a JSON integer within 64 bits; unknown
request keys are refused by name (:class:`RejectUnknownFieldsMixin`)."""

from __future__ import annotations

import math
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from cluster import models


class StrictIntegerField(serializers.IntegerField):
    """An integer that must be a JSON integer (not a string, float or boolean)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A finite number that must be a JSON number (not a string or boolean)."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        try:
            finite = math.isfinite(data)
        except OverflowError:  # a JSON integer beyond the float range (was a 500)
            finite = False
        if not finite:
            self.fail("invalid")
        return super().to_internal_value(data)


class PositiveFloatField(StrictFloatField):
    """A finite JSON number strictly greater than 0 (and at most ``max_value``); the schema says
    ``exclusiveMinimum`` (:class:`PositiveFloatFieldSchema`), so a client never sends a 0 that the
    server then refuses."""

    default_error_messages = {"not_positive": "must be greater than 0"}

    def to_internal_value(self, data: Any) -> float:
        value = super().to_internal_value(data)
        if value <= 0:
            self.fail("not_positive")
        return value


class PositiveFloatFieldSchema(OpenApiSerializerFieldExtension):
    """OpenAPI of :class:`PositiveFloatField`: ``minimum: 0, exclusiveMinimum: true`` (OpenAPI 3.0)."""

    target_class = "cluster.fields.PositiveFloatField"

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = {
            "type": "number",
            "format": "double",
            "minimum": 0,
            "exclusiveMinimum": True,
        }
        if self.target.max_value is not None:
            schema["maximum"] = self.target.max_value
        return schema


class StrictBooleanField(serializers.BooleanField):
    """A JSON ``true`` or ``false`` (not ``1``, ``"yes"`` or ``"true"``)."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


@extend_schema_field({"type": "integer", "minimum": 1, "maximum": models.MAX_ID})
class StrictPrimaryKeyRelatedField(serializers.PrimaryKeyRelatedField):
    """The id of an existing row, as a JSON integer: ``1.5``, ``true`` or ``"1"`` are refused (not
    read as row 1), and so is an id outside the 64-bit range of the keys."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("incorrect_type", data_type=type(data).__name__)
        if not 1 <= data <= models.MAX_ID:
            self.fail("does_not_exist", pk_value=data)
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A string that must be a JSON string (no numbers or booleans turned into text)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class RejectUnknownFieldsMixin:
    """Reject request keys that are not writable fields of the serializer, naming each one."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            unknown = sorted(set(data) - writable)
            if unknown:
                raise serializers.ValidationError(
                    {key: ["unknown or read-only field"] for key in unknown[:20]}
                )
        return super().to_internal_value(data)


def refuse_fields(data: Any) -> None:
    """For an endpoint that takes no input (``POST tenant/token/``, ``POST jobs/{id}/cancel/``): an
    absent body or ``{}`` passes; an object with keys is the 400 of any serializer's unknown
    fields (each key named, as :class:`RejectUnknownFieldsMixin` does), anything else a 400 saying
    no body is taken. Raises :class:`rest_framework.exceptions.ValidationError`."""
    if isinstance(data, dict):  # a QueryDict (no body) is a dict too
        if data:
            raise serializers.ValidationError(
                {key: ["unknown or read-only field"] for key in sorted(data)[:20]}
            )
        return
    raise serializers.ValidationError(
        {"non_field_errors": ["this endpoint takes no body, or an empty object {}"]}
    )
