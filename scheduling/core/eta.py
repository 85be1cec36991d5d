"""Estimated start times of waiting jobs (pure Python): when each pending job would start if no
other job arrived and every job ran as the profile predicts.

After a round has decided, the GPUs' *free times* are known estimates: an idle healthy GPU is free
now; a busy one when the last of its jobs ends, ``now + R_j · t_j(b_j) · ξ_j`` (remaining
iterations at the job's sub-batch, slowed by ξ of its current co-location, MODEL.md §1–2). The
waiting jobs are then started in the policy's order by a small event simulation of the policy's
exclusive skeleton: at each instant a GPU frees (rounded up to the next round when rounds come every
``round_interval_s``), every waiting job whose gang fits the idle GPUs starts, in order, and holds
them for its remaining exclusive time ``R_j · t_j(b)`` at the largest sub-batch its GPUs hold; with
``blocking`` (strict FIFO) a job that does not fit stops the walk. That is the schedule the policy
itself would make with no new arrivals and no co-location — a job started by sharing a GPU starts
earlier, and a shorter job that arrives later goes first under SJF — so it is an estimate, not a
promise; how far off it was on a real trace is in docs/API.md ("Estimated start").

With tenant quotas (docs/FAIRNESS.md) a job also starts only as the quota gate of a
non-preemptive policy lets it (:class:`~scheduling.core.quota.QuotaGate`): its tenant's GPUs in
use plus its gang stay within the cap; beyond the guarantee only a job whose remaining time is
at most ``borrow_bound_s`` (or that has waited ``starvation_bound_s``) borrows, and only GPUs the
other tenants' waiting jobs within their guarantees are not owed ("owners first").

Only non-preemptive policies get estimates (:func:`estimate_mode`): under SRTF, Tiresias and
``sjf-bsbf-fair`` a running job may lose its GPUs, so no free time is known. Jobs that can never
start (:func:`~scheduling.core.placement.unfit_reason`) get none. Units: seconds (s), GPUs.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from scheduling.core.placement import largest_fitting_sub_batch
from scheduling.core.quota import NO_QUOTA, normalise
from scheduling.core.round_state import healthy_memory_desc
from scheduling.core.types import Job, JobId, Policy, Profile, RoundDecisions, Snapshot, TenantQuota

#: Most waiting jobs (the first in the policy's order) a round estimates **(ours)**: the walk
#: costs O(jobs) per GPU free time, and a start hours behind 200 others is no estimate anyway.
MAX_ESTIMATED_JOBS = 200
#: Policies whose strict order blocks the queue at the first job that does not fit.
BLOCKING_POLICIES = frozenset({"fifo"})


@dataclass(frozen=True, slots=True)
class EstimateMode:
    """How a policy's waiting jobs are estimated: ``blocking`` — strict order (FIFO)."""

    blocking: bool = False


def estimate_mode(policy: Policy) -> EstimateMode | None:
    """The :class:`EstimateMode` of ``policy``, ``None`` for a preemptive one (no estimates)."""
    if getattr(policy, "preemptive", True):
        return None
    return EstimateMode(blocking=policy.name in BLOCKING_POLICIES)


@dataclass(frozen=True, slots=True)
class Holder:
    """A job holding GPUs once the round is applied: its tenant, GPU ids and expected end (s)."""

    tenant: str
    gpu_ids: tuple[int, ...]
    end: float


@dataclass(frozen=True, slots=True)
class Queued:
    """A waiting job as the schedule sees it: ``gpus``, ``run_s`` (s it will hold them), and for
    the quota gate its ``tenant``, ``remaining_s`` (``P_j``, s) and ``waiting_since`` (s)."""

    job_id: JobId
    gpus: int
    run_s: float
    tenant: str = ""
    remaining_s: float = 0.0
    waiting_since: float = 0.0


