"""Tiresias: discretised multi-level least-attained-service (2D-LAS) on attained service.

Gu et al., "Tiresias: A GPU Cluster Manager for Distributed Deep Learning", NSDI 2019 — the
discretised 2D-LAS scheduler (MODEL.md §4 baseline), preemptive, exclusive GPUs. Its knobs are
``snapshot.config.tiresias`` (:class:`~scheduling.core.types.TiresiasConfig`): the queue
thresholds and what they measure (attained GPU-s or executed wall s), the starvation guard and
its factor, and where a demoted job goes (docs/FIDELITY.md has each peer's setting).

With ``demoted="ahead"`` (the default) everything the policy needs is derived from the snapshot,
so the simulator's skip rule can predict when its ranking changes (:func:`next_queue_change`):

- service ``S`` = ``attained_gpu_s`` (GPU-s) or executed time ``E = attained_gpu_s / gpus``
  (s of wall time run, restarts included), per ``TiresiasConfig.service``;
- a pending job's current wait ``now − job.waiting_since`` (s);
- a running job's wait before its current run ``placement.start_time − job.waiting_since`` and
  its service in that run (``gpus`` or 1 per second since ``placement.start_time``).

With ``demoted="back"`` the policy keeps Tiresias' simulator's queue lists between rounds
(:mod:`scheduling.core.policies.tiresias_lists`).
"""

from __future__ import annotations

import math
from bisect import bisect_right

from scheduling.core.policies.tiresias_lists import TiresiasLists
from scheduling.core.preemptive import preemptive_exclusive
from scheduling.core.ranking import PendingRanking
from scheduling.core.skip import SkipRule
from scheduling.core.types import (
    Job,
    JobId,
    Profile,
    RoundDecisions,
    RunningJob,
    Snapshot,
    TiresiasConfig,
)

DEFAULT_CONFIG = TiresiasConfig()
"""Ours: one threshold of 3,200 GPU-s (two queues), guard on with factor 1.0, demoted ahead."""

QUEUE_THRESHOLD_GPU_S = DEFAULT_CONFIG.thresholds[0]
"""3,200 GPU-s: by default a job whose attained service (GPU-seconds: GPUs × seconds run) is
below this is in the high queue; at or above it, the low queue. Ours, within the range of
Tiresias' evaluation. A job promoted by the starvation guard stays in the high queue for this
much service from the start of the run it was promoted into (hysteresis)."""

STARVATION_FACTOR = DEFAULT_CONFIG.starvation_factor
"""1.0 by default. Starvation guard (Tiresias' STARVELIMIT as a multiple of executed time;
MODEL.md §4: "promoted back after waiting longer than it has run"): a pending lower-queue job that
has waited (since it last entered the queue) longer than ``factor ×`` its executed time is
promoted to the high queue."""


def executed_s(job: Job) -> float:
    """Executed (wall) time of ``job`` in s: attained GPU-seconds ÷ GPUs."""
    return job.attained_gpu_s / max(job.gpus, 1)


def service_of(job: Job, config: TiresiasConfig = DEFAULT_CONFIG) -> float:
    """The service the thresholds measure: attained GPU-s, or executed wall s."""
    return job.attained_gpu_s if config.service == "gpu_s" else executed_s(job)


def service_rate(job: Job, config: TiresiasConfig = DEFAULT_CONFIG) -> float:
    """Service gained per second of running: ``gpus`` (GPU-s) or 1 (wall s)."""
    return float(max(job.gpus, 1)) if config.service == "gpu_s" else 1.0


def level_of(service: float, config: TiresiasConfig = DEFAULT_CONFIG) -> int:
    """The queue (0 = highest) of a job with this much ``service``: thresholds at or below it."""
    return bisect_right(config.thresholds, service)


def starving(job: Job, now: float, config: TiresiasConfig = DEFAULT_CONFIG) -> bool:
    """Starvation guard: is the guard on and has ``job`` (a lower queue), pending at ``now``
    (s), waited since it last entered the queue more than ``factor`` × its executed time?"""
    return config.starvation_guard and now - job.waiting_since > config.starvation_factor * executed_s(job)


