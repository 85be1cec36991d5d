"""Celery tasks: thin wrappers around :mod:`scheduling.service` (Celery autodiscovers this module).

``sharewise.run_round`` runs one :func:`~scheduling.service.tick`: the heartbeat check, then a
round. It is safe under at-least-once delivery (``acks_late``: a worker killed mid-round leaves
the message to be delivered again): a round's writes are one transaction (all or nothing), the
lease lets one round run at a time, and a round decides from the database as it is, so running
it twice places nothing twice. It is sent by Celery beat every ``SHAREWISE_ROUND_INTERVAL_S``
and, debounced, after submissions and completions (:func:`scheduling.service.request_round`).

``sharewise.check_heartbeats`` runs the heartbeat check alone, every
``SHAREWISE_HEARTBEAT_INTERVAL_S`` (Celery beat), so a silent node is noticed between rounds;
``sharewise.prune_job_events`` deletes old job events (``SHAREWISE_JOB_EVENT_RETENTION_DAYS``) hourly.
"""

from __future__ import annotations

from celery import shared_task

from scheduling import service


@shared_task(name=service.ROUND_TASK, acks_late=True, ignore_result=True)
def run_round(policy: str | None = None) -> int | None:
    """Run one tick (``policy``: a registry name; default setting ``SHAREWISE_POLICY``).

    Returns the recorded round's id, or ``None`` when another round held the lease or nothing
    new was recorded (the beat schedule brings the next round anyway).
    """
    # From here on a new submission must ask for another round: this one may have read the
    # database before it.
    service.clear_round_request()
    record = service.tick(policy=policy).round
    return record.pk if record is not None else None


@shared_task(name="sharewise.check_heartbeats", ignore_result=True)
def check_heartbeats() -> dict[str, list[int]]:
    """Mark silent nodes unhealthy and requeue their jobs; ``{node: [job ids]}`` (Celery beat)."""
    return service.check_heartbeats()


@shared_task(name="sharewise.prune_job_events", ignore_result=True)
def prune_job_events() -> int:
    """Delete the events of jobs that ended before the retention (Celery beat, hourly); how many."""
    return service.prune_job_events()