@dataclass(frozen=True, slots=True)
class Quotas:
    """The quota gate's inputs: tenant → quota, the borrow bound and the starvation bound (s)."""

    quotas: dict[str, TenantQuota]
    borrow_bound_s: float
    starvation_bound_s: float

    def owed(self, waiting: Iterable[Queued], in_use: dict[str, int]) -> dict[str, int]:
        """Tenant → GPUs it is owed now: ``min(g_s − u_s, W_s)``, ``W_s`` the GPUs of its waiting
        jobs whose gang fits its unused guarantee (as ``QuotaGate.owed_to_others`` counts them)."""
        wanted: dict[str, int] = {}
        for q in waiting:
            unused = self.quotas.get(q.tenant, NO_QUOTA).guaranteed_gpus - in_use.get(q.tenant, 0)
            if q.gpus <= unused:
                wanted[q.tenant] = wanted.get(q.tenant, 0) + q.gpus
        return {
            t: min(n, self.quotas.get(t, NO_QUOTA).guaranteed_gpus - in_use.get(t, 0))
            for t, n in wanted.items()
        }

    def allows(
        self, job: Queued, usage: int, now: float, idle_after: int = 0, owed_to_others: int = 0
    ) -> bool:
        """Whether ``job`` may start at ``now`` while its tenant holds ``usage`` GPUs, leaving
        ``idle_after`` GPUs idle while the other tenants are owed ``owed_to_others``."""
        quota = self.quotas.get(job.tenant, NO_QUOTA)
        after = usage + job.gpus
        if after > quota.cap:
            return False
        if after <= quota.guaranteed_gpus:
            return True
        bounded = job.remaining_s <= self.borrow_bound_s or now - job.waiting_since >= self.starvation_bound_s
        return bounded and idle_after >= owed_to_others


class OwedTally:
    """:meth:`Quotas.owed` of the jobs ``waiting[i:]`` of one list as ``i`` only grows (the
    schedule's walk passes each job once): per tenant, how many of those jobs have each gang
    size, so that a call costs O(tenants × gang sizes) instead of O(jobs). The walk asks after
    every start, which made the estimates O(jobs²): at 200 waiting jobs, most of a fill round's
    estimate. The same dict as ``Quotas.owed`` (tenant → GPUs, integers)."""

    def __init__(self, quotas: Quotas, waiting: Sequence[Queued]) -> None:
        self._quotas = quotas.quotas
        self._waiting = waiting
        self._next = 0  # waiting[:_next] are no longer counted
        self._sizes: dict[str, dict[int, int]] = {}  # tenant → gang size → jobs counted
        for q in waiting:
            sizes = self._sizes.setdefault(q.tenant, {})
            sizes[q.gpus] = sizes.get(q.gpus, 0) + 1

    def drop_through(self, i: int) -> None:
        """Stop counting ``waiting[: i + 1]`` (jobs dropped before stay dropped)."""
        while self._next <= i:
            q = self._waiting[self._next]
            self._sizes[q.tenant][q.gpus] -= 1
            self._next += 1

    def owed(self, in_use: dict[str, int]) -> dict[str, int]:
        """Tenant → GPUs it is owed now, over the jobs still counted: ``min(g_s − u_s, W_s)`` as
        :meth:`Quotas.owed` (a tenant none of whose counted gangs fits its unused guarantee is
        absent)."""
        owed: dict[str, int] = {}
        for tenant, sizes in self._sizes.items():
            unused = self._quotas.get(tenant, NO_QUOTA).guaranteed_gpus - in_use.get(tenant, 0)
            wanted, fits = 0, False
            for gpus, count in sizes.items():
                if count and gpus <= unused:
                    wanted += gpus * count
                    fits = True
            if fits:
                owed[tenant] = min(wanted, unused)
        return owed