def promoted_service(rj: RunningJob, now: float, config: TiresiasConfig = DEFAULT_CONFIG) -> float | None:
    """Service ``rj`` has had since it was started as a promoted job, or ``None``.

    A running job was promoted when it started iff the guard is on and it was then in a lower
    queue and :func:`starving`: its wait before this run, ``start_time − waiting_since``,
    exceeded ``F × E_start`` (executed time at the start).
    """
    if not config.starvation_guard:
        return None
    job = rj.job
    ran = max(0.0, now - rj.placement.start_time)
    since = service_rate(job, config) * ran
    if level_of(service_of(job, config) - since, config) == 0:
        return None
    executed_at_start = (job.attained_gpu_s - max(job.gpus, 1) * ran) / max(job.gpus, 1)
    waited = rj.placement.start_time - job.waiting_since
    return since if waited > config.starvation_factor * executed_at_start else None


def queue_of(
    job: Job, now: float, running: RunningJob | None = None, config: TiresiasConfig = DEFAULT_CONFIG
) -> int:
    """The Tiresias queue (0 = highest) at ``now`` (s) of a pending ``job``, or of a running one
    (pass its ``running`` entry), with ``demoted="ahead"``.

    Its service's queue (:func:`level_of`), except 0 when pending and :func:`starving`, or when
    running and promoted when it started with less than the first threshold of service since
    (:func:`promoted_service`).
    """
    level = level_of(service_of(job, config), config)
    if level == 0:
        return 0
    if running is None:
        return 0 if starving(job, now, config) else level
    since = promoted_service(running, now, config)
    return 0 if since is not None and since < config.thresholds[0] else level


def next_queue_change(snapshot: Snapshot, pending_change: float | None = None) -> float:
    """Earliest instant (s) ≥ ``snapshot.now`` at which a job's :func:`queue_of` may change with
    time alone (``inf``: never); the ranking is constant before it.

    A running job reaches its next threshold (or the first threshold of service since its
    promotion) at ``gpus`` GPU-s (or 1 s) per second; a pending lower-queue job becomes
    :func:`starving` at ``waiting_since + F · E``. Nothing else changes while no job starts,
    stops or arrives (running-or-pending, the second ranking key, changes only then).
    ``pending_change``: that earliest starvation instant when already known (the policy's
    :class:`~scheduling.core.ranking.PendingRanking` keeps it: :func:`pending_key_valid_until`).
    """
    config = snapshot.config.tiresias
    thresholds = config.thresholds
    now = snapshot.now
    change = math.inf
    for rj in snapshot.running:
        job = rj.job
        rate = service_rate(job, config)
        service = service_of(job, config)
        level = level_of(service, config)
        since = promoted_service(rj, now, config) if level else None
        if since is not None and since < thresholds[0]:
            change = min(change, now + (thresholds[0] - since) / rate)
        elif level < len(thresholds):
            change = min(change, now + (thresholds[level] - service) / rate)
    if pending_change is not None:
        return min(change, max(now, pending_change))
    if config.starvation_guard:
        factor = config.starvation_factor
        for job in snapshot.pending:
            if level_of(service_of(job, config), config) and not starving(job, now, config):
                change = min(change, max(now, job.waiting_since + factor * executed_s(job)))
    return change


def tiresias_horizon(snapshot: Snapshot) -> float:
    """Next instant (s) at which a Tiresias queue may change with time alone (the policy's skip
    horizon, :class:`scheduling.core.skip.SkipRule`), with ``demoted="ahead"``.

    Between such instants the Tiresias ranking ``(queue, running first, submit time, id)`` is
    constant, so a round that decided nothing is followed by rounds that decide nothing. The
    changes (a job reaching a threshold, a promotion ending, a pending job starting to starve)
    are :func:`next_queue_change`. 1 µs early, so float rounding can only make a round run,
    never skip one that matters.
    """
    return next_queue_change(snapshot) - 1e-6


def pending_key(job: Job, now: float, config: TiresiasConfig) -> tuple[int, bool, float, JobId]:
    """Ranking key of a pending job: ``(queue, True, submit time, id)``."""
    return (queue_of(job, now, None, config), True, job.submit_time, job.id)


def pending_key_valid_until(job: Job, now: float, config: TiresiasConfig) -> float:
    """Last instant (s) up to which :func:`pending_key` stays as at ``now``: a lower-queue job
    not yet starving keeps it until ``waiting_since + F · E`` (it starves just after); any other
    pending job keeps it while it stays pending."""
    lower = level_of(service_of(job, config), config) > 0
    if config.starvation_guard and lower and not starving(job, now, config):
        return job.waiting_since + config.starvation_factor * executed_s(job)
    return math.inf


