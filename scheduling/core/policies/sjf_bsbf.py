"""SJF-BSBF: shortest job first with best-sharing-benefit-first co-location.

Luo, Wang, Shi, Lai, Qi, Zhang, Wang, "Scheduling Deep Learning Jobs in Multi-Tenant GPU Clusters
via Wise Resource Sharing", IEEE/ACM IWQoS 2024 (arXiv 2407.13088); MODEL.md §2–3 (shared docs).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass

from scheduling.core.placement import CachedProfile, Resident, RoundState, SharePlan, sharing_round
from scheduling.core.sharing import (
    PairPlan,
    SubBatchOption,
    benefit_threshold_s,
    best_option,
    gang_shares,
    resident_remaining_s,
    shares,
)
from scheduling.core.types import Job, JobId, Profile, RoundDecisions, Snapshot

_ENTRY_MAX = (math.inf, math.inf)


@dataclass(slots=True)
class _Group:
    """Residents that look alike to every waiting job: same shape (model, batch size, GPUs,
    memory), same sub-batch and same memory room — so memory fit and ``ξ`` are shared, and only
    ``B`` differs. ``entries`` are ``(B, submit_time, id)``, sorted."""

    sample: Job
    sub_batch: int
    room_mb: float
    entries: list[tuple[float, float, JobId]]


class BestBenefitFinder:
    """Partner choice of SJF-BSBF (MODEL.md §3, step 3).

    Every resident is judged with the pairwise rule (:mod:`scheduling.core.sharing`): the waiting
    job's sub-batch minimising ``T_con`` among those that fit the resident's memory room, then
    ``T_con < T_seq``. Beneficial residents are visited in ascending ``T_con`` (ties: submit time,
    id) and their GPUs added until the job has ``need`` GPUs.

    Speed: residents are grouped (:class:`_Group`); memory fit and ``ξ`` are computed once per
    (job shape, group). Within a group ``T_con`` grows with ``B`` and, for each sub-batch, sharing
    pays iff ``B`` exceeds :func:`~scheduling.core.sharing.benefit_threshold_s`; so a bisection skips
    the residents that cannot pay, and a heap merges the groups in ascending ``T_con``.
    """

    def __init__(self, state: RoundState, profile: CachedProfile) -> None:
        self._profile = profile
        self._min_sub = state.min_sub_batch
        self._groups: dict[tuple, _Group] = {}
        self._where: dict[JobId, tuple[Resident, tuple, float]] = {}
        self._options: dict[tuple, tuple[tuple[int, float, float], ...]] = {}
        for resident in state.residents.values():
            self.added(resident)

    def added(self, resident: Resident) -> None:
        """Index a new resident."""
        job = resident.job
        key = (CachedProfile.shape(job), resident.sub_batch, resident.room_mb)
        b_s = resident_remaining_s(self._profile, job, resident.sub_batch)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(job, resident.sub_batch, resident.room_mb, [])
        insort(group.entries, (b_s, job.submit_time, job.id))
        self._where[job.id] = (resident, key, b_s)

    def removed(self, resident: Resident) -> None:
        """Drop a withdrawn resident."""
        job = resident.job
        _, key, b_s = self._where.pop(job.id)
        entries = self._groups[key].entries
        del entries[bisect_left(entries, (b_s, job.submit_time, job.id))]
        if not entries:
            del self._groups[key]

    def _fits(self, job: Job, shape: tuple, key: tuple, group: _Group
              ) -> tuple[tuple[int, float, float], ...]:
        """``(sub_batch, ξ_job, ξ_resident)`` for each sub-batch of ``job`` fitting the group's room."""
        options = self._options.get((shape, key))
        if options is None:
            p = self._profile
            options = tuple(
                (sub, *p.slowdown(job, sub, group.sample, group.sub_batch))
                for sub in p.sub_batches(job, self._min_sub)
                if p.memory_mb(job, sub) <= group.room_mb
            )
            self._options[(shape, key)] = options
        return options

    def find(self, job: Job, need: int) -> SharePlan | str:
        """Beneficial partners for ``need`` GPUs in ascending ``T_con``, or why the job waits."""
        p = self._profile
        shape = CachedProfile.shape(job)
        remaining = job.remaining_iterations
        a_of: dict[int, float] = {}
        heap: list[tuple[float, float, JobId, int, tuple, list[SubBatchOption], PairPlan]] = []
        fitting = 0
        for key, group in self._groups.items():
            fits = self._fits(job, shape, key, group)
            if not fits:
                continue
            fitting += len(group.entries)
            options: list[SubBatchOption] = []
            threshold = math.inf
            for sub, xi_a, xi_b in fits:
                a_s = a_of.get(sub)
                if a_s is None:
                    a_s = a_of[sub] = remaining * p.iter_time_s(job, sub)
                options.append((sub, xi_a, xi_b, a_s))
                threshold = min(threshold, benefit_threshold_s(a_s, xi_a, xi_b))
            # residents with B at or below every option's threshold cannot pay; a relative margin
            # keeps rounding from skipping one that does (it is then judged exactly)
            start = bisect_right(group.entries, (threshold * (1 - 1e-9), math.inf))
            self._push_next(heap, key, group, options, start)
        partners: list[tuple[Resident, tuple[int, ...]]] = []
        subs: list[int] = []
        got = 0
        while heap and got < need:
            _, _, job_id, index, key, options, plan = heapq.heappop(heap)
            resident = self._where[job_id][0]
            take = resident.gpu_ids[: need - got]
            partners.append((resident, take))
            subs.append(plan.sub_batch)
            got += len(take)
            self._push_next(heap, key, self._groups[key], options, index + 1)
        if got < need:
            return (f"needs {need} more GPUs than the idle ones; sharing pays (T_con < T_seq) on only "
                    f"{got} resident GPUs ({fitting} resident jobs have memory room for it)")
        return self._plan(job, partners, min(subs))

    def _push_next(self, heap: list, key: tuple, group: _Group, options: list[SubBatchOption],
                   index: int) -> None:
        """Push the group's first beneficial resident at or after ``index``, if any."""
        entries = group.entries
        for i in range(index, len(entries)):
            b_s, submit, job_id = entries[i]
            plan = best_option(options, b_s)
            if plan is not None and plan.beneficial:
                heapq.heappush(heap, (plan.t_con_s, submit, job_id, i, key, options, plan))
                return

    def _plan(self, job: Job, partners: list[tuple[Resident, tuple[int, ...]]], sub: int) -> SharePlan | str:
        """Settle one sub-batch for the whole gang (the smallest the pairs chose, so memory fits every
        partner) and re-judge every pair at it with the gang's slowest-GPU pace (ours)."""
        p = self._profile
        if any(p.memory_mb(job, sub) > resident.room_mb for resident, _ in partners):
            return f"no common sub-batch fits the memory of all {len(partners)} partners"
        explained = gang_shares(p, job, sub, [(r.job, r.sub_batch, ids) for r, ids in partners])
        if not all(shares(s.t_seq_s, s.t_con_s) for s in explained):
            return (f"sharing pays pair by pair, but not for the gang at the common sub-batch {sub} "
                    f"with {len(partners)} partners")
        detail = "; ".join(
            f"job {s.partner_id} on GPU{'s' if len(s.gpu_ids) > 1 else ''} {','.join(map(str, s.gpu_ids))}: "
            f"ξ {s.xi_self:.2f}/{s.xi_partner:.2f}, T_con {s.t_con_s:.0f} s < T_seq {s.t_seq_s:.0f} s"
            for s in explained
        )
        return SharePlan(sub, tuple(partners), explained,
                         f"best sharing benefit first, sub-batch {sub} "
                         f"({job.batch_size // sub} accumulation steps): {detail}")


