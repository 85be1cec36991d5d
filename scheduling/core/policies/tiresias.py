"""Tiresias: discretised two-level least-attained-service (2D-LAS) on attained GPU-time.

Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019 —
the discretised 2D-LAS scheduler (MODEL.md §4 baseline), preemptive, exclusive GPUs.

Everything the policy needs is derived from the snapshot (no state between rounds), so the
simulator's skip rule can predict when its ranking changes (:func:`next_queue_change`):

- executed time ``E = attained_gpu_s / gpus`` (s of wall time run, restarts included);
- a pending job's current wait ``now − job.waiting_since`` (s);
- a running job's wait before its current run ``placement.start_time − job.waiting_since`` and
  its service in that run ``gpus · (now − placement.start_time)`` (GPU-s).
"""

from __future__ import annotations

import math

from scheduling.core.rounds import preemptive_exclusive
from scheduling.core.skip import SkipRule
from scheduling.core.types import Job, JobId, Profile, RoundDecisions, RunningJob, Snapshot

QUEUE_THRESHOLD_GPU_S = 3_200.0
"""A job whose attained service (GPU-seconds: GPUs × seconds run) is below this is in the high
queue; at or above it, the low queue. Ours, within the range of Tiresias' evaluation. A job
promoted by the starvation guard stays in the high queue for this much service from the start
of the run it was promoted into (hysteresis)."""

STARVATION_FACTOR = 1.0
"""Starvation guard (Tiresias' STARVELIMIT as a multiple of executed time; MODEL.md §4: "promoted
back after waiting longer than it has run"): a pending low-queue job that has waited (since it
last entered the queue) longer than ``STARVATION_FACTOR ×`` its executed time is promoted to the
high queue."""


def executed_s(job: Job) -> float:
    """Executed (wall) time of ``job`` in s: attained GPU-seconds ÷ GPUs."""
    return job.attained_gpu_s / max(job.gpus, 1)


def starving(job: Job, now: float) -> bool:
    """Starvation guard: has ``job`` (low queue), pending at ``now`` (s), waited since it last
    entered the queue more than :data:`STARVATION_FACTOR` × its executed time?"""
    return now - job.waiting_since > STARVATION_FACTOR * executed_s(job)


def promoted_service_gpu_s(rj: RunningJob, now: float) -> float | None:
    """GPU-s of service ``rj`` has had since it was started as a promoted job, or ``None``.

    A running job was promoted when it started iff it was then in the low queue (attained
    ≥ :data:`QUEUE_THRESHOLD_GPU_S`) and :func:`starving`: its wait before this run,
    ``start_time − waiting_since``, exceeded ``F × E_start`` (executed time at the start).
    """
    job = rj.job
    since_start = job.gpus * max(0.0, now - rj.placement.start_time)
    attained_at_start = job.attained_gpu_s - since_start
    if attained_at_start < QUEUE_THRESHOLD_GPU_S:
        return None
    waited = rj.placement.start_time - job.waiting_since
    if waited > STARVATION_FACTOR * attained_at_start / max(job.gpus, 1):
        return since_start
    return None


def queue_of(job: Job, now: float, running: RunningJob | None = None) -> int:
    """0 (high) or 1 (low): the Tiresias queue at ``now`` (s) of a pending ``job``, or of a
    running one (pass its ``running`` entry).

    High: attained service < :data:`QUEUE_THRESHOLD_GPU_S`; or pending and :func:`starving`;
    or running and promoted when it started, with < :data:`QUEUE_THRESHOLD_GPU_S` GPU-s of
    service since (:func:`promoted_service_gpu_s`).
    """
    if job.attained_gpu_s < QUEUE_THRESHOLD_GPU_S:
        return 0
    if running is None:
        return 0 if starving(job, now) else 1
    since = promoted_service_gpu_s(running, now)
    return 0 if since is not None and since < QUEUE_THRESHOLD_GPU_S else 1


