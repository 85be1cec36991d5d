"""What a round needs that the database does not store as such: a job's exclusive iteration time
when the submitter gave none, and the GPU service a run adds when it ends.

Units: seconds (s), GPUs, GPU-seconds (GPU-s).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import F, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce, Greatest

from cluster.expressions import EpochSeconds
from cluster.models import Placement
from scheduling.core import types as core
from scheduling.core.profiles import ProfileError, split_gavel_job_type

#: Exclusive iteration time assumed for a model the profile does not know (s) **(ours)**.
UNKNOWN_MODEL_ITER_TIME_S = 1.0


def estimate_iter_time_s(profile: core.Profile, model: str, batch_size: int, gpus: int) -> float:
    """Exclusive time of one iteration at global batch ``batch_size`` on ``gpus`` GPUs (s),
    from the profile's measured throughputs, for a job that did not give its own.

    The model maps to the nearest measured Gavel job type ``T`` at batch ``b_T``
    (``TableProfile.job_type_for``); one step of ``T`` on ``gpus`` GPUs takes
    ``1 / isolated_throughput(T, gpus)`` s for ``b_T`` samples, so an iteration done as
    ``batch_size / b_T`` micro-steps of ``b_T`` takes ``t(b_T) = (batch_size / b_T) / steps_per_s``,
    and ``t(B) = t(b_T) · sps(b_T) / sps(B)`` (MODEL.md §1, the profile's samples/s curve; the
    ratio is ``profile.iter_time_s`` of a job with ``t(B) = 1``). A model of unknown family, or a
    profile without throughputs, gets :data:`UNKNOWN_MODEL_ITER_TIME_S` **(ours)**.
    """
    job_type_for = getattr(profile, "job_type_for", None)
    throughput = getattr(profile, "isolated_throughput", None)
    job_type = job_type_for(model, batch_size) if job_type_for else None
    if job_type is None or throughput is None:
        return UNKNOWN_MODEL_ITER_TIME_S
    try:
        steps_per_s = throughput(job_type, gpus)
    except ProfileError:
        return UNKNOWN_MODEL_ITER_TIME_S
    type_batch = split_gavel_job_type(job_type)[1]
    if type_batch is None:  # an RL job type: one step is one iteration
        return 1.0 / steps_per_s
    unit = core.Job(0, "", model, batch_size, gpus, 1, 0.0, 1.0)
    ratio = profile.iter_time_s(unit, type_batch)  # sps(B) / sps(b_T)
    return (batch_size / type_batch) / steps_per_s / ratio


def attained_after_run(now: datetime) -> Any:
    """``Job.attained_gpu_s`` once the job's current run ends at ``now`` without finishing
    (preempted, requeued), as an expression for the UPDATE that ends the run, so the service
    is added in that same statement (nothing half-written): stored + ``gpus × max(0, now − start)``
    GPU-s, where ``start`` is the ``created_at`` of the job's earliest active placement (a round
    writes all rows of a start at once; ``started_at`` is the first start ever, wrong after a
    preemption). Evaluate it before the run's placements become inactive; a job with no active
    placement keeps its stored value. The database computes the seconds (:class:`EpochSeconds`:
    µs on PostgreSQL, ms on SQLite)."""
    now_s = Value(now.timestamp())
    first = Placement.objects.filter(job_id=OuterRef("pk"), active=True).order_by("created_at")
    start_s = Coalesce(EpochSeconds(Subquery(first.values("created_at")[:1])), now_s)
    return F("attained_gpu_s") + F("gpus") * Greatest(Value(0.0), now_s - start_s)
