"""A round soon after a submission or a completion, debounced: one round per
``SHAREWISE_ROUND_DEBOUNCE_S`` seconds at most, however many jobs arrive.

The round itself is the Celery task ``sharewise.run_round`` (``scheduling.tasks``); it is sent by
name, so the service does not depend on its Celery wrapper.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from scheduling.service.dispatch import broker_configured
from scheduling.service.health import CACHE_ERRORS

log = logging.getLogger(__name__)

#: Name of the Celery task that runs one round (``scheduling.tasks.run_round``).
ROUND_TASK = "sharewise.run_round"
#: Cache key present while a requested round is pending (debounce window).
ROUND_REQUEST_KEY = "sharewise:round-requested"


def request_round(delay_s: float | None = None) -> bool:
    """Ask for a round ``delay_s`` seconds (default ``SHAREWISE_ROUND_DEBOUNCE_S``) after the
    current transaction commits, unless one is already requested; returns whether this call
    asked. Without a broker (the embedded default) it does nothing and returns ``False``: rounds
    then come from ``manage.py run_scheduler`` or the demo, never from inside a request. With the
    cache unreachable it asks for nothing either (logged): the periodic round comes anyway, and
    the caller's own work (an agent's event, a submission) must not fail for a debounce.
    """
    if not broker_configured():
        return False
    delay = float(delay_s if delay_s is not None else settings.SHAREWISE_ROUND_DEBOUNCE_S)
    # cache.add is atomic (Redis SET NX): of many concurrent submissions, one enqueues the round.
    try:
        if not cache.add(ROUND_REQUEST_KEY, 1, timeout=max(1, round(delay))):
            return False
    except CACHE_ERRORS as exc:
        log.warning("round not requested: cache unreachable (%s); the periodic round comes anyway", exc)
        return False
    transaction.on_commit(lambda: send_round_task(delay), robust=True)
    return True


def clear_round_request() -> None:
    """End the debounce window: called as a requested round starts, so that a submission from
    now on asks for another round (this one may have read the database before it). An unreachable
    cache is logged and skipped: the round itself does not need it."""
    try:
        cache.delete(ROUND_REQUEST_KEY)
    except CACHE_ERRORS as exc:
        log.warning("round request not cleared: cache unreachable (%s)", exc)


def send_round_task(countdown_s: float) -> None:
    """Enqueue task ``sharewise.run_round`` to run ``countdown_s`` seconds from now (its queue
    from ``CELERY_TASK_ROUTES``)."""
    from config.celery import app

    app.send_task(ROUND_TASK, countdown=countdown_s)
