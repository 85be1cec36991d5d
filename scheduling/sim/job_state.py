"""A job's mutable state inside the simulator, and the copy of a job a policy sees (pure Python)."""

from __future__ import annotations

import math
from dataclasses import fields

from scheduling.core.types import Job, Placement


class JobState:
    """Mutable bookkeeping of one job inside the simulator (never shown to a policy).

    Progress ``done`` (iterations, fractional), ``attained`` (GPU-s held), ``charged`` (GPU-s
    charged, docs/FAIRNESS.md), ``shared_s``/``queue_s`` (s), the current ``placement`` with its
    iteration time ``iter_s`` (s), rate (iterations/s), slowdown ``xi`` and charge rate (GPU-s per
    s); ``last``: when the counters were last brought up to date (s); ``resume_at``: end of the
    restart cost (s); ``version``: invalidates stale completion events.
    """

    __slots__ = (
        "base",
        "view",
        "done",
        "attained",
        "charged",
        "shared_s",
        "queued_since",
        "queue_s",
        "first_start",
        "placement",
        "iter_s",
        "rate",
        "xi",
        "charge_rate",
        "last",
        "resume_at",
        "mark",
        "mark_done",
        "version",
        "preemptions",
    )

    def __init__(self, job: Job) -> None:
        self.base = job
        self.view = job  # what a policy sees while the job is pending
        self.done = job.iterations_done
        self.attained = job.attained_gpu_s
        self.charged = 0.0
        self.shared_s = 0.0
        self.queued_since = job.waiting_since
        self.queue_s = 0.0
        self.first_start = math.nan
        self.placement: Placement | None = None
        self.iter_s = job.iter_time_s
        self.rate = 0.0
        self.xi = 1.0
        self.charge_rate = 0.0
        self.last = 0.0
        self.resume_at = 0.0
        self.mark = 0.0  # last start or re-plan (s), and the progress then (fidelity's overhead charge)
        self.mark_done = 0.0
        self.version = 0
        self.preemptions = 0


_JOB_FIELDS = (
    "id",
    "tenant",
    "model",
    "batch_size",
    "gpus",
    "iterations",
    "submit_time",
    "iter_time_s",
    "memory_mb",
    "iterations_done",
    "attained_gpu_s",
    "queued_since",
    "priority",
    "sharing_allowed",
    "gpu_types",
)
if tuple(f.name for f in fields(Job)) != _JOB_FIELDS:  # pragma: no cover - guards the contract
    raise ImportError(
        "scheduling.core.types.Job changed its fields: update scheduling.sim.job_state.with_progress"
    )


def with_progress(job: Job, iterations_done: float, attained_gpu_s: float, queued_since: float | None) -> Job:
    """``dataclasses.replace(job, iterations_done=…, attained_gpu_s=…, queued_since=…)``, written
    out because it runs for every running job in every round and ``replace`` is ~6× slower; the
    field list is checked against :class:`Job` at import time."""
    return Job(
        job.id,
        job.tenant,
        job.model,
        job.batch_size,
        job.gpus,
        job.iterations,
        job.submit_time,
        job.iter_time_s,
        job.memory_mb,
        iterations_done,
        attained_gpu_s,
        queued_since,
        job.priority,
        job.sharing_allowed,
        job.gpu_types,
    )
