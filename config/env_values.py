"""Typed values of environment settings, read strictly: a value that is not what the setting
takes raises ``ImproperlyConfigured`` naming the setting, what it accepts and what it got, e.g.
``SHAREWISE_HEARTBEAT_TIMEOUT_S must be a number of seconds > 0; got 'abc'``.

Why not django-environ's casts: its float cast (0.14) strips every character that is not a digit,
a sign or a separator before converting, so ``1e2`` read as 12.0, ``0x10`` as 10.0, ``1,000`` as
1.0 and ``5s`` as 5.0; its bool cast reads any unknown word as false. Numbers here are Python's
own ``float()`` / ``int()`` of the raw text (surrounding spaces and ``_`` digit separators
allowed, as Python allows them; ``1e2`` is 100.0; ``nan`` and ``inf`` refused), then checked
against the setting's bounds.

The raw text comes from ``os.environ`` (``config/settings.py`` has read ``.env`` into it first).
An unset setting takes its default, which is never checked (it is ours).
"""

from __future__ import annotations

import ipaddress
import math
import os
from collections.abc import Sequence

from django.core.exceptions import ImproperlyConfigured

#: Spellings of a boolean setting, compared after stripping and lower-casing.
TRUE_WORDS = ("1", "true", "yes", "on", "y")
FALSE_WORDS = ("0", "false", "no", "off", "n")

#: Seconds of a DRF throttle rate's period, by the period's first letter
#: (rest_framework.throttling.SimpleRateThrottle.parse_rate: "600/min" is 600 per 60 s).
RATE_PERIODS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _bounds_text(minimum: float | None, maximum: float | None, above: float | None) -> str:
    """' from 0 to 3600', ' > 0', ' ≥ 1' or '' for the accepted range."""
    if minimum is not None and maximum is not None:
        return f" from {minimum:g} to {maximum:g}"
    parts = []
    if above is not None:
        parts.append(f"> {above:g}")
    if minimum is not None:
        parts.append(f">= {minimum:g}")
    if maximum is not None:
        parts.append(f"<= {maximum:g}")
    return (" " + " and ".join(parts)) if parts else ""


def parse_number(
    text: str,
    *,
    whole: bool = False,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    unit: str = "",
) -> float:
    """``text`` as a finite float (``whole``: an int) within ``minimum`` ≤ x ≤ ``maximum`` and
    x > ``above`` (each bound optional). Raises ``ValueError`` whose message says what is
    accepted, e.g. ``a number of seconds > 0`` (``unit`` = "seconds")."""
    what = ("a whole number" if whole else "a number") + (f" of {unit}" if unit else "")
    what += _bounds_text(minimum, maximum, above)
    try:
        value: float = int(text) if whole else float(text)
    except ValueError:
        raise ValueError(what) from None
    if not math.isfinite(value):
        raise ValueError(what)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(what)
    if above is not None and not value > above:
        raise ValueError(what)
    return value


def parse_rate(text: str) -> tuple[int, int]:
    """A DRF throttle rate ``N/period`` → ``(N requests, period in s)``, by DRF's own rule
    (``SimpleRateThrottle.parse_rate``: an int, ``/``, a period whose first letter is s, m, h or
    d), with N ≥ 1 (0 or fewer refuses every request). Raises ``ValueError``."""
    what = "a rate N/s, N/m, N/h or N/d (e.g. 600/min) with N >= 1"
    count, slash, period = text.partition("/")
    try:
        requests = int(count)
    except ValueError:
        raise ValueError(what) from None
    if not slash or "/" in period or period[:1] not in RATE_PERIODS_S or requests < 1:
        raise ValueError(what)
    return requests, RATE_PERIODS_S[period[0]]


def parse_bool(text: str) -> bool:
    """``1/true/yes/on/y`` → True, ``0/false/no/off/n`` → False (any case, spaces ignored).
    Raises ``ValueError`` for anything else."""
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError("true or false (1/0, yes/no, on/off)")


def _refuse(name: str, raw: str, what: str) -> ImproperlyConfigured:
    return ImproperlyConfigured(f"{name} must be {what}; got {raw!r}")


def number(
    name: str,
    default: float | None,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    above: float | None = None,
    unit: str = "",
) -> float | None:
    """Setting ``name`` as a float (:func:`parse_number`), ``default`` when unset. Raises
    ``ImproperlyConfigured``."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return parse_number(raw, minimum=minimum, maximum=maximum, above=above, unit=unit)
    except ValueError as exc:
        raise _refuse(name, raw, str(exc)) from None


def seconds(name: str, default: float, *, minimum: float | None = None, above: float | None = None) -> float:
    """Setting ``name`` as a finite number of seconds, ``default`` when unset; give ``minimum``
    (``0``: ≥ 0) or ``above`` (``0``: > 0). Raises ``ImproperlyConfigured``."""
    value = number(name, default, minimum=minimum, above=above, unit="seconds")
    assert value is not None  # the default is a number
    return value


def whole(name: str, default: int, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """Setting ``name`` as an int (Python's ``int()`` of the text: no ``1e3``, no ``0x10``),
    ``default`` when unset. Raises ``ImproperlyConfigured``."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return int(parse_number(raw, whole=True, minimum=minimum, maximum=maximum))
    except ValueError as exc:
        raise _refuse(name, raw, str(exc)) from None


def numbers(name: str, default: list[float], *, above: float | None = None) -> list[float]:
    """Setting ``name`` as comma-separated floats (:func:`parse_number` each; spaces allowed),
    ``default`` when unset. Raises ``ImproperlyConfigured``."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    try:
        return [parse_number(part, above=above) for part in raw.split(",")]
    except ValueError as exc:
        raise _refuse(name, raw, f"comma-separated numbers, each {exc}") from None


def boolean(name: str, default: bool) -> bool:
    """Setting ``name`` as a bool (:func:`parse_bool`), ``default`` when unset. Raises
    ``ImproperlyConfigured``."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        return parse_bool(raw)
    except ValueError as exc:
        raise _refuse(name, raw, str(exc)) from None


def choice(name: str, default: str, choices: Sequence[str], *, fold_case: bool = False) -> str:
    """Setting ``name`` as one of ``choices`` (``fold_case``: compared stripped and lower-cased,
    returned so), ``default`` when unset. Raises ``ImproperlyConfigured``."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower() if fold_case else raw
    if value not in choices:
        raise _refuse(name, raw, f"one of {', '.join(choices)}")
    return value


def rate(name: str, default: str) -> str:
    """Setting ``name`` as a DRF throttle rate (:func:`parse_rate`), the text itself (DRF parses
    it again per request), ``default`` when unset. Raises ``ImproperlyConfigured``."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        parse_rate(raw)
    except ValueError as exc:
        raise _refuse(name, raw, str(exc)) from None
    return raw


def networks(name: str, default: list[str]) -> list[str]:
    """Setting ``name`` as comma-separated IP addresses or CIDR networks (``127.0.0.1``,
    ``10.0.0.0/8``, ``::1``; host bits allowed, as ``ipaddress.ip_network(strict=False)`` reads
    them), spaces around each ignored, ``default`` when unset. Raises ``ImproperlyConfigured``."""
    raw = os.environ.get(name)
    if raw is None:
        return list(default)
    entries = [part.strip() for part in raw.split(",") if part.strip()]
    for entry in entries:
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise _refuse(
                name, raw, f"comma-separated IP addresses or CIDR networks ({entry!r} is neither)"
            ) from None
    return entries