class SjfBsbfPolicy:
    """SJF-BSBF, one round (MODEL.md §3; Luo et al., IWQoS 2024), non-preemptive.

    1. Pending jobs sorted by ``P_j`` = remaining exclusive time, shortest first (ties: submit
       time, id).
    2. For each job ``J``: if enough idle GPUs → idle GPUs only (one node if possible, else the
       fewest nodes). Otherwise every resident (a running job alone on its GPUs with memory room) is
       judged by the pairwise rule (``T_con < T_seq``, MODEL.md §2) at the sub-batch of ``J``
       minimising ``T_con`` under the memory limit; beneficial residents are visited in ascending
       ``T_con`` and their GPUs added to the idle ones until ``J`` has ``G_J`` GPUs; if they do not
       suffice, ``J`` waits (with the reason) and the next job is tried.
    3. At most two jobs per GPU: a resident joined in this round is no longer a candidate; a job
       started alone in this round becomes one. Running jobs are never preempted or migrated.

    Our choices where the paper is silent: a gang joining several residents uses one sub-batch,
    the smallest its pairs chose, and every pair must still pay at it with the gang running at the
    pace of its slowest GPU (``ξ`` = the largest over its partners); a running job that already
    shares a GPU is not a candidate.
    """

    name = "sjf-bsbf"
    preemptive = False

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round; deterministic, mutates nothing."""
        return sharing_round(snapshot, profile, self.name, BestBenefitFinder, explain=explain)
