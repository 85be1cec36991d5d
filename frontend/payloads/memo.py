"""The last body an endpoint built, reused while the rows it was built from are the same.

A payload whose body is a pure function of what its queries returned (and of who is looking)
need not be built again when they return the same rows: the endpoint still runs every query,
compares the rows with those of the body it kept (``==`` on the rows themselves, not a hash, so
a change is never mistaken for none) and builds only when they differ. Only ``generated_at`` is
new. One entry per key in each process (:data:`MAX_ENTRIES` at most, the oldest dropped first);
nothing is shared between processes, so nothing can be stale across them.

Used where a body does not depend on the time of the request (the cluster map: the active
placements, the GPUs and the latest round decide it; a round's record never changes once
written). An endpoint whose figures slide with now (timeline, fairness, queue) cannot use it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Hashable
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from frontend.payloads.common import iso

#: Bodies kept per process (keys: endpoint and viewer's tenant, so a few per tenant).
MAX_ENTRIES = 64
#: Stands for ``generated_at`` in a kept body's JSON, which is then written once and spliced.
_PLACEHOLDER = "generated-at-placeholder-7f3a9c"

_kept: OrderedDict[Hashable, tuple[Any, dict[str, Any], list[tuple[bytes, bytes] | None]]] = OrderedDict()


def dumps(body: dict[str, Any]) -> bytes:
    """``body`` as the endpoints send it: compact JSON (no spaces after separators: the
    timeline's 2,000 bars are about a tenth smaller), Django's encoder (dates, decimals)."""
    return json.dumps(body, cls=DjangoJSONEncoder, separators=(",", ":")).encode()


class KeptBody(dict):  # type: ignore[type-arg]
    """A body handed out by :func:`built_from`: a dict like any other, whose JSON
    (:meth:`json`) is the kept body's, written once, with this ``generated_at`` spliced in."""

    def __init__(self, body: dict[str, Any], generated_at: str, parts: list[tuple[bytes, bytes] | None]):
        super().__init__(body)
        self["generated_at"] = generated_at
        self._parts = parts

    def json(self) -> bytes:
        """:func:`dumps` of this body, the same bytes, from the JSON written for the first."""
        if self._parts[0] is None:
            split = dumps({**self, "generated_at": _PLACEHOLDER}).split(f'"{_PLACEHOLDER}"'.encode())
            if len(split) != 2:  # the placeholder also inside the body's text: never spliced
                return dumps(self)
            self._parts[0] = (split[0], split[1])
        prefix, suffix = self._parts[0]
        return b"".join((prefix, dumps(self["generated_at"]), suffix))


def built_from(key: Hashable, rows: Any, now: datetime, build: Callable[[], dict[str, Any]]) -> KeptBody:
    """The body for ``key`` built by ``build()`` from ``rows`` (everything the body depends on
    besides ``key``: query results, ids), or the one kept for ``key`` when it was built from
    rows equal to ``rows``; either way with ``generated_at`` = ``now``. The answer is a new
    dict whose figures and tables are those kept: read them, never change them."""
    kept = _kept.get(key)
    if kept is not None and kept[0] == rows:
        _kept.move_to_end(key)
    else:
        kept = _kept[key] = (rows, build(), [None])
        while len(_kept) > MAX_ENTRIES:
            _kept.popitem(last=False)
    return KeptBody(kept[1], iso(now), kept[2])


def forget() -> None:
    """Drop every kept body (for tests that compare a kept body with one built afresh)."""
    _kept.clear()