def holders(
    snapshot: Snapshot,
    decisions: RoundDecisions,
    profile: Profile,
    pending: Mapping[JobId, Job] | None = None,
) -> list[Holder]:
    """The jobs holding GPUs after ``decisions`` (its preemptions and starts applied), each with
    its expected end ``now + R_j · t_j(b_j) · ξ_j`` (s; ξ of its partners on its GPUs).
    ``pending``: the snapshot's pending jobs by id, when the caller has them already."""
    now = snapshot.now
    preempted = {p.job_id for p in decisions.preemptions}
    if pending is None:
        pending = {j.id: j for j in snapshot.pending}
    held: dict[JobId, tuple[Job, tuple[int, ...], int]] = {
        rj.job.id: (rj.job, rj.placement.gpu_ids, rj.placement.sub_batch)
        for rj in snapshot.running
        if rj.job.id not in preempted
    }
    for s in decisions.starts:
        job = pending.get(s.job_id)
        if job is not None:
            held[s.job_id] = (job, tuple(s.gpu_ids), s.sub_batch)
    on_gpu: dict[int, list[JobId]] = {}
    for jid, (_, gpu_ids, _) in held.items():
        for g in gpu_ids:
            on_gpu.setdefault(g, []).append(jid)
    found = []
    for jid, (job, gpu_ids, sub_batch) in held.items():
        xi = 1.0
        for g in gpu_ids:
            for other in on_gpu.get(g, ()):
                if other != jid:
                    partner, _, partner_sub = held[other]
                    xi = max(xi, profile.slowdown(job, sub_batch, partner, partner_sub)[0])
        end = now + job.remaining_iterations * profile.iter_time_s(job, sub_batch) * xi
        found.append(Holder(job.tenant, gpu_ids, end))
    return found


def free_times(snapshot: Snapshot, held: Iterable[Holder]) -> list[float]:
    """When each healthy GPU is expected to be free of every job (s): ``now`` for an idle one, else
    the latest end of the ``held`` jobs on it. One entry per healthy GPU, in no particular order."""
    free = {g.id: snapshot.now for g in snapshot.cluster.gpus if g.healthy}
    for holder in held:
        for g in holder.gpu_ids:
            if g in free:
                free[g] = max(free[g], holder.end)
    return list(free.values())


def gpu_free_times(snapshot: Snapshot, decisions: RoundDecisions, profile: Profile) -> list[float]:
    """:func:`free_times` of the :func:`holders` after ``decisions`` (s)."""
    return free_times(snapshot, holders(snapshot, decisions, profile))


def estimated_starts(
    snapshot: Snapshot,
    decisions: RoundDecisions,
    profile: Profile,
    order: Iterable[JobId],
    mode: EstimateMode = EstimateMode(),
    round_interval_s: float | None = None,
    limit: int = MAX_ESTIMATED_JOBS,
) -> dict[JobId, float]:
    """``{job id: estimated start (s, the snapshot's clock)}`` of the waiting jobs in ``order``
    (the policy's order, e.g. the round's ``waits``; ids that are not pending or that start this
    round are skipped), the first ``limit`` of them, by the simulation of the module docstring.

    ``round_interval_s``: starts happen only at ``now + k · interval`` (the rounds to come);
    ``None``: at the instant GPUs free. Jobs that can never start, and any left when no GPU frees
    any more, are absent."""
    now = snapshot.now
    started = {s.job_id for s in decisions.starts}
    pending = {j.id: j for j in snapshot.pending}
    memory_desc = healthy_memory_desc(snapshot)
    min_sub = snapshot.config.min_sub_batch
    queue: list[Queued] = []
    seen: set[JobId] = set()
    for jid in order:
        job = pending.get(jid)
        if job is None or jid in started or jid in seen:
            continue
        seen.add(jid)
        # unfit_reason(job, memory_desc, …) is None exactly when the gang is 1 … the healthy GPUs
        # and some sub-batch fits its G_j-th largest GPU: that sub-batch is the one it runs
        if not 1 <= job.gpus <= len(memory_desc):
            continue
        sub = largest_fitting_sub_batch(profile, job, memory_desc[job.gpus - 1], min_sub)
        if sub is None:
            continue
        run_s = job.remaining_iterations * profile.iter_time_s(job, sub)
        queue.append(Queued(jid, job.gpus, run_s, job.tenant, job.remaining_time_s, job.waiting_since))
        if len(queue) >= limit:
            break
    held = holders(snapshot, decisions, profile, pending)
    quotas = None
    if snapshot.tenant_quotas:
        config = snapshot.config
        quotas = Quotas(normalise(snapshot.tenant_quotas), config.borrow_bound_s, config.starvation_bound_s)
    return schedule(
        queue,
        free_times(snapshot, held),
        now,
        mode.blocking,
        round_interval_s,
        quotas,
        [(h.end, h.tenant, len(h.gpu_ids)) for h in held],
    )


