"""One value per query parameter, for the REST API and the dashboard's JSON endpoints alike.

``?window=300&window=600`` used to be read as one of the two, silently (Django's
``QueryDict.get`` takes the last). Every reader of a query parameter goes through :func:`single`
(the dashboard, ``frontend/views.py``) or :func:`single_or_400` (the API's views, pagination and
filters), so a parameter given twice is a 400 naming it, never a guess. A parameter that is a list
(``?windows=2h,24h``) is one value, comma-separated, there too.

A number in a query is read by :func:`whole_number` or :func:`decimal_number`, the one rule for
every reader: ASCII digits only, nothing around them. Python's ``int()`` and ``float()`` (and DRF's
``IntegerField`` and ``FloatField``, which call them) also take other scripts' digits and
surrounding whitespace: ``?after=\u0661`` (Arabic-Indic one) was read as 1 and acknowledged order 1.
"""

from __future__ import annotations

import math
import re
from typing import Protocol

from rest_framework.exceptions import ValidationError

#: The longest number a query may hold (characters, sign and leading zeros included): a number
#: is bounded by its value, not by how many digits write it (``?after=0000000000000000000001`` is
#: 1), but a megabyte of zeros is not read; :func:`number_too_long` says why such one is refused.
MAX_NUMBER_CHARS = 64
#: The bound of every whole number read (exclusive): 2⁶³, so each fits a signed 64-bit column.
WHOLE_BOUND = 2**63
#: A whole number in a query **(ours)**: ASCII digits (``[0-9]`` is the 10 code points, unlike
#: ``\d`` or ``str.isdigit``), an optional ``-`` where the reader allows it.
WHOLE = re.compile(r"-?[0-9]+")
#: A decimal number in a query **(ours)**: ASCII digits, an optional fraction and exponent, as
#: Python's ``str(float)`` writes one (``25.0``, ``1e-05``), or a fraction alone (``.5``, as
#: people and many languages' number literals write half); no sign, ``inf``, ``nan`` or blanks.
DECIMAL = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
#: What :data:`DECIMAL` takes, in the words of a 400 (``"must be a number of seconds ..., "`` + this).
DECIMAL_WORDS = "written in ASCII as 5, 0.5, .5, 5. or 1e-3 (no sign, inf or nan; finite)"


def number_too_long(text: str) -> str | None:
    """Why ``text`` is refused as a number for its length alone (a detail for a 400, without the
    parameter's name: ``"is 70 characters long; a number here has at most 64, leading zeros
    included"``), or ``None`` when it is at most :data:`MAX_NUMBER_CHARS` characters long."""
    if len(text) <= MAX_NUMBER_CHARS:
        return None
    return (
        f"is {len(text):,} characters long; a number here has at most {MAX_NUMBER_CHARS}, "
        "leading zeros included"
    )


def whole_number(text: str, *, signed: bool = False) -> int | None:
    """``text`` as an ``int`` when it is ASCII digits (after a ``-`` when ``signed``), leading
    zeros allowed, at most :data:`MAX_NUMBER_CHARS` characters, of absolute value below
    :data:`WHOLE_BOUND` (2⁶³); ``None`` otherwise (``""``, ``" 5"``, ``"\u0661"``, ``"1.0"``,
    ``"+5"``, ``"9223372036854775808"``)."""
    if len(text) > MAX_NUMBER_CHARS or not WHOLE.fullmatch(text) or (text.startswith("-") and not signed):
        return None
    value = int(text)
    return value if abs(value) < WHOLE_BOUND else None


def decimal_number(text: str) -> float | None:
    """``text`` as a finite, non-negative ``float`` when it matches :data:`DECIMAL` (``.5`` is 0.5,
    leading zeros allowed) in at most :data:`MAX_NUMBER_CHARS` characters; ``None`` otherwise
    (``""``, ``" 1"``, ``"\u0661"``, ``"-1"``, ``"."``, ``"nan"``, ``"inf"``, ``"1e999"``)."""
    if len(text) > MAX_NUMBER_CHARS or not DECIMAL.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


class QueryValues(Protocol):
    """What a query is read through: Django's ``QueryDict`` (``request.GET``, DRF's
    ``request.query_params``)."""

    def getlist(self, key: str) -> list[str]:
        """Every value given for ``key``, in order (``[]`` when absent)."""
        ...


class RepeatedParameter(ValueError):
    """A query parameter given more than once: ``str()`` names it and says what was given
    (``"window given 2 times (300, 600); give it once"``), :attr:`detail` the same without the
    name (for DRF's ``{name: [detail]}``)."""

    def __init__(self, name: str, values: list[str]) -> None:
        shown = ", ".join(v[:40] if v.isdigit() else repr(v[:40]) for v in values[:3])
        self.name = name
        self.detail = f"given {len(values)} times ({shown}{', ...' if len(values) > 3 else ''}); give it once"
        super().__init__(f"{name} {self.detail}")


def single(query: QueryValues, name: str) -> str | None:
    """The one value of query parameter ``name``; ``None`` when absent.

    Raises :class:`RepeatedParameter` (a ``ValueError``) when it is given more than once, whether
    the values differ or not.
    """
    values = query.getlist(name)
    if len(values) > 1:
        raise RepeatedParameter(name, values)
    return values[0] if values else None


def single_or_400(query: QueryValues, name: str) -> str | None:
    """:func:`single` for a DRF view: a repeated parameter raises DRF's ``ValidationError``
    ``{name: ["given 2 times (300, 600); give it once"]}`` (answered ``400 {"error": "invalid
    input: name: ...", "fields": ...}``, :mod:`cluster.exceptions`)."""
    try:
        return single(query, name)
    except RepeatedParameter as exc:
        raise ValidationError({name: [exc.detail]}) from None
