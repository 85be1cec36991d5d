"""Argument types the benchmarks share, so that bad input is a one-line parser error.

Each is an ``argparse`` ``type=``: it returns the parsed value or raises
``argparse.ArgumentTypeError`` with the reason, which argparse prints as ``error: argument
--x: …`` and exits 2.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def positive_int(text: str) -> int:
    """An integer ≥ 1."""
    value = _number(text, int)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """An integer ≥ 0."""
    value = _number(text, int)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (e.g. seconds)."""
    value = _number(text, float)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A finite number ≥ 0 (e.g. a noise's standard deviation)."""
    value = _number(text, float)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"must be a finite number ≥ 0, got {text}")
    return value


def fraction(text: str) -> float:
    """A number in ``[0, 1)`` (e.g. a relative error)."""
    value = _number(text, float)
    if not (0.0 <= value < 1.0):  # also false for NaN
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {text}")
    return value


def policy_name(text: str) -> str:
    """A registered scheduling policy (``scheduling.core.policies``)."""
    if str(REPO) not in sys.path:  # a benchmark runs as a script from benchmarks/
        sys.path.insert(0, str(REPO))
    from scheduling.core.policies import POLICY_NAMES

    if text not in POLICY_NAMES:
        raise argparse.ArgumentTypeError(f"unknown policy {text!r}; one of {', '.join(POLICY_NAMES)}")
    return text


def policy_names(text: str) -> list[str]:
    """Comma-separated registered policies (:func:`policy_name` each), at least one."""
    names = [name for name in text.split(",") if name]
    if not names:
        raise argparse.ArgumentTypeError(f"names no policy: {text!r}")
    return [policy_name(name) for name in names]


def names_among(known: list[str]) -> Callable[[str], list[str]]:
    """An argument type: comma-separated names, at least one, each one of ``known``."""

    def parse(text: str) -> list[str]:
        names = [name for name in text.split(",") if name]
        unknown = [name for name in names if name not in known]
        if not names or unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(map(repr, unknown))}; one or more of {', '.join(known)}"
                if unknown
                else f"names none: {text!r}; one or more of {', '.join(known)}"
            )
        return names

    return parse


def database_url(text: str) -> str:
    """A ``postgres://`` / ``postgresql://`` or ``sqlite:///`` URL."""
    if not text.startswith(("postgres://", "postgresql://", "sqlite:///")):
        raise argparse.ArgumentTypeError(
            f"expected postgres://user@host:port/name or sqlite:///path, got {text!r}"
        )
    return text


def redis_url(text: str) -> str:
    """A ``redis://`` / ``rediss://`` URL (``redis://host:port/db``)."""
    if not text.startswith(("redis://", "rediss://")):
        raise argparse.ArgumentTypeError(f"expected redis://host:port/db, got {text!r}")
    return text


def _number(text: str, kind: type) -> int | float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def module_only(path: str, doc: str | None) -> int:
    """What a module of ``benchmarks/`` that is no benchmark does when run as a script (``python
    benchmarks/sampler.py --help``): ``--help`` prints its usage and the first line of its
    docstring ``doc``, and says it runs nothing; without it, that one line. Returns the exit
    status, 0."""
    name = Path(path).name
    what = (doc or "").strip().split("\n\n")[0].replace("\n", " ")
    note = f"{name} is a module the benchmarks import, not a benchmark: it runs nothing"
    argparse.ArgumentParser(prog=name, description=f"{what} ({note}.)").parse_args()
    print(note)
    return 0


if __name__ == "__main__":
    raise SystemExit(module_only(__file__, __doc__))