class TiresiasPolicy:
    """Discretised multi-level LAS (Gu et al., NSDI'19); knobs ``snapshot.config.tiresias``,
    by default two queues split at 3,200 GPU-s and the starvation guard on with factor 1.0.

    - Queue by attained service (GPU-s or wall s): the highest queue goes first;
    - ``demoted="ahead"``: within a queue, running jobs before pending ones, each FIFO (submit
      time, then id): a job is preempted only for a job of a higher queue, never for one of its
      own; ``demoted="back"``: Tiresias' simulator's queue lists (a demoted job joins the back of
      the lower queue, behind its pending jobs; :mod:`scheduling.core.policies.tiresias_lists`);
    - starvation guard with hysteresis: a pending lower-queue job that has waited (since it last
      entered the queue) longer than ``factor ×`` its executed time is promoted to the high
      queue, and once started it stays there until it has had another first-threshold of service
      in that run;
    - preemptive: the top-ranked jobs that fit the healthy GPUs run, other running jobs are
      preempted (:func:`scheduling.core.preemptive.preemptive_exclusive`); exclusive GPUs.

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
    above). Muri's Tiresias baseline runs with the guard off (``dlas_sim_jobs(True)``:
    ``solve_starvation=0``, three queues at 3,250 and 7,200 GPU-s); the SJF-BSBF authors' runs it
    on (``solve_starvation = 1``, two queues split at 700 s of wall time); MODEL.md §4 asks for
    it, so ours is on.

    The pending jobs stay sorted between rounds (:class:`~scheduling.core.ranking.PendingRanking`,
    a cache: ``incremental=False`` sorts them from scratch every round, with the same decisions).
    """

    name = "tiresias"
    preemptive = True
    # preempts, so no capacity rule; its ranking changes with time alone only when a queue does
    skip_rule = SkipRule(capacity=False, shares=False, horizon=tiresias_horizon)

    def __init__(self, *, incremental: bool = True) -> None:
        self.incremental = incremental
        self._config: TiresiasConfig | None = None
        self._ranking: PendingRanking | None = None
        self._lists = TiresiasLists(self.name)
        # the queue lists' horizon depends on what the policy kept, so the rule is per object
        self.skip_rule = SkipRule(capacity=False, shares=False, horizon=self.horizon)

    def horizon(self, snapshot: Snapshot) -> float:
        """The skip horizon of this policy object: :func:`tiresias_horizon`, or the queue
        lists' (:meth:`TiresiasLists.horizon`) with ``demoted="back"``."""
        config = snapshot.config.tiresias
        if config.demoted == "back":
            return self._lists.horizon(snapshot)
        ranking = self._ranking
        if self.incremental and ranking is not None and self._config == config:
            if ranking.current(snapshot.pending, snapshot.now):  # the pending jobs' instants are known
                return next_queue_change(snapshot, ranking.next_expiry()) - 1e-6
        return tiresias_horizon(snapshot)

    def _pending_ranking(self, config: TiresiasConfig) -> PendingRanking:
        if self._ranking is None or self._config != config:
            self._config = config
            self._ranking = PendingRanking(
                lambda job, now: pending_key(job, now, config),
                lambda job, now: pending_key_valid_until(job, now, config),
            )
        return self._ranking

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round; deterministic; mutates nothing but its own caches (and,
        with ``demoted="back"``, the queue lists it keeps)."""
        config = snapshot.config.tiresias
        if config.demoted == "back":
            return self._lists.decide(snapshot, profile, explain=explain)
        now = snapshot.now
        running = {rj.job.id: rj for rj in snapshot.running}

        def key(job: Job) -> tuple[int, bool, float, JobId]:
            rj = running.get(job.id)
            return (queue_of(job, now, rj, config), rj is None, job.submit_time, job.id)

        ranking = self._pending_ranking(config)
        ranked = ranking.update(snapshot.pending, now) if self.incremental else None
        decisions = preemptive_exclusive(
            snapshot, profile, self.name, key, explain=explain, ranked_pending=ranked
        )
        ranking.started({s.job_id for s in decisions.starts})
        return decisions
