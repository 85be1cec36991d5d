"""Dropping cached rows whose source changed: now, and again when the current transaction
commits.

Why twice: a request that reads between the delete and the commit still sees the old rows in
the database and may cache them again; the delete on commit removes that copy. An unreachable
cache is skipped (its entries then end with their lifetime). Used by the token cache
(:mod:`cluster.token_cache`) and the cluster facts (:mod:`cluster.cluster_facts`).
"""

from __future__ import annotations

from collections.abc import Sequence

from django.core.cache import cache
from django.db import transaction

from scheduling.service.health import CACHE_ERRORS


def forget_keys(keys: Sequence[str]) -> None:
    """Delete the cache ``keys`` now and when the current transaction commits (at once outside
    one); cache outages are ignored."""
    if not keys:
        return

    def delete() -> None:
        try:
            cache.delete_many(list(keys))
        except CACHE_ERRORS:
            pass

    delete()
    transaction.on_commit(delete, robust=True)