def schedule(
    queue: Sequence[Queued | tuple[JobId, int, float]],
    free_times: Iterable[float],
    now: float,
    blocking: bool = False,
    round_interval_s: float | None = None,
    quotas: Quotas | None = None,
    usage: Iterable[tuple[float, str, int]] = (),
) -> dict[JobId, float]:
    """The event simulation: ``queue`` holds the waiting jobs in order (:class:`Queued`, or
    ``(job id, GPUs, run time s)``); ``free_times`` when each GPU frees (s). With ``quotas``, a job
    starts only as :meth:`Quotas.allows`, its tenant's GPUs in use counted from ``usage`` — ``(end
    s, tenant, GPUs)`` of the jobs holding GPUs — and the starts made here. Returns each job's
    start (s); jobs never started are absent.

    GPUs are interchangeable here (a gang may span nodes, as in the live cluster). Cost:
    O((GPUs + jobs) log GPUs) for the heaps plus O(jobs) per distinct event time."""
    waiting = [q if isinstance(q, Queued) else Queued(*q) for q in queue]
    idle = 0
    busy: list[float] = []
    for t in free_times:
        if t <= now:
            idle += 1
        else:
            busy.append(t)
    heapq.heapify(busy)
    in_use: dict[str, int] = {}
    releases: list[tuple[float, str, int]] = []  # (end s, tenant, GPUs) of usage still counted
    for end, tenant, gpus in usage:
        in_use[tenant] = in_use.get(tenant, 0) + gpus
        releases.append((end, tenant, gpus))
    heapq.heapify(releases)
    starts: dict[JobId, float] = {}
    t = now
    while waiting:
        # An event is due at the round next_round puts it in: one a hair past a round's instant
        # (within its tolerance) belongs to that round. Compared with ``<= t`` alone it was never
        # due, and the walk came back to the same round for ever (a GPU free 1 ns after a round:
        # the estimate, and the round computing it, never ended).
        while busy and (busy[0] <= t or next_round(busy[0], now, round_interval_s) <= t):
            heapq.heappop(busy)
            idle += 1
        while releases and (releases[0][0] <= t or next_round(releases[0][0], now, round_interval_s) <= t):
            _, tenant, gpus = heapq.heappop(releases)
            in_use[tenant] -= gpus
        if idle >= min(q.gpus for q in waiting):
            left: list[Queued] = []
            tally = OwedTally(quotas, waiting) if quotas is not None else None
            owed = tally.owed(in_use) if tally is not None else {}
            for i, q in enumerate(waiting):
                if q.gpus > idle:  # does not fit: under strict order, nothing later starts
                    if blocking:
                        left.extend(waiting[i:])
                        break
                    left.append(q)
                elif quotas is None or quotas.allows(
                    q, in_use.get(q.tenant, 0), t, idle - q.gpus, sum(owed.values()) - owed.get(q.tenant, 0)
                ):
                    starts[q.job_id] = t
                    idle -= q.gpus
                    for _ in range(q.gpus):
                        heapq.heappush(busy, t + q.run_s)
                    if tally is not None:
                        in_use[q.tenant] = in_use.get(q.tenant, 0) + q.gpus
                        heapq.heappush(releases, (t + q.run_s, q.tenant, q.gpus))
                        tally.drop_through(i)  # what the jobs after this one are owed
                        owed = tally.owed(in_use)
                else:  # refused by its quota: it never blocks others
                    left.append(q)
            waiting = left
            if not waiting:
                break
        upcoming = ([busy[0]] if busy else []) + ([releases[0][0]] if releases else [])
        if not upcoming:
            break  # nothing frees any more: the rest can never start
        # a quota may hold a job back while GPUs are idle: a starvation bound crossed later frees it
        if quotas is not None:
            crossing = [q.waiting_since + quotas.starvation_bound_s for q in waiting]
            upcoming += [c for c in crossing if next_round(c, now, round_interval_s) > t]
        t = next_round(min(upcoming), now, round_interval_s)
    return starts


def next_round(t: float, now: float, round_interval_s: float | None) -> float:
    """The first round at or after ``t`` when rounds run at ``now + k · interval`` (``t`` itself
    without an interval)."""
    if not round_interval_s:
        return t
    k = math.ceil((t - now) / round_interval_s - 1e-9)
    return now + max(0, k) * round_interval_s
