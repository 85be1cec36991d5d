"""Celery tasks: thin wrappers around :mod:`scheduling.services`.

``sharewise.run_round`` runs one scheduling round. It is safe under at-least-once delivery
(``acks_late``: a worker killed mid-round leaves the message to be delivered again): a round's
writes are one transaction (all or nothing), the lease lets one round run at a time, and a round
decides from the database as it is, so running it twice places nothing twice.

:func:`request_round` asks for a round soon after a submission or a completion, debounced: one
round per ``SHAREWISE_ROUND_DEBOUNCE_S`` seconds at most, however many jobs arrive.
"""

from __future__ import annotations

import logging

from celery import shared_task
from django.core.cache import cache
from django.db import transaction

from scheduling import services

log = logging.getLogger(__name__)

#: Cache key present while a requested round is pending (debounce window).
ROUND_REQUEST_KEY = "sharewise:round-requested"
DEFAULT_DEBOUNCE_S = 2.0


@shared_task(name="sharewise.run_round", acks_late=True, ignore_result=True)
def run_round(policy: str | None = None) -> int | None:
    """Run one round (``policy``: a registry name; default setting ``SHAREWISE_POLICY``).

    Returns the recorded round's id, or ``None`` when another round held the lease or nothing
    new was recorded (the beat schedule brings the next round anyway).
    """
    # From here on a new submission must ask for another round: this one may have read the
    # database before it.
    cache.delete(ROUND_REQUEST_KEY)
    record = services.run_round(policy=policy)
    return record.pk if record is not None else None


def request_round(delay_s: float | None = None) -> bool:
    """Ask for a round ``delay_s`` seconds (default ``SHAREWISE_ROUND_DEBOUNCE_S``, 2 s) after the
    current transaction commits, unless one is already requested; returns whether this call
    asked. Without a broker (the embedded default) it does nothing and returns ``False``: rounds
    then come from ``manage.py run_scheduler`` or the demo, never from inside a request.
    """
    if not services.broker_configured():
        return False
    delay = float(
        delay_s if delay_s is not None else services.setting("SHAREWISE_ROUND_DEBOUNCE_S", DEFAULT_DEBOUNCE_S)
    )
    # cache.add is atomic (Redis SET NX): of many concurrent submissions, one enqueues the round.
    if not cache.add(ROUND_REQUEST_KEY, 1, timeout=max(1, round(delay))):
        return False
    transaction.on_commit(lambda: run_round.apply_async(countdown=delay), robust=True)
    return True