def next_queue_change(snapshot: Snapshot) -> float:
    """Earliest instant (s) ≥ ``snapshot.now`` at which a job's :func:`queue_of` may change with
    time alone (``inf``: never); the ranking is constant before it.

    A running job in the high queue reaches :data:`QUEUE_THRESHOLD_GPU_S` of attained service
    (or of service since its promotion) at ``gpus`` GPU-s per second; a pending low-queue job
    becomes :func:`starving` at ``waiting_since + F · E``. Nothing else changes while no job
    starts, stops or arrives (running-or-pending, the second ranking key, changes only then).
    """
    now = snapshot.now
    change = math.inf
    for rj in snapshot.running:
        job = rj.job
        gpus = max(job.gpus, 1)
        if job.attained_gpu_s < QUEUE_THRESHOLD_GPU_S:
            change = min(change, now + (QUEUE_THRESHOLD_GPU_S - job.attained_gpu_s) / gpus)
            continue
        since = promoted_service_gpu_s(rj, now)
        if since is not None and since < QUEUE_THRESHOLD_GPU_S:
            change = min(change, now + (QUEUE_THRESHOLD_GPU_S - since) / gpus)
    for job in snapshot.pending:
        if job.attained_gpu_s >= QUEUE_THRESHOLD_GPU_S and not starving(job, now):
            change = min(change, max(now, job.waiting_since + STARVATION_FACTOR * executed_s(job)))
    return change


def tiresias_horizon(snapshot: Snapshot) -> float:
    """Next instant (s) at which a Tiresias queue may change with time alone (the policy's skip
    horizon, :class:`scheduling.core.skip.SkipRule`).

    Between such instants the Tiresias ranking ``(queue, running first, submit time, id)`` is
    constant, so a round that decided nothing is followed by rounds that decide nothing. The
    changes (a job reaching the queue threshold, a promotion ending, a pending job starting to
    starve) are :func:`next_queue_change`. 1 µs early, so float rounding can only make a round
    run, never skip one that matters.
    """
    return next_queue_change(snapshot) - 1e-6


class TiresiasPolicy:
    """Discretised 2D-LAS (Gu et al., NSDI'19) with two queues; constants
    :data:`QUEUE_THRESHOLD_GPU_S` = 3,200 GPU-s and :data:`STARVATION_FACTOR` = 1.0.

    - Queue by attained GPU-time ``job.attained_gpu_s``: high below 3,200 GPU-s, low otherwise;
      the high queue goes first;
    - within a queue, running jobs before pending ones, each FIFO (submit time, then id): a job
      is preempted only for a job of a higher queue, never for one of its own;
    - starvation guard with hysteresis: a pending low-queue job that has waited (since it last
      entered the queue) longer than 1.0 × its executed time is promoted to the high queue, and
      once started it stays there until it has had another 3,200 GPU-s of service in that run;
    - preemptive: the top-ranked jobs that fit the healthy GPUs run, other running jobs are
      preempted (:func:`scheduling.core.rounds.preemptive_exclusive`); exclusive GPUs.

    Why (faithfulness, and no thrashing). A guard with neither rule promoted a starving job for
    one round: back in the low queue next round, it was preempted by the earlier-submitted job it
    had displaced, waited, was promoted again — 61,512 preemptions for 400 jobs
    (muri-testbed-400, 8x8). Tiresias' own simulator (a) resets a promoted job's service counter,
    so it stays in the high queue for a full threshold of service before it can be demoted
    (our hysteresis, derived from the placement's start instead of stored), and (b) after every
    scheduling pass moves a queue's pending jobs behind its running ones, so preemption only
    happens across queues (our second key). Its guard compares the time pending since the last
    promotion with the service since the last promotion, and a promotion resets the wait. Ours
    compares the current wait (reset whenever the job runs, so a promotion consumes its credit)
    with the total executed time, MODEL.md's "waiting longer than it has run": a little stricter
    after a job's first promotion. The cumulative queueing delay since submission was tried and
    rejected: it counts the wait before the first start and is never consumed, so on a loaded
    trace a job past its promoted run is promoted again at once (76,413 preemptions on the trace
    above). The SJF-BSBF/Muri authors' Tiresias baseline runs with the guard off
    (``solve_starvation=0``); MODEL.md §4 asks for it, so it is on.
    """

    name = "tiresias"
    preemptive = True
    # preempts, so no capacity rule; its ranking changes with time alone only when a queue does
    skip_rule = SkipRule(capacity=False, shares=False, horizon=tiresias_horizon)

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round; deterministic, mutates nothing."""
        now = snapshot.now
        running = {rj.job.id: rj for rj in snapshot.running}

        def key(job: Job) -> tuple[int, bool, float, JobId]:
            rj = running.get(job.id)
            return (queue_of(job, now, rj), rj is None, job.submit_time, job.id)

        return preemptive_exclusive(snapshot, profile, self.name, key, explain=explain)
