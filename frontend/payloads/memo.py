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
from collections.abc import Callable, Hashable, Iterator, Mapping
from datetime import datetime
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from frontend.payloads.common import iso

#: Bodies kept per process (keys: endpoint and viewer's tenant, so a few per tenant).
MAX_ENTRIES = 64
#: Stands for ``generated_at`` in a kept body's JSON, which is then written once and spliced.
_PLACEHOLDER = "generated-at-placeholder-7f3a9c"

# key → (rows, the body's JSON before and after its generated_at). Bytes, not the body's dicts:
# tens of thousands of kept objects would make every full garbage collection walk them (p95
# of the endpoints polled after them doubled when a round changed something every request).
_kept: OrderedDict[Hashable, tuple[Any, tuple[bytes, bytes] | None]] = OrderedDict()


def dumps(body: Mapping[str, Any]) -> bytes:
    """``body`` as the endpoints send it: compact JSON (no spaces after separators: the
    timeline's 2,000 bars are about a tenth smaller), Django's encoder (dates, decimals)."""
    return json.dumps(body, cls=DjangoJSONEncoder, separators=(",", ":")).encode()


class KeptBody(Mapping[str, Any]):
    """A body handed out by :func:`built_from`: its JSON (:meth:`json`) is the kept one with
    this ``generated_at`` spliced in; read as a mapping it is the body (decoded from that JSON
    on first use when it was kept from an earlier request)."""

    def __init__(self, parts: tuple[bytes, bytes] | None, generated_at: str, body: dict[str, Any] | None):
        self._parts, self._generated_at, self._body = parts, generated_at, body

    def json(self) -> bytes:
        """:func:`dumps` of this body (the same bytes)."""
        if self._parts is None:
            return dumps(self._dict())
        prefix, suffix = self._parts
        return b"".join((prefix, json.dumps(self._generated_at).encode(), suffix))

    def _dict(self) -> dict[str, Any]:
        if self._body is None:
            self._body = json.loads(self.json())
        return {**self._body, "generated_at": self._generated_at}

    def __getitem__(self, key: str) -> Any:
        return self._dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())


def _parts(body: dict[str, Any]) -> tuple[bytes, bytes] | None:
    """The JSON of ``body`` around its ``generated_at``; ``None`` when the placeholder also
    appears in the body's text (then never spliced)."""
    split = dumps({**body, "generated_at": _PLACEHOLDER}).split(f'"{_PLACEHOLDER}"'.encode())
    return (split[0], split[1]) if len(split) == 2 else None


def built_from(key: Hashable, rows: Any, now: datetime, build: Callable[[], dict[str, Any]]) -> KeptBody:
    """The body for ``key`` built by ``build()`` from ``rows`` (everything the body depends on
    besides ``key``: query results, ids), or the one kept for ``key`` when it was built from
    rows equal to ``rows``; either way with ``generated_at`` = ``now``."""
    kept = _kept.get(key)
    if kept is not None and kept[0] == rows and kept[1] is not None:
        _kept.move_to_end(key)
        return KeptBody(kept[1], iso(now), None)
    body = build()
    parts = _parts(body)
    _kept[key] = (rows, parts)
    while len(_kept) > MAX_ENTRIES:
        _kept.popitem(last=False)
    return KeptBody(parts, iso(now), body)


def forget() -> None:
    """Drop every kept body (for tests that compare a kept body with one built afresh)."""
    _kept.clear()
