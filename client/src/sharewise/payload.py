"""What a request body may hold: JSON's values only, checked before anything is sent.

JSON (RFC 8259) has strings, finite numbers, booleans, null, arrays and objects. YAML and Python
have more: ``.inf`` and ``.nan`` (and ``1.0e+400``, past the largest double), and, through explicit
tags such as ``!!timestamp``, ``!!binary`` and ``!!set``, dates, bytes and sets. ``requests`` would
refuse them only while sending (reported as a failed connection) or not at all (a ``TypeError``);
:func:`check_fields` names the field instead, so the command can say which one to fix.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any

from sharewise.errors import UsageError

#: Most lists and mappings a field's value may nest: no job field nests more than one, and a value
#: that refers to itself (YAML's ``a: &a [*a]``) or nests thousands deep would exhaust Python's
#: recursion here or in ``json.dumps`` instead of naming the field.
MAX_DEPTH = 32
#: Most values (strings, numbers, lists, mappings ...) one body may hold, counted as JSON would
#: write them out: a job has a dozen. YAML's aliases let a file of a few hundred characters stand
#: for billions of them ("billion laughs": ``b: &b [*a, *a, ...]``), which the depth bound does
#: not limit, and neither walking them here nor ``json.dumps`` would end in a lifetime.
MAX_VALUES = 10_000


class _Walk:
    """What the search of one body has left: how many more values it may visit."""

    def __init__(self) -> None:
        self.left = MAX_VALUES


def check_fields(fields: Mapping[str, Any], where: str) -> None:
    """Raise :class:`UsageError` (``"{where}: {field} must be a finite number, got inf"``) for the
    first value in ``fields`` (searched depth first, in order) that JSON cannot carry; a nested
    value is named by its path (``gpu_types[1]``, ``a.b``). A value that contains itself, nests
    more than :data:`MAX_DEPTH` lists and mappings, or makes the body hold more than
    :data:`MAX_VALUES` values (a value shared through an alias counts each time it appears) is
    refused too, named by its field."""
    walk = _Walk()
    for name, value in fields.items():
        problem = _problem(value, str(name), str(name), (), walk)
        if problem is not None:
            raise UsageError(f"{where}: {problem}")


def _problem(value: Any, path: str, field: str, outer: tuple[int, ...], walk: _Walk) -> str | None:
    """Why ``value`` (at ``path`` within ``field``, inside the containers whose ids are ``outer``)
    cannot go in a JSON body, or ``None`` when it can; each value visited counts in ``walk``."""
    walk.left -= 1
    if walk.left < 0:
        return (
            f"{field} holds more than {MAX_VALUES:,} values"
            " (in YAML, perhaps aliases *a repeating an anchor &a)"
        )
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{path} must be a finite number, got {value}"
    if isinstance(value, list | tuple | Mapping):
        if id(value) in outer:
            return f"{field} contains itself (in YAML, an alias *a inside its own anchor &a)"
        if len(outer) >= MAX_DEPTH:
            return f"{field} nests more than {MAX_DEPTH} lists or mappings deep"
        outer = (*outer, id(value))
    if isinstance(value, list | tuple):
        return next(
            (
                p
                for i, item in enumerate(value)
                if (p := _problem(item, f"{path}[{i}]", field, outer, walk)) is not None
            ),
            None,
        )
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path} has a key {key!r} that is not a string"
            if (problem := _problem(item, f"{path}.{key}", field, outer, walk)) is not None:
                return problem
        return None
    return f"{path} is {_kind(value)}, which JSON cannot carry: give it as text (in YAML, quote it)"


def _kind(value: Any) -> str:
    """A few words for a value's type, with the value when it is short and readable."""
    if isinstance(value, datetime.datetime):  # before date: a datetime is a date too
        return f"a date and time ({value.isoformat(sep=' ')})"
    if isinstance(value, datetime.date):
        return f"a date ({value.isoformat()})"
    if isinstance(value, datetime.time):
        return f"a time of day ({value.isoformat()})"
    if isinstance(value, bytes | bytearray):
        return "binary data"
    if isinstance(value, set | frozenset):
        return "a set"
    return f"a {type(value).__name__}"
