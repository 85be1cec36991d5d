"""The round skeletons the policies share (pure Python).

- :func:`exclusive_in_order` (FIFO, SJF): pending jobs in a given order on idle GPUs, exclusively;
- :func:`preemptive_exclusive` (SRTF, Tiresias; in :mod:`scheduling.core.preemptive`): pending
  and running jobs ranked together, the losers among the running ones preempted;
- :func:`sharing_round` (SJF-FFS, SJF-BSBF, SJF-BSBF-fair, which differ only in their
  :class:`PartnerFinder` and, for the fair policy, its order, reservation and preemptions).

Quotas (docs/FAIRNESS.md): when the snapshot carries tenant quotas, every skeleton asks one
:class:`~scheduling.core.quota.QuotaGate` before each start (cap, owners first, bounded
borrowing) and tells it of each start and preemption — one mechanism for all policies. Without
quotas the gate is ``None`` and nothing changes. A job refused by its quota never blocks others.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

from scheduling.core.backfill import expected_free_times, shadow_time
from scheduling.core.gpu_types import reserved_gpu_ids
from scheduling.core.placement import largest_fitting_sub_batch, never_fits_reason, start_on_idle
from scheduling.core.preemptive import preemptive_exclusive
from scheduling.core.profile_cache import CachedProfile, cached
from scheduling.core.quota import QuotaGate, gate_for
from scheduling.core.round_state import Resident, ResidentListener, RoundState
from scheduling.core.types import (
    Job,
    JobId,
    Preempt,
    Profile,
    Reason,
    RoundDecisions,
    Share,
    Snapshot,
    Start,
    Wait,
)

__all__ = [
    "PartnerFinder",
    "SharePlan",
    "arrival_key",
    "exclusive_in_order",
    "preemptive_exclusive",
    "sharing_round",
    "sjf_key",
]

# -- orders ----------------------------------------------------------------------------------------


def arrival_key(job: Job) -> tuple[float, JobId]:
    """FIFO order: ``(submit_time, id)`` — also every policy's tie-break."""
    return (job.submit_time, job.id)


sjf_key: Callable[[Job], tuple[float, float, JobId]] = attrgetter("remaining_time_s", "submit_time", "id")
"""SJF order: ``(P_j, submit_time, id)`` with ``P_j`` = remaining exclusive time (s), MODEL.md §1."""


# -- round skeletons ------------------------------------------------------------------------------


def exclusive_in_order(
    snapshot: Snapshot, profile: Profile, jobs: Iterable[Job], *, blocking: bool, explain: bool
) -> tuple[tuple[Start, ...], tuple[Wait, ...]]:
    """Start ``jobs`` in the given order on idle GPUs, exclusively, without preemption.

    ``blocking=True``: strict order — once a job that could ever fit does not fit now, every later
    job waits too (FIFO's head-of-line blocking). ``blocking=False``: a job that does not fit is
    skipped and later ones may start (backfill). Jobs that can never fit, or that their tenant's
    quota refuses, never block. With ``SchedulerConfig.placement == "consolidated"`` a gang goes
    where the peers' ``yarn`` rule puts it, and one it cannot place waits (and, blocking, blocks)
    however many GPUs are idle elsewhere.
    """
    state = RoundState(snapshot, consolidated=snapshot.config.placement == "consolidated")
    profile = cached(profile)
    gate = gate_for(snapshot, can_start=lambda j: never_fits_reason(j, state, profile) is None)
    min_sub = snapshot.config.min_sub_batch
    starts: list[Start] = []
    waits: list[Wait] = []
    blocker: Job | None = None
    for job in jobs:
        reason = never_fits_reason(job, state, profile)
        if reason is None and gate is not None and job.gpus <= state.idle_count:
            reason = gate.refusal(job, state.idle_count - job.gpus)
        if reason is None and blocker is not None:
            reason = f"waits behind job {blocker.id} (strict FIFO: the head of the queue does not fit)"
        elif reason is None:
            outcome = start_on_idle(state, job, profile, min_sub)
            if isinstance(outcome, Start):
                starts.append(outcome)
                if gate is not None:
                    gate.admit(job)
                continue
            reason = outcome
            if blocking:
                blocker = job
        if explain:
            waits.append(Wait(job.id, reason))
        elif blocker is not None or state.idle_count == 0:
            break  # nothing later can start, and no one asked why
    return tuple(starts), tuple(waits)


