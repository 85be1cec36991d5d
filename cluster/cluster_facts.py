"""The cluster's bounds a job submission is checked against, kept a few seconds in the cache.

Every submission needs the largest gang (schedulable GPUs), the largest schedulable GPU's memory
(MB) and whether a job without a command could run (the agents' executors): three queries that
change only when nodes or GPUs do. They are read together, kept in the cache for
``SHAREWISE_CLUSTER_FACTS_CACHE_S`` seconds (default 5; 0: read every time) and deleted when a
node or a GPU is saved or deleted (signals) and when a heartbeat or the health check changes a
node's status or executor (:func:`forget`), at once and again at commit. What a change in another
web process does not reach (a per-process cache, a ``QuerySet.update()`` elsewhere) is at most
that many seconds old, the same as a submission that arrived just before the change: a bound
only refuses jobs that could never run, and the round re-checks every job against the cluster
it then has.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db.models.signals import post_delete, post_save

from cluster import models, runnable
from cluster.cache_forget import forget_keys
from cluster.cache_reads import Getter
from scheduling.service.health import CACHE_ERRORS

#: Cache key of the facts.
KEY = "sharewise:cluster-facts"
#: The facts, by the names ``JobSerializer.cluster_fact`` uses, and what reads each.
READERS = {
    "largest_gang": models.largest_gang,
    "missing_command_refusal": runnable.missing_command_refusal,
    "largest_gpu_memory_mb:": models.largest_gpu_memory_mb,  # of any type (no gpu_types)
}


def lifetime_s() -> float:
    """Seconds the facts stay cached (setting ``SHAREWISE_CLUSTER_FACTS_CACHE_S``, default 5)."""
    return float(getattr(settings, "SHAREWISE_CLUSTER_FACTS_CACHE_S", 5.0))


def cache_key() -> str | None:
    """The facts' cache key (:data:`KEY`), or ``None`` when they are not cached (:func:`lifetime_s`
    0: :func:`current` reads them every time)."""
    return KEY if lifetime_s() > 0 else None


def current(get: Getter | None = None) -> dict[str, Any]:
    """The facts of :data:`READERS`: ``{"largest_gang": GPUs, "missing_command_refusal": text or
    None, "largest_gpu_memory_mb:": MB}``, from the cache (no query) or read now (3 queries) and
    cached. An unreachable cache is skipped. ``get``: what reads the cache in place of
    ``cache.get``, the :func:`cluster.cache_reads.read_together` of the request's entries with
    :func:`cache_key` among them (one round trip for them all)."""
    key = cache_key()
    if key is not None:
        try:
            facts = (get or cache.get)(key)
        except CACHE_ERRORS:
            facts, key = None, None
        if facts is not None:
            return dict(facts)
    facts = {name: read() for name, read in READERS.items()}
    if key is not None:
        try:
            cache.set(key, facts, timeout=lifetime_s())
        except CACHE_ERRORS:
            pass
    return facts


def forget() -> None:
    """Delete the cached facts now and when the current transaction commits (a change of the
    nodes or GPUs is visible to the next submission that reads them)."""
    forget_keys([KEY])


def _changed(sender: Any, **kwargs: Any) -> None:
    forget()


def connect() -> None:
    """Forget the facts whenever a node or a GPU is saved or deleted (``ClusterConfig.ready``)."""
    for model in (models.Node, models.GPU):
        name = model.__name__
        post_save.connect(_changed, sender=model, dispatch_uid=f"cluster_facts.{name}.saved")
        post_delete.connect(_changed, sender=model, dispatch_uid=f"cluster_facts.{name}.deleted")
