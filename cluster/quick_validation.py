"""Request bodies checked by plain Python built from a DRF serializer's own fields, for endpoints
whose bodies carry many small items (the agents' batch report, docs/PERFORMANCE.md §10).

Why: DRF validates a body by building a new serializer per request — every nested serializer's
declared fields deep-copied and bound — and walking it field by field through ``get_value``,
``run_validation``, ``validate_empty_values``, ``to_internal_value`` and each validator object.
For a node's report of a tick (a heartbeat listing 20 GPUs and 20 jobs, a few events and output
chunks) that was about 1.8 ms of CPU, a quarter of the report's whole handling in the live
demo's profile. :func:`quick_validator` builds, once per process, a check of the same rules from
the same field objects (their bounds, lengths, choices and defaults are read off them, so the
rules stay in one place: the serializer) and answers ``None`` wherever it cannot vouch that DRF
would accept the body and give the same values: the caller then runs the serializer as before,
so every refusal is DRF's own 400 with its messages.

What is checked here (anything else is judged by the field's own ``run_validation``, or the body
is referred to DRF):

- a nested ``Serializer`` of the plain kind (no ``Meta`` validators, no own ``validate``,
  ``to_internal_value`` or ``run_validation``, no read-only fields, each field's ``source`` its
  name): a JSON object; each field in declared order, absent ones given their defaults by the
  field itself, the serializer's ``validate_<field>`` methods applied as DRF applies them;
  unknown keys ignored, as DRF ignores them;
- a ``ListSerializer`` with no validators: a JSON array within its ``max_length``/``min_length``
  (and not empty where empties are refused), each item by the child's check;
- integers (``IntegerField``, ``StrictIntegerField``) that are JSON integers within both bounds;
  numbers (``FloatField``, ``StrictFloatField``, ``PositiveFloatField``) that are JSON numbers,
  finite, within bounds (and > 0 for the positive kind); strings (``CharField``,
  ``StrictCharField``) that are JSON strings, not blank after the field's trimming, within their
  lengths, without NUL or surrogate characters; ``ChoiceField`` strings among the choices;
  ``BooleanField``/``StrictBooleanField`` JSON booleans. A field with a validator of another kind
  is left to its ``run_validation``.

A serializer's ``validate_<field>`` methods run on the one instance bound per process, so they
must not read ``self.context`` or ``self.instance`` (the agents' serializers read neither).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import (
    MaxLengthValidator,
    MaxValueValidator,
    MinLengthValidator,
    MinValueValidator,
)
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import (
    Field,
    ProhibitNullCharactersValidator,
    ProhibitSurrogateCharactersValidator,
    SkipField,
    empty,
)

from cluster.fields import (
    PositiveFloatField,
    StrictBooleanField,
    StrictCharField,
    StrictFloatField,
    StrictIntegerField,
)

#: A check of one value: the validated value, or :class:`Refer` raised.
Check = Callable[[Any], Any]

INTEGER_FIELDS = (serializers.IntegerField, StrictIntegerField)
FLOAT_FIELDS = (serializers.FloatField, StrictFloatField, PositiveFloatField)
CHAR_FIELDS = (serializers.CharField, StrictCharField)
BOOLEAN_FIELDS = (serializers.BooleanField, StrictBooleanField)
#: What DRF raises for a value it refuses or leaves out.
REFUSALS = (ValidationError, DjangoValidationError, SkipField)


class Refer(Exception):
    """This check cannot vouch for the value: DRF must judge the body."""


def quick_validator(serializer_class: type[serializers.Serializer]) -> Callable[[Any], Any | None]:
    """``validate(data)``: what ``serializer_class(data=data).validated_data`` would hold after
    ``is_valid()`` — the same values, of the same types — or ``None`` where that serializer
    might refuse ``data`` or this check does not cover it (the caller runs the serializer then).
    Built once per class and process (the serializer bound once); safe to call from several
    threads (it only reads)."""
    return _validator(serializer_class)


@cache
def _validator(serializer_class: type[serializers.Serializer]) -> Callable[[Any], Any | None]:
    check = field_check(serializer_class())

    def validate(data: Any) -> Any | None:
        try:
            return check(data)
        except Refer:
            return None

    return validate


def field_check(field: Field) -> Check:
    """The check of one bound field or serializer (the module's rules); a field this module does
    not compile is checked by its own ``run_validation``, any refusal raising :class:`Refer`."""
    if type(field) is serializers.ListSerializer and not field.validators:
        return _list_check(field)
    if isinstance(field, serializers.Serializer) and _plain_serializer(field):
        return _serializer_check(field)
    bounds = _bounds(field)
    if bounds is not None:
        kind = type(field)
        if kind in INTEGER_FIELDS and bounds[0] is not None and bounds[1] is not None:
            return _integer_check(field, bounds)
        if kind in FLOAT_FIELDS:
            return _float_check(field, bounds, positive=kind is PositiveFloatField)
        if kind in CHAR_FIELDS:
            return _char_check(field, bounds)
        if kind is serializers.ChoiceField and not field.validators:
            return _choice_check(field)
        if kind in BOOLEAN_FIELDS and not field.validators:
            return _boolean_check(field)
    return _delegated(field)


def _delegated(field: Field) -> Check:
    """The field's own ``run_validation``; a refusal raises :class:`Refer`."""
    run = field.run_validation

    def check(value: Any) -> Any:
        try:
            return run(value)
        except REFUSALS as exc:
            raise Refer from exc

    return check


def _bounds(field: Field) -> tuple[Any, Any] | None:
    """``(low, high)`` from the field's validators (values or lengths; ``None``: no bound), or
    ``None`` when it has a validator this module does not read."""
    low = high = None
    for validator in field.validators:
        kind = type(validator)
        if kind in (MinValueValidator, MinLengthValidator) and not callable(validator.limit_value):
            low = validator.limit_value
        elif kind in (MaxValueValidator, MaxLengthValidator) and not callable(validator.limit_value):
            high = validator.limit_value
        elif kind not in (ProhibitNullCharactersValidator, ProhibitSurrogateCharactersValidator):
            return None
    return low, high


def _fallback(field: Field, value: Any) -> Any:
    """Values outside a check's plain case (``null``, another type, a blank string): the field's
    own ``run_validation`` judges them; a refusal raises :class:`Refer`."""
    try:
        return field.run_validation(value)
    except REFUSALS as exc:
        raise Refer from exc


def _integer_check(field: Field, bounds: tuple[Any, Any]) -> Check:
    low, high = bounds

    def check(value: Any) -> Any:
        if type(value) is int:
            if low <= value <= high:
                return value  # IntegerField: int(str(value)), the same integer
            raise Refer
        return _fallback(field, value)

    return check


def _float_check(field: Field, bounds: tuple[Any, Any], positive: bool) -> Check:
    low, high = bounds

    def check(value: Any) -> Any:
        if type(value) is float or type(value) is int:
            try:
                number = float(value)
            except OverflowError as exc:  # an integer beyond the float range
                raise Refer from exc
            if (
                not math.isfinite(number)
                or (positive and number <= 0)
                or (low is not None and number < low)
                or (high is not None and number > high)
            ):
                raise Refer
            return number
        return _fallback(field, value)

    return check


def _char_check(field: Field, bounds: tuple[Any, Any]) -> Check:
    low, high = bounds
    trim = field.trim_whitespace

    def check(value: Any) -> Any:
        if type(value) is not str:
            return _fallback(field, value)
        text = value.strip() if trim else value
        if text == "":
            return _fallback(field, value)  # blank: allowed or refused by the field
        if (low is not None and len(text) < low) or (high is not None and len(text) > high) or "\x00" in text:
            raise Refer
        if not text.isascii():
            try:
                text.encode("utf-8")  # refuses exactly the surrogate code points
            except UnicodeEncodeError as exc:
                raise Refer from exc
        return text

    return check


def _choice_check(field: serializers.ChoiceField) -> Check:
    choices = field.choice_strings_to_values

    def check(value: Any) -> Any:
        if type(value) is str and value != "" and value in choices:
            return choices[value]
        return _fallback(field, value)

    return check


def _boolean_check(field: Field) -> Check:
    def check(value: Any) -> Any:
        if type(value) is bool:
            return value
        return _fallback(field, value)

    return check


def _list_check(field: serializers.ListSerializer) -> Check:
    child = field_check(field.child)
    low, high, allow_empty = field.min_length, field.max_length, field.allow_empty

    def check(value: Any) -> Any:
        if type(value) is not list:
            return _fallback(field, value)
        n = len(value)
        if (not allow_empty and n == 0) or (high is not None and n > high) or (low is not None and n < low):
            raise Refer
        return [child(item) for item in value]

    return check


def _plain_serializer(serializer: serializers.Serializer) -> bool:
    """Whether DRF's validation of ``serializer`` is the plain walk this module repeats."""
    kind, base = type(serializer), serializers.Serializer
    plain_lookups = (Field.get_value, base.get_value, serializers.ListSerializer.get_value)
    return (
        not serializer.validators
        and kind.validate is base.validate
        and kind.to_internal_value is base.to_internal_value
        and kind.run_validation is base.run_validation
        and kind.run_validators is base.run_validators
        and kind.get_value is base.get_value
        and all(
            not field.read_only and field.source_attrs == [name] and type(field).get_value in plain_lookups
            for name, field in serializer.fields.items()
        )
    )


def _serializer_check(serializer: serializers.Serializer) -> Check:
    plan = [
        (name, field_check(field), field, getattr(serializer, "validate_" + name, None))
        for name, field in serializer.fields.items()
    ]

    def check(value: Any) -> Any:
        if type(value) is not dict:
            return _fallback(serializer, value)
        validated: dict[str, Any] = {}
        for name, field_value, field, method in plan:
            if name in value:
                result = field_value(value[name])
            else:
                try:
                    result = field.run_validation(empty)  # its default, or SkipField
                except SkipField:
                    continue
                except REFUSALS as exc:  # required
                    raise Refer from exc
            if method is not None:
                try:
                    result = method(result)
                except REFUSALS as exc:
                    raise Refer from exc
            validated[name] = result
        return validated

    return check