@dataclass(frozen=True, slots=True)
class SharePlan:
    """A partner finder's answer: start the job at ``sub_batch`` on all idle GPUs plus, from each
    resident of ``partners``, the listed GPU ids; ``shares`` explains each pair; ``reason`` becomes
    the Start's (the text, or a function formatting it when read: :data:`~scheduling.core.types.Reason`)."""

    sub_batch: int
    partners: tuple[tuple[Resident, tuple[int, ...]], ...]
    shares: tuple[Share, ...]
    reason: Reason


class PartnerFinder(ResidentListener, Protocol):
    """How a sharing policy picks the residents a waiting job joins (SJF-FFS, SJF-BSBF)."""

    def find(self, job: Job, need: int) -> SharePlan | str:
        """Partners giving ``job`` ``need`` more GPUs than the idle ones, or why there are none."""
        ...

    def refit(self, job: Job, plan: SharePlan, sub_batch: int) -> SharePlan | str:
        """``plan``'s partners at the smaller ``sub_batch`` (samples), judged again by the
        policy's own rule; or why they may not share at it."""
        ...


def sharing_round(
    snapshot: Snapshot,
    profile: Profile,
    policy: str,
    make_finder: Callable[[RoundState, CachedProfile], PartnerFinder],
    *,
    explain: bool,
    order: Sequence[Job] | None = None,
    starving: Callable[[Job], bool] | None = None,
    preemptions: Sequence[Preempt] = (),
    can_preempt: bool = False,
    charges: Mapping[JobId, float] | None = None,
    requeued: Sequence[Job] = (),
) -> RoundDecisions:
    """One round of a non-preemptive SJF policy with co-location (MODEL.md §3 skeleton).

    Pending jobs in SJF order ``(P_j, submit_time, id)``. For each job: enough idle GPUs → an
    exclusive start on idle GPUs only; otherwise, if idle plus shareable GPUs could hold its gang,
    the policy's ``PartnerFinder`` picks residents to share; else the job waits. A job started alone
    in this round becomes a resident for later jobs of the same round; a resident joined by a job is
    withdrawn, so no GPU ever holds more than two jobs. Once no idle and no shareable GPU is left,
    the remaining jobs wait in O(1) each (no reason objects at all when ``explain`` is False).
    Running jobs are never preempted here.

    Extensions for ``sjf-bsbf-fair`` (docs/FAIRNESS.md), all off by default: ``order`` replaces the
    SJF order; when a job for which ``starving`` is true cannot start (and could ever start, within
    its tenant's cap), it holds a **reservation** — the first such job only (``sjf-bsbf-fair``
    marks just its starving head, placed first in ``order``): every later job of the round waits
    unless it fits its tenant's unused guarantee or can be backfilled — alone on idle GPUs, ending
    (``P_j``) before the reservation's shadow time or on GPUs it will not need then
    (:func:`~scheduling.core.backfill.shadow_time`, EASY backfilling);
    ``preemptions`` (already removed from ``snapshot.running``) are returned with the starts, and
    ``requeued``, their jobs, count as waiting for the quota gate (they wait from the next round on);
    ``can_preempt`` tells the quota gate that lent GPUs are reclaimed by preemption; ``charges``
    (running job id → normalised GPUs) makes it count quota use by the normalised split and refuse
    co-location that takes a waiting owner below its guarantee (:class:`~scheduling.core.quota.QuotaGate`).
    """
    cp = cached(profile)
    state = RoundState(snapshot, cp, track_sharing=True)
    finder = make_finder(state, cp)
    state.listener = finder
    gate: QuotaGate | None = gate_for(
        snapshot,
        can_preempt=can_preempt,
        can_start=lambda j: never_fits_reason(j, state, cp) is None,
        charges=charges,
        requeued=requeued,
    )
    order = sorted(snapshot.pending, key=sjf_key) if order is None else order
    starts: list[Start] = []
    waits: list[Wait] = []
    blocker: Job | None = None
    reserved = ""
    now = snapshot.now
    # busy healthy GPU → when it is expected to be idle (only needed for a reservation's backfill)
    frees: dict[int, float] = {} if starving is None else expected_free_times(snapshot, cp)
    shadow, spare = math.inf, 0
    book = state.types
    for position, job in enumerate(order):
        # a reservation on some GPU types only (scheduling.core.gpu_types): a job that may use
        # another type starts there as usual, alone on idle GPUs
        elsewhere = (
            blocker is not None
            and book.partial_reservation()
            and bool(book.allowed(job, avoid_reserved=True))
        )
        if blocker is not None and not elsewhere and not (gate is not None and gate.within_guarantee(job)):
            # under a reservation only EASY backfill (Lifka 1995): alone on idle GPUs, and either
            # ending (P_j) before the shadow time or on GPUs the reserved job will not need then
            ends_before = now + job.remaining_time_s <= shadow
            unfit = never_fits_reason(job, state, cp)
            if (
                job.gpus <= state.idle_count
                and (ends_before or job.gpus <= spare)
                and unfit is None
                and (gate is None or gate.refusal(job, state.idle_count - job.gpus) is None)
            ):
                backfilled = start_on_idle(state, job, cp, state.min_sub_batch)
                if isinstance(backfilled, Start):
                    starts.append(backfilled)
                    if gate is not None:
                        gate.admit(job)
                    if not ends_before:
                        spare -= job.gpus
                    continue
            if explain:
                waits.append(Wait(job.id, unfit or reserved))
            elif state.idle_count == 0 and gate is None:
                break
            continue
        if state.idle_count == 0 and state.shareable_count == 0:
            if explain:
                left = reserved or "no idle or shareable GPU left this round"
                waits.extend(Wait(j.id, never_fits_reason(j, state, cp) or left) for j in order[position:])
            break
        reason = never_fits_reason(job, state, cp)
        can_reserve = reason is None and starving is not None and starving(job)
        if reason is None and gate is not None:
            reason = gate.refusal(job, state.idle_count - job.gpus if job.gpus <= state.idle_count else 0)
            can_reserve = can_reserve and not gate.over_cap(job)
        if can_reserve and book.refusal(job) is not None:
            can_reserve = False  # over its per-type caps on every type it accepts: it could not start
        if reason is None:
            outcome = _start_or_share(state, cp, finder, job, gate, avoid_reserved=elsewhere)
            if isinstance(outcome, Start):
                starts.append(outcome)
                if gate is not None:
                    gate.admit(job, outcome.shares)
                if starving is not None:
                    for g in outcome.gpu_ids:
                        frees[g] = max(frees.get(g, now), now + job.remaining_time_s)
                continue
            reason = outcome
        if can_reserve and blocker is None:
            blocker = job
            book.reserve(job)
            if book.partial_reservation():  # the shadow time of the reserved types' GPUs only
                mine = reserved_gpu_ids(state)
                idle = sum(1 for g in state.idle_ids() if g in mine)
                shadow, spare = shadow_time(
                    {g: t for g, t in frees.items() if g in mine}, idle, job.gpus, now
                )
            else:
                shadow, spare = shadow_time(frees, state.idle_count, job.gpus, now)
            reserved = (
                f"GPUs reserved for starving job {job.id} (waiting past the starvation bound) "
                f"until about t={shadow:.0f} s"
            )
        if explain:
            waits.append(Wait(job.id, reason))
    return RoundDecisions(policy, snapshot.now, tuple(starts), tuple(preemptions), tuple(waits))


