"""SJF-BSBF-fair: quota-aware SJF-BSBF with aging and a starvation bound **(ours)**.

SJF-BSBF (Luo et al., IWQoS 2024; MODEL.md §2–3) keeps its pairwise sharing rule and partner
choice unchanged; what changes is *who* may start and in which order (docs/FAIRNESS.md):

- **quotas with borrowing** (:mod:`scheduling.core.quota`): the quota gate of every policy, and
  lent GPUs are reclaimed by preempting borrowed work (``reclaim="preempt"``/``"both"``) or by
  admitting borrowers only when ``P_j`` ≤ ``borrow_bound_s`` (``"bound"``/``"both"``);
- **aging**: pending jobs ordered by ``P_j / (1 + wait/aging_s)`` instead of ``P_j``;
- **starvation bound**: a job waiting at least ``starvation_bound_s`` goes first (oldest wait
  first) and, if it cannot start for lack of GPUs, reserves them: no later job starts in that
  round, so the GPUs of finishing jobs are kept for it. It therefore starts at the latest once
  the jobs running when it became blocked have finished (or a reclaim gives its owner GPUs).
"""

from __future__ import annotations

from dataclasses import replace

from scheduling.core.placement import sharing_round
from scheduling.core.policies.sjf_bsbf import BestBenefitFinder, _Memo
from scheduling.core.quota import (
    NO_QUOTA,
    aged_key,
    normalise,
    reclaim_preemptions,
    usage_by_tenant,
    wait_s,
)
from scheduling.core.types import Job, Profile, RoundDecisions, Snapshot


def fair_order(snapshot: Snapshot) -> list[Job]:
    """Pending jobs in ``sjf-bsbf-fair`` order: starving jobs (wait ≥ ``starvation_bound_s``)
    first by wait start ``(waiting_since, submit_time, id)``, then the others by the aged key
    ``P_j / (1 + wait/aging_s)`` (ties: submit time, id). Times in s."""
    now = snapshot.now
    config = snapshot.config
    bound = config.starvation_bound_s

    def key(job: Job) -> tuple:
        if wait_s(job, now) >= bound:
            return (0, job.waiting_since, job.submit_time, job.id)
        return (1, aged_key(job, now, config.aging_s), job.submit_time, job.id)

    return sorted(snapshot.pending, key=key)


class SjfBsbfFairPolicy:
    """Quota-aware SJF-BSBF with aging and a starvation bound (module docstring).

    One round: (1) reclaim — preempt other tenants' borrowed jobs for owners' waiting jobs that fit
    their unused guarantees (:func:`~scheduling.core.quota.reclaim_preemptions`; not in reclaim
    mode ``"bound"``); with quotas the order puts first the owners' jobs reclaim made room for,
    then the other jobs that fit their tenant's unused guarantee (guarantees first); (2) the
    SJF-BSBF round (:func:`~scheduling.core.placement.sharing_round`
    with :class:`~scheduling.core.policies.sjf_bsbf.BestBenefitFinder`) over the remaining running
    jobs, in :func:`fair_order`, with the quota gate and the starving jobs' reservation. Preempted
    jobs wait until the next round. Without quotas, it never preempts.
    """

    name = "sjf-bsbf-fair"
    preemptive = True

    def __init__(self) -> None:
        self._memo: _Memo | None = None

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round; deterministic, mutates none of its inputs (keeps only pure
        caches of profile answers between rounds, like SJF-BSBF)."""
        memo = self._memo = _Memo(profile) if self._memo is None else self._memo.fresh(profile)
        order = fair_order(snapshot)
        preemptions, claimed = reclaim_preemptions(snapshot, order, self.name)
        if snapshot.tenant_quotas:  # guarantees first: the owners' jobs reclaim made room for, then
            # the other jobs that fit their tenant's unused guarantee now, then the rest
            first = set(claimed)
            quotas = normalise(snapshot.tenant_quotas)
            usage = usage_by_tenant(snapshot.running)

            def rank(job: Job) -> int:
                if job.id in first:
                    return 0
                return 1 if usage.get(job.tenant, 0) + job.gpus <= quotas.get(
                    job.tenant, NO_QUOTA).guaranteed_gpus else 2

            order = sorted(order, key=rank)  # stable: fair order within each rank
        if preemptions:
            gone = {p.job_id for p in preemptions}
            kept = tuple(rj for rj in snapshot.running if rj.job.id not in gone)
            snapshot = replace(snapshot, running=kept)
        bound = snapshot.config.starvation_bound_s
        now = snapshot.now
        return sharing_round(
            snapshot, memo.profile, self.name, lambda state, _profile: BestBenefitFinder(state, memo),
            explain=explain, order=order, starving=lambda job: wait_s(job, now) >= bound,
            preemptions=preemptions, can_preempt=True,
        )
