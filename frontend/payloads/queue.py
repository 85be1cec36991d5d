"""The queue endpoint: waiting jobs in the order the policy considers them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import F, Max
from django.utils import timezone

from cluster.expressions import AnyOf
from cluster.models import Job, JobEvent
from frontend.payloads.clock import time_scale
from frontend.payloads.common import JobNames, Viewer, job_label, payload, table
from frontend.payloads.queue_order import pending_fingerprint, positions, queue_order
from frontend.payloads.rounds import RoundView, latest_rounds
from scheduling import figures


def queue_payload(viewer: Viewer, limit: int) -> dict[str, Any]:
    """Waiting jobs in policy order (position among all waiting jobs), how long each has waited
    (since submission or its last preemption/requeue), and the latest round's reason."""
    now = timezone.now()
    scale = time_scale()
    # the fingerprint before the round: the order is kept while both are those it was built for
    fingerprint = pending_fingerprint()
    if not fingerprint[0]:
        return payload(viewer, now, empty="No job is waiting.")
    rounds = latest_rounds(1)
    latest = rounds[0] if rounds else None
    order = queue_order(fingerprint, latest)
    if viewer.is_admin:
        total, shown = len(order.ranked), list(enumerate(order.ranked[:limit], 1))
    else:  # a member's own jobs, at their place among all
        mine = positions(order, viewer.tenant_id)
        total, shown = len(mine), list(mine[:limit])
    if not total:
        return payload(viewer, now, empty="No job of yours is waiting.")
    jobs, rows = _shown_jobs(shown, latest, viewer, now, scale.speedup)
    note = f"First {len(shown)} of {total} shown." if total > len(shown) else ""
    summary = f"{total} waiting job{'s' if total != 1 else ''}" + (
        f" (policy order from the round {scale.moment_words(latest.started_at)}, {latest.policy})."
        if latest
        else " (arrival order: no round has run yet)."
    )
    return payload(
        viewer,
        now,
        summary=summary,
        figures_={"queue": figures.queue_spec(jobs)},
        tables={
            "queue": table(
                [
                    "position",
                    "job",
                    "tenant",
                    "priority",
                    "GPUs",
                    "GPU types",
                    f"waiting {scale.unit}",
                    "reason",
                ],
                rows,
                " ".join(n for n in (note, scale.note) if n),
            )
        },
    )


def _shown_jobs(
    shown: Sequence[tuple[int, int]],
    latest: RoundView | None,
    viewer: Viewer,
    now: datetime,
    speedup: float = 1.0,
) -> tuple[list[dict[str, Any]], list[list[Any]]]:
    """The chart's jobs and the table's rows for ``shown`` (``(position, job id)``): label,
    tenant, priority (the job's, −100…100), GPUs, the GPU types it accepts (``"any"`` for none named),
    wait (s, since submission or the last
    preemption or requeue, at ``now``; times ``speedup`` for trace seconds) and the latest
    round's reason (redacted for ``viewer``)."""
    ids = [j for _, j in shown]
    # the ids bound as one array on PostgreSQL (AnyOf): 100 placeholders cost more to write
    details = {
        j: rest
        for j, *rest in Job.objects.filter(AnyOf(F("id"), ids)).values_list(
            "id", "name", "tenant__name", "priority", "gpus", "gpu_types", "submitted_at"
        )
    }
    requeued = dict(
        JobEvent.objects.filter(
            AnyOf(F("job_id"), ids), kind__in=[JobEvent.Kind.PREEMPTED, JobEvent.Kind.REQUEUED]
        )
        .values_list("job_id")
        .annotate(last=Max("at"))
    )
    shown_ids = set(ids)
    reasons = dict(w for w in latest.waits if w[0] in shown_ids) if latest else {}
    reasons = dict(zip(reasons, JobNames().redact(list(reasons.values()), viewer), strict=True))
    jobs, rows = [], []
    for position, job_id in shown:
        name, tenant, priority, gpus, gpu_types, submitted = details[job_id]
        since = max(submitted, requeued.get(job_id, submitted))
        wait_s = max(0.0, (now - since).total_seconds()) * speedup
        label = job_label(job_id, name)
        jobs.append(
            {
                "label": label,
                "tenant": tenant,
                "wait_s": wait_s,
                "gpus": gpus,
                "gpu_types": gpu_types,
                "position": position,
            }
        )
        reason = reasons.get(job_id, "not yet considered")
        types = ", ".join(gpu_types) or "any"
        rows.append([position, label, tenant, priority, gpus, types, round(wait_s), reason])
    return jobs, rows