def _start_or_share(
    state: RoundState,
    profile: CachedProfile,
    finder: PartnerFinder,
    job: Job,
    gate: QuotaGate | None,
    *,
    avoid_reserved: bool = False,
) -> Start | str:
    """Start ``job`` alone on idle GPUs if enough are idle, else on all idle GPUs plus the partners
    ``finder`` picks (recorded in ``state``) unless the quota ``gate`` refuses that co-location;
    or why it must wait. A job that may not use every GPU type (its request, per-type quotas, or
    ``avoid_reserved``: a starving job holds its types) only starts alone, on idle GPUs of the
    types it may use (:mod:`scheduling.core.gpu_types`)."""
    if avoid_reserved or (not state.types.single and state.types.restricts(job)):
        return start_on_idle(state, job, profile, state.min_sub_batch, avoid_reserved=avoid_reserved)
    if job.gpus <= state.idle_count:
        return start_on_idle(state, job, profile, state.min_sub_batch)
    if job.gpus > state.idle_count + state.shareable_count:
        return f"needs {job.gpus} GPUs: {state.idle_count} idle and {state.shareable_count} shareable"
    alone = state.may_share(job)
    if alone is not None:
        return f"needs {job.gpus} GPUs, {state.idle_count} idle; {alone}"
    refused = None if gate is None else gate.refused_before(job)
    if refused is not None:
        return f"needs {job.gpus} GPUs, {state.idle_count} idle; {refused}"
    plan = finder.find(job, job.gpus - state.idle_count)
    if not isinstance(plan, SharePlan):
        return plan
    idle = state.pick_idle(state.idle_count) or ()
    if idle:
        # the finder chose the sub-batch from the residents' memory room; the idle GPUs the job
        # also takes may hold less (a cluster of mixed GPU memory): then the same partners at the
        # largest sub-batch that fits those GPUs, judged again (ours; before, the job waited)
        fitted = _fit_idle(state, profile, finder, job, plan, idle)
        if not isinstance(fitted, SharePlan):
            return fitted
        plan = fitted
    refused = None if gate is None else gate.share_refusal(job, plan.shares)
    if refused is not None:
        return f"needs {job.gpus} GPUs, {state.idle_count} idle; {refused}"
    return _apply_share(state, job, plan, idle)


