"""Tiresias: discretised two-level least-attained-service (2D-LAS) on attained GPU-time.

Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019 —
the discretised 2D-LAS scheduler (MODEL.md §4 baseline), preemptive, exclusive GPUs.
"""

from __future__ import annotations

from scheduling.core.placement import preemptive_exclusive
from scheduling.core.types import Job, JobId, Profile, RoundDecisions, Snapshot

QUEUE_THRESHOLD_GPU_S = 3_200.0
"""A job whose attained service (GPU-seconds: GPUs × seconds run) is below this is in the high
queue; at or above it, the low queue. Ours, within the range of Tiresias' evaluation."""

STARVATION_FACTOR = 1.0
"""A pending job of the low queue that has waited longer than ``STARVATION_FACTOR ×`` its executed
time (wall seconds run = attained GPU-seconds ÷ GPUs) is promoted to the high queue (Tiresias'
starvation guard, MODEL.md §4: "promoted back after waiting longer than it has run")."""


def queue_of(job: Job, now: float, pending: bool) -> int:
    """0 (high) or 1 (low): the job's Tiresias queue at time ``now`` (s).

    High: attained service < :data:`QUEUE_THRESHOLD_GPU_S`, or — for a pending job — waiting
    (since ``job.waiting_since``) longer than :data:`STARVATION_FACTOR` × its executed time.
    """
    if job.attained_gpu_s < QUEUE_THRESHOLD_GPU_S:
        return 0
    executed_s = job.attained_gpu_s / max(job.gpus, 1)
    if pending and now - job.waiting_since > STARVATION_FACTOR * executed_s:
        return 0
    return 1


class TiresiasPolicy:
    """Discretised 2D-LAS (Gu et al., NSDI'19) with two queues.

    - Queue by attained GPU-time ``job.attained_gpu_s``: high below
      :data:`QUEUE_THRESHOLD_GPU_S` (3,200 GPU-s), low otherwise;
    - FIFO within a queue (submit time, then id); the high queue goes first;
    - starvation guard: a pending low-queue job that has waited longer than
      :data:`STARVATION_FACTOR` (1.0) × its executed time is promoted to the high queue for this
      round; once running it is ranked by its attained service again;
    - preemptive: the top-ranked jobs that fit the healthy GPUs run, other running jobs are
      preempted (:func:`scheduling.core.placement.preemptive_exclusive`); exclusive GPUs.
    """

    name = "tiresias"
    preemptive = True

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round; deterministic, mutates nothing."""
        now = snapshot.now
        pending_ids = {job.id for job in snapshot.pending}

        def key(job: Job) -> tuple[int, float, JobId]:
            return (queue_of(job, now, job.id in pending_ids), job.submit_time, job.id)

        return preemptive_exclusive(snapshot, profile, self.name, key, explain=explain)
