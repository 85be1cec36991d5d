"""What the API adds to the jobs it shows a tenant: why a pending job waits and when it may start
(the latest round's reason and estimate, :func:`scheduling.service.waiting_details`), and who
shares each GPU of a running job. Another tenant's jobs and name are redacted as on the dashboard
(:class:`cluster.visibility.JobNames`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from cluster.models import Job, Placement
from cluster.visibility import JobNames, Viewer
from scheduling import service


def describe_jobs(jobs: Sequence[Job], viewer: Viewer) -> None:
    """Set on each of ``jobs`` (their ``active_placements`` prefetched or not): ``pending_reason``
    and ``estimated_start_at`` (a datetime or ``None``) for a pending job, ``None`` otherwise; and
    on each active placement its ``partner``, the label of the other job on that GPU (``job ID
    NAME`` or ``another tenant's job``) or ``None``. Costs at most three queries for the page."""
    names = JobNames()
    pending = [job for job in jobs if job.status == Job.Status.PENDING]
    details = service.waiting_details(job.pk for job in pending)
    reasons = names.redact([details[job.pk].reason for job in pending], viewer)
    for job in jobs:
        job.pending_reason = None
        job.estimated_start_at = None
    for job, reason in zip(pending, reasons, strict=True):
        job.pending_reason = reason
        eta = details[job.pk].estimated_start_s
        job.estimated_start_at = None if eta is None else datetime.fromtimestamp(eta, UTC)
    placements = [p for job in jobs if job.status == Job.Status.RUNNING for p in job.current_placement()]
    for p in placements:
        p.partner = None
    if not placements:
        return
    others: dict[int, list[int]] = {}
    for gpu_id, job_id in Placement.objects.filter(
        active=True, gpu_id__in={p.gpu_id for p in placements}
    ).values_list("gpu_id", "job_id"):
        others.setdefault(gpu_id, []).append(job_id)
    names.load(j for ids in others.values() for j in ids)
    for p in placements:
        partner = next((j for j in others.get(p.gpu_id, ()) if j != p.job_id), None)
        if partner is not None:
            p.partner = names.label(partner, viewer)[0]
