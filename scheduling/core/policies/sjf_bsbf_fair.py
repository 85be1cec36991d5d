"""SJF-BSBF-fair: quota-aware SJF-BSBF with aging and a starvation bound **(ours)**.

SJF-BSBF (Luo et al., IWQoS 2024; MODEL.md §2–3) keeps its pairwise sharing rule and partner
choice unchanged; what changes is *who* may start and in which order (docs/FAIRNESS.md):

- **quotas with borrowing**: the quota gate of every policy (:mod:`scheduling.core.quota`), and
  lent GPUs are reclaimed by preempting borrowed work (``reclaim="preempt"``/``"both"``,
  :mod:`scheduling.core.reclaim`) or by admitting borrowers only when ``P_j`` ≤
  ``borrow_bound_s`` (``"bound"``/``"both"``);
- **aging**: pending jobs ordered by ``P_j / (1 + wait/aging_s)`` instead of ``P_j``;
- **starvation bound**: of the jobs waiting at least ``starvation_bound_s``, the one waiting longest
  (the *head*) goes first and, if it cannot start for lack of GPUs, holds the round's one
  reservation (EASY backfilling, Lifka 1995): later jobs start only within their tenant's unused
  guarantee or as backfill that does not delay it. It therefore starts at the latest once the jobs
  running when it became blocked have finished (or a reclaim gives its owner GPUs); the other
  starving jobs keep their aged order until they become the head. One reservation at a time, not
  all starving jobs first (oldest first): on an overloaded trace most of the backlog is past the
  bound and that turned the policy into FIFO (docs/FAIRNESS.md §5: 228 h vs 160 h average JCT
  on Philly from this change alone).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import replace

from scheduling.core.charge import gpu_shares, running_charges
from scheduling.core.placement import start_checker
from scheduling.core.policies.sjf_bsbf import BestBenefitFinder, BestBenefitMemo
from scheduling.core.priority import by_priority_within_tenants
from scheduling.core.quota import NO_QUOTA, normalise, usage_by_tenant, wait_s
from scheduling.core.reclaim import reclaim_preemptions
from scheduling.core.rounds import sharing_round
from scheduling.core.skip import SkipRule, never
from scheduling.core.types import Job, Profile, RoundDecisions, Snapshot


def aged_key(job: Job, now: float, aging_s: float) -> float:
    """Aging priority (smaller first) **(ours)**: ``P_j / (1 + wait/aging_s)`` (s) — SJF's key,
    shrunk as the job waits; after one ``aging_s`` of waiting a job competes as if it were half as
    long. Raises ``ValueError`` for a non-positive ``aging_s``."""
    if not aging_s > 0 or math.isinf(aging_s):
        raise ValueError(f"aging_s must be a positive finite number of seconds, got {aging_s}")
    return job.remaining_time_s / (1.0 + wait_s(job, now) / aging_s)


def starving_head(snapshot: Snapshot, can_start: Callable[[Job], bool]) -> Job | None:
    """The job that holds the starvation reservation this round, or ``None``: of the pending jobs
    waiting at least ``snapshot.config.starvation_bound_s``, the one waiting longest (ties: earlier
    wait start, submit time, id) for which ``can_start`` holds (it could start on the cluster as
    it is, :func:`~scheduling.core.placement.start_checker`) and that stays within its tenant's
    quota cap — so a job that cannot start never keeps the reservation from the next one."""
    now, config = snapshot.now, snapshot.config
    # a heap, not a sort: the oldest starving job is usually the head (ids are unique, so the
    # tuples never compare jobs)
    starving = [
        (j.waiting_since, j.submit_time, j.id, j)
        for j in snapshot.pending
        if wait_s(j, now) >= config.starvation_bound_s
    ]
    if not starving:
        return None
    heapq.heapify(starving)
    quotas = normalise(snapshot.tenant_quotas)
    usage = usage_by_tenant(snapshot.running) if quotas else {}
    while starving:
        job = heapq.heappop(starving)[-1]
        if quotas and usage.get(job.tenant, 0) + job.gpus > quotas.get(job.tenant, NO_QUOTA).cap:
            continue
        if can_start(job):
            return job
    return None


def fair_order(snapshot: Snapshot, head: Job | None = None) -> list[Job]:
    """Pending jobs in ``sjf-bsbf-fair`` order: ``head`` (the starving head,
    :func:`starving_head`) first, then every other job by the aged key
    ``P_j / (1 + wait/aging_s)`` (ties: submit time, id), each tenant's jobs dealt into its
    positions highest priority first (:func:`~scheduling.core.priority.by_priority_within_tenants`).
    Times in s."""
    now, aging_s = snapshot.now, snapshot.config.aging_s
    rest = sorted(
        (j for j in snapshot.pending if head is None or j.id != head.id),
        key=lambda j: (aged_key(j, now, aging_s), j.submit_time, j.id),
    )
    rest = by_priority_within_tenants(rest)  # the starving head stays first: the bound is a promise
    return rest if head is None else [head, *rest]


class SjfBsbfFairPolicy:
    """Quota-aware SJF-BSBF with aging and a starvation bound (module docstring).

    One round: (1) reclaim — preempt other tenants' borrowed jobs for owners' waiting jobs that fit
    their unused guarantees (:func:`~scheduling.core.reclaim.reclaim_preemptions`; not in reclaim
    mode ``"bound"``); when it preempts, the owners' jobs it made room for go first, so that no other
    job takes the reclaimed GPUs; (2) the SJF-BSBF round (:func:`~scheduling.core.rounds.sharing_round`
    with :class:`~scheduling.core.policies.sjf_bsbf.BestBenefitFinder`) over the remaining running
    jobs, in :func:`fair_order`, with the quota gate (its owners-first rule keeps idle GPUs for
    owners' waiting jobs) and the starving head's reservation. Preempted jobs wait until the next
    round. Without quotas, it never preempts.
    """

    name = "sjf-bsbf-fair"
    preemptive = True
    reclaims = True  # lent GPUs come back by preemption in reclaim modes "preempt" and "both"
    splits_quota_use = True  # its QuotaGate gets `charges`: a shared GPU by the normalised split
    # preempts (reclaim), so no capacity rule. After a round that decided nothing, aging and the
    # starvation bound only reorder pending jobs that each failed against the same cluster state
    # (none could start, none could claim GPUs by reclaim, which depends on quotas and usage, not on
    # time), and the borrow bound compares a pending job's fixed remaining time; the one instant
    # time alone matters, a job reaching the starvation bound with quotas, holds for every policy
    # (scheduling.core.skip.bound_crossing_horizon)
    skip_rule = SkipRule(capacity=False, shares=True, horizon=never)

    def __init__(self, *, incremental: bool = True) -> None:
        self._memo: BestBenefitMemo | None = None
        # False: every round from scratch (no memo of profile answers, reclaim's victims worked
        # out afresh for every job): the tests compare the two
        self.incremental = incremental

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round; deterministic, mutates none of its inputs (keeps only pure
        caches of profile answers between rounds, like SJF-BSBF)."""
        if not self.incremental:
            self._memo = None
        memo = self._memo = BestBenefitMemo(profile) if self._memo is None else self._memo.fresh(profile)
        can_start = start_checker(snapshot, memo.profile)
        head = starving_head(snapshot, can_start)
        head_id = None if head is None else head.id
        order = fair_order(snapshot, head)
        # quota use by the normalised split (docs/FAIRNESS.md §1): co-location onto another
        # tenant's guarantee is seen, refused at the gate and reclaimed
        # (SchedulerConfig.split_charge; off: whole gangs, as the other policies count)
        split = snapshot.tenant_quotas and snapshot.config.split_charge
        shares = gpu_shares(snapshot.running, memo.profile) if split else None
        preemptions, claimed = reclaim_preemptions(
            snapshot, order, self.name, can_start, shares, memo=self.incremental
        )
        charges = None if shares is None else running_charges(snapshot.running, memo.profile)
        requeued: tuple[Job, ...] = ()
        if preemptions:  # the jobs reclaim made room for first, then the fair order
            first = set(claimed)
            order = sorted(order, key=lambda job: job.id not in first)  # stable
            gone = {p.job_id for p in preemptions}
            kept = tuple(rj for rj in snapshot.running if rj.job.id not in gone)
            # the preempted jobs wait from the next round on, when reclaim counts them as waiting:
            # the quota gate counts them now, so no start this round is reclaimed for them next
            requeued = tuple(rj.job for rj in snapshot.running if rj.job.id in gone)
            snapshot = replace(snapshot, running=kept)
            charges = None if shares is None else running_charges(kept, memo.profile)
        return sharing_round(
            snapshot,
            memo.profile,
            self.name,
            lambda state, _profile: BestBenefitFinder(state, memo),
            explain=explain,
            order=order,
            starving=lambda job: job.id == head_id,
            preemptions=preemptions,
            can_preempt=True,
            charges=charges,
            requeued=requeued,
        )
