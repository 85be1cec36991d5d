"""Bounded history: the job events of jobs that ended long ago are deleted.

A job's events (submitted, placed, started, progress, …) are read while it is pending or running
(generations, gang progress, requeue times) and by the dashboard for recent jobs. Those of a job
that finished, failed or was cancelled more than ``SHAREWISE_JOB_EVENT_RETENTION_DAYS`` ago serve
nobody; :func:`prune_job_events` deletes them (the job row, its outcome and times stay), in
batches so that no statement holds locks for long. Celery beat runs it hourly
(``sharewise.prune_job_events``).

Units: days for the setting, seconds elsewhere.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from cluster.models import Job, JobEvent

#: Events deleted per statement **(ours)**: a few ms of work each on PostgreSQL.
PRUNE_BATCH = 5000
#: Statuses a job never leaves (its events are no longer read by the service).
ENDED = (Job.Status.SUCCEEDED, Job.Status.FAILED, Job.Status.CANCELLED)


def retention_days() -> float:
    """Days a job's events outlive the job's end (``SHAREWISE_JOB_EVENT_RETENTION_DAYS``; 0: forever)."""
    return float(settings.SHAREWISE_JOB_EVENT_RETENTION_DAYS)


def prune_job_events(now: datetime | None = None, batch: int = PRUNE_BATCH) -> int:
    """Delete the events of jobs that ended before ``now − retention``; returns how many went.

    Pending and running jobs keep every event, whatever their age. Nothing is deleted when the
    retention is 0.
    """
    days = retention_days()
    if days <= 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    old = JobEvent.objects.filter(job__status__in=ENDED, job__finished_at__lt=cutoff)
    deleted = 0
    while True:
        ids = list(old.order_by().values_list("pk", flat=True)[:batch])
        if not ids:
            return deleted
        deleted += JobEvent.objects.filter(pk__in=ids).delete()[0]