def _fit_idle(
    state: RoundState,
    profile: Profile,
    finder: PartnerFinder,
    job: Job,
    plan: SharePlan,
    idle: tuple[int, ...],
) -> SharePlan | str:
    """``plan`` if its sub-batch's memory per GPU (MB) fits the smallest of the ``idle`` GPUs the
    job takes beside its partners' (an exclusive GPU keeps no reserve, as in
    :func:`~scheduling.core.placement.start_on_idle`); else the partners at the largest smaller
    sub-batch that fits them (:meth:`PartnerFinder.refit`, which judges the pairs again); or why
    the job waits."""
    smallest = min(state.gpus[g].memory_mb for g in idle)
    if profile.memory_mb(job, plan.sub_batch) <= smallest:
        return plan
    sub = largest_fitting_sub_batch(profile, job, smallest, state.min_sub_batch)
    if sub is None:
        return f"no sub-batch fits the memory of the idle GPUs ({smallest:.0f} MB)"
    fitted = finder.refit(job, plan, sub)
    if not isinstance(fitted, SharePlan):
        return f"its sub-batch {plan.sub_batch} does not fit the memory of the idle GPUs; at {sub}: {fitted}"
    return fitted


def _apply_share(state: RoundState, job: Job, plan: SharePlan, idle: tuple[int, ...]) -> Start:
    """Record ``plan`` in ``state`` (the ``idle`` GPUs + the partners' GPUs) and build its Start."""
    taken = list(idle)
    for resident, gpu_ids in plan.partners:
        state.remove_resident(resident.job.id)
        taken.extend(gpu_ids)
    state.take(taken)
    state.types.record(job, taken)
    return Start(
        job.id,
        tuple(sorted(taken)),
        plan.sub_batch,
        job.batch_size // plan.sub_batch,
        plan.shares,
        plan.reason,
    )
