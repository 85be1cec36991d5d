"""Entries of the shared cache one request needs, read in one round trip.

Why: a job submission reads two entries, the token's row (:mod:`cluster.token_cache`) and the
cluster's facts (:mod:`cluster.cluster_facts`): on Redis two ``GET`` commands, two round trips,
each with its command packed and its reply parsed (together about a seventh of a POST's CPU,
docs/PERFORMANCE.md §8). ``cache.get_many`` reads both with one ``MGET``.

:func:`read_together` reads the keys and hands back a getter with ``cache.get``'s contract,
which each entry's reader takes in place of ``cache.get``: each keeps its one key and its own
rules for a miss, a cache that does not answer and a cache turned off.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from django.core.cache import cache

from scheduling.service.health import CACHE_ERRORS

#: ``cache.get``'s contract: the value of a key, ``None`` when absent; raises what the cache raises.
Getter = Callable[[str], Any]


def read_together(keys: Sequence[str | None]) -> Getter:
    """A :data:`Getter` for ``keys`` (a ``None`` among them: an entry whose reader does not ask
    the cache, its cache off), all read now by one ``cache.get_many``. The getter returns a
    key's value, or ``None`` when it was absent; when the read failed with one of
    :data:`~scheduling.service.health.CACHE_ERRORS` (Redis unreachable) it raises that error for
    each of the keys, as ``cache.get`` of each would have; a key not among ``keys`` is read by
    ``cache.get`` then. With fewer than two keys nothing is read ahead: ``cache.get`` itself.
    Any other error of the read (not an outage) is raised here."""
    wanted = [key for key in keys if key is not None]
    if len(wanted) < 2:
        return cache.get
    failed: Exception | None = None
    try:
        values = cache.get_many(wanted)
    except CACHE_ERRORS as exc:
        failed, values = exc, {}

    def get(key: str) -> Any:
        if key not in wanted:
            return cache.get(key)
        if failed is not None:
            raise failed
        return values.get(key)

    return get
