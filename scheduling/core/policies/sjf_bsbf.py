"""SJF-BSBF: shortest job first with best-sharing-benefit-first co-location.

Luo, Wang, Shi, Lai, Qi, Zhang, Wang, "Scheduling Deep Learning Jobs in Multi-Tenant GPU Clusters
via Wise Resource Sharing", IEEE/ACM IWQoS 2024 (arXiv 2407.13088); MODEL.md §2–3 (shared docs).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass, field

from scheduling.core.profile_cache import answer_key, cached
from scheduling.core.ranking import PendingRanking
from scheduling.core.round_state import Resident, RoundState
from scheduling.core.rounds import SharePlan, sharing_round, sjf_key
from scheduling.core.sharing import (
    benefit_threshold_s,
    best_prepared,
    gang_shares,
    losing_gaps,
    prepare_options,
    resident_remaining_s,
    shares,
)
from scheduling.core.skip import SkipRule, never
from scheduling.core.start_reasons import BestBenefitReason
from scheduling.core.types import Job, JobId, Profile, RoundDecisions, Snapshot

_Gaps = tuple[list[float], list[float]]
"""Open intervals of a resident's ``B`` (s) on which sharing provably does not pay
(:func:`~scheduling.core.sharing.losing_gaps`): their lower and upper ends."""
_NO_GAPS: _Gaps = ([], [])
_Pair = list  # [smallest threshold (s), prepared options, _Gaps or None while not yet computed]
# the gaps cost O(k²) in the number k of a pair's options: beyond this many, residents are judged
# one by one as before
_GAP_OPTIONS = 6

_Options = tuple[tuple[int, float, float, float], ...]
_Fits = tuple[_Options, bool, float, float]
"""``((sub_batch, ξ_job, ξ_resident, c), ...)`` per memory-feasible sub-batch, with ``c`` the benefit
threshold per second of ``A`` (:func:`~scheduling.core.sharing.benefit_threshold_s` at ``A = 1``);
whether every ``ξ`` is ≥ 1; and the smallest branch coefficients ``κ = ξ_b·(1 − 1/(2ξ_a))`` and
``μ = ξ_a·(1 − 1/(2ξ_b))`` over the options (with every ``ξ ≥ 1``, ``T_con ≥ min(A/2 + κ·B,
B/2 + μ·A)``)."""


@dataclass(slots=True)
class _Group:
    """Residents that look alike to every waiting job: same profile answers (model, batch size,
    memory: :data:`~scheduling.core.profile_cache.answer_key`, whatever their gang sizes), same
    sub-batch and same memory room — so memory fit and ``ξ`` are shared, and only ``B`` differs.
    ``entries`` are ``(B, submit_time, id)``, sorted; ``number`` is the key's id in the policy's
    :class:`BestBenefitMemo`."""

    key: tuple
    number: int
    sample: Job
    sub_batch: int
    room_mb: float
    entries: list[tuple[float, float, JobId]] = field(default_factory=list)


class BestBenefitMemo:
    """What a policy object remembers between rounds for one profile: its
    :class:`~scheduling.core.profile_cache.CachedProfile`, small integer ids of job shapes (the
    profile's answer keys, :data:`~scheduling.core.profile_cache.answer_key`: gang sizes apart)
    and group keys, the options of each (shape, group) pair, a
    waiting job's exclusive times ``A`` per sub-batch (fixed while it waits) and, per such job and
    group, its smallest benefit threshold and options with ``A`` (so a job that waits round after
    round is not re-derived against the same groups). Pure caches — decisions never depend on
    them; dropped when the profile object changes or when they grow past :attr:`LIMIT` entries
    (the per-job-and-group entries past :attr:`PAIRS_LIMIT`)."""

    LIMIT = 200_000
    PAIRS_LIMIT = 1_000_000

    def __init__(self, profile: Profile, *, gaps: bool = True, gaps_after: int = 2) -> None:
        self.source = profile
        # whether a pair's losing gaps of B are computed (sharing.losing_gaps), once a scan of the
        # pair judged more than gaps_after residents in vain: off, every resident above the
        # threshold is judged (the from-scratch policy, which the tests compare with)
        self.gaps = gaps
        self.gaps_after = gaps_after
        self.profile = cached(profile)
        self.shape_ids: dict[tuple, int] = {}
        self.group_ids: dict[tuple, int] = {}
        # shape id → group number → the shape's options against the group (all, not dominated)
        self.fits: dict[int, dict[int, tuple[_Fits, _Fits]]] = {}
        # (shape id, iteration time, remaining iterations) → the job's A per sub-batch, whether
        # dominated sub-batches may be dropped, and its smallest A (see BestBenefitFinder.find)
        self.times: dict[tuple[int, float, float], tuple[dict[int, float], int, float]] = {}
        # that key → group number → the smallest benefit threshold (s), the options with A and
        # the gaps of B where sharing provably does not pay (one dict per job: one look-up a search)
        self.pairs: dict[tuple[int, float, float], dict[int, _Pair]] = {}
        self.pair_count = 0
        # job id → (the job object, the sub-batch floor, share_unknown, then _numbers' answer)
        self.jobs: dict[JobId, tuple] = {}
        # shape id → the shape's (sub-batch, memory per GPU in MB), largest sub-batch first
        self.memory: dict[int, tuple[tuple[int, float], ...]] = {}

    def fresh(self, profile: Profile) -> BestBenefitMemo:
        """This memo, or a new one for another profile object or when the caches grew too big."""
        size = (
            sum(len(f) for f in self.fits.values())
            + len(self.shape_ids)
            + len(self.group_ids)
            + len(self.times)
            + len(self.memory)
            + self.profile.size
        )
        if self.pair_count > self.PAIRS_LIMIT or len(self.jobs) > self.LIMIT:  # per job: their own bounds
            self.pairs.clear()
            self.pair_count = 0
            self.jobs.clear()  # they hold dicts of pairs
        return (
            self
            if profile is self.source and size < self.LIMIT
            else BestBenefitMemo(profile, gaps=self.gaps, gaps_after=self.gaps_after)
        )


class BestBenefitFinder:
    """Partner choice of SJF-BSBF (MODEL.md §3, step 3).

    Every resident is judged with the pairwise rule (:mod:`scheduling.core.sharing`): the waiting
    job's sub-batch minimising ``T_con`` among those that fit the resident's memory room, then
    ``T_con < T_seq``. Beneficial residents are visited in ascending ``T_con`` (ties: the smaller
    ``B``, the resident that ends sooner; then submit time, id) and their GPUs added until the job
    has ``need`` GPUs. The ``B`` before the submit time is ours: ``T_con`` grows with ``B``, but two
    ``B`` an ulp apart can round to the same ``T_con``, and a group of residents is searched in
    ``B`` order, so only this tie rule gives the same choice however residents are grouped.

    Speed, without changing any decision (a test compares with a brute-force search):

    - residents are grouped (:class:`_Group`); memory fit and ``ξ`` are computed once per
      (job shape, group) and remembered across rounds (:class:`BestBenefitMemo`);
    - within a group ``T_con`` grows with ``B``, and for each sub-batch sharing pays iff ``B``
      exceeds :func:`~scheduling.core.sharing.benefit_threshold_s`: a bisection skips the
      residents that cannot pay;
    - with every ``ξ ≥ 1``, ``T_con ≥ min(A/2 + κ·B, B/2 + μ·A)`` with ``κ``, ``μ`` the smallest
      branch coefficients over the job's options (:data:`_Fits`, :meth:`_scan`), which grows with
      ``B``; so groups are visited in ascending smallest ``B`` only while that bound (at the job's
      smallest ``A``) could still match the best ``T_con`` found, and a group whose own bound
      cannot is deferred until the best found grows past it; groups with some ``ξ < 1`` are always
      visited;
    - a heap merges the visited groups in ascending ``T_con``.
    """

    def __init__(self, state: RoundState, memo: BestBenefitMemo, *, explain: bool = True) -> None:
        self._memo = memo
        self._explain = explain  # False: a failure's reason is not read, so it is not counted
        self._profile = memo.profile
        self._min_sub = state.min_sub_batch
        self._reason = BestBenefitReason(state.gpus)  # a shared start's reason, formatted when read
        self._unknown_ok = state.share_unknown
        self._groups: dict[tuple, _Group] = {}
        self._by_head: list[tuple[float, int, _Group]] = []  # (smallest B, number, group), sorted
        self._where: dict[JobId, tuple[Resident, _Group, float]] = {}
        self._created = 0  # groups created so far (invalidates the per-shape scans below)
        self._unbounded: dict[tuple[int, int], tuple[int, list[_Group], float, float]] = {}  # see _scan
        for resident in state.residents.values():
            self.added(resident)

    def added(self, resident: Resident) -> None:
        """Index a new resident."""
        job = resident.job
        # by answer key, not shape: a 1-GPU and an 8-GPU resident of one model are one group
        key = (answer_key(job), resident.sub_batch, resident.room_mb)
        b_s = resident_remaining_s(self._profile, job, resident.sub_batch)
        group = self._groups.get(key)
        if group is None:
            number = self._memo.group_ids.setdefault(key, len(self._memo.group_ids))
            group = self._groups[key] = _Group(key, number, job, resident.sub_batch, resident.room_mb)
            self._created += 1
        entries = group.entries
        head = entries[0][0] if entries else None
        insort(entries, (b_s, job.submit_time, job.id))
        if entries[0][0] != head:
            self._head_moved(group, head)
        self._where[job.id] = (resident, group, b_s)

    def removed(self, resident: Resident) -> None:
        """Drop a withdrawn resident (an emptied group is dropped too, keeping the scans short)."""
        job = resident.job
        _, group, b_s = self._where.pop(job.id)
        entries = group.entries
        head = entries[0][0]
        del entries[bisect_left(entries, (b_s, job.submit_time, job.id))]
        if not entries:
            self._head_moved(group, head)
            del self._groups[group.key]
        elif entries[0][0] != head:
            self._head_moved(group, head)

    def _head_moved(self, group: _Group, old: float | None) -> None:
        """Keep :attr:`_by_head` sorted after the group's smallest ``B`` changed from ``old``
        (``None``: the group was empty)."""
        if old is not None:
            del self._by_head[bisect_left(self._by_head, (old, group.number))]
        if group.entries:
            insort(self._by_head, (group.entries[0][0], group.number, group))

    def _fits(self, job: Job, shape_id: int, group: _Group) -> tuple[_Fits, _Fits]:
        """The job's sub-batches fitting the group's memory room (:data:`_Fits`): all of them, and
        only those not dominated by a larger sub-batch with ``ξ`` no higher on both sides — the
        latter is valid when the job's iteration time does not fall as its sub-batch shrinks,
        since ``T_con`` grows with ``A``, ``ξ_a`` and ``ξ_b`` (MODEL.md §2 formulas)."""
        p = self._profile
        memory = self._memo.memory.get(shape_id)
        if memory is None:  # the job's (sub-batch, MB per GPU), the same against every group
            memory = self._memo.memory[shape_id] = tuple(
                (sub, p.memory_mb(job, sub)) for sub in p.sub_batches(job, self._min_sub)
            )
        sample, sample_sub, room, unknown_ok = group.sample, group.sub_batch, group.room_mb, self._unknown_ok
        every: list[tuple[int, float, float, float]] = []
        kept: list[tuple[int, float, float, float]] = []
        for sub, mb in memory:
            if mb > room or not p.pair_allowed(job, sub, sample, sample_sub, unknown_ok):
                continue
            xi_a, xi_b = p.slowdown(job, sub, sample, sample_sub)
            option = (sub, xi_a, xi_b, benefit_threshold_s(1.0, xi_a, xi_b))
            every.append(option)
            for k in kept:
                if k[1] <= xi_a and k[2] <= xi_b:
                    break
            else:
                kept.append(option)
        all_options = _with_bound(every)
        return all_options, (all_options if len(kept) == len(every) else _with_bound(kept))

    def _options(self, job: Job, shape_id: int, group: _Group, prune: int) -> _Fits:
        """The job's options against ``group`` (memoised across rounds)."""
        fits_of = self._memo.fits.get(shape_id)
        if fits_of is None:
            fits_of = self._memo.fits[shape_id] = {}
        both = fits_of.get(group.number)
        if both is None:
            both = fits_of[group.number] = self._fits(job, shape_id, group)
        return both[prune]

    def _scan(self, job: Job, shape_id: int, prune: int) -> tuple[list[_Group], float, float]:
        """For the job's shape: the groups against which some option has ``ξ < 1`` (always
        visited: no bound applies), and over all other groups' options the smallest
        ``κ = ξ_b·(1 − 1/(2ξ_a))`` and ``μ = ξ_a·(1 − 1/(2ξ_b))`` (both ≥ 1/2), the coefficients of
        ``B`` and ``A`` in the two branches of ``T_con``. Rescanned only when groups were created
        since the last scan for this shape."""
        scan = self._unbounded.get((shape_id, prune))
        if scan is None or scan[0] != self._created:
            unbounded: list[_Group] = []
            kappa = mu = math.inf
            fits_of = self._memo.fits.get(shape_id)
            if fits_of is None:
                fits_of = self._memo.fits[shape_id] = {}
            for group in self._groups.values():
                both = fits_of.get(group.number)
                if both is None:
                    both = fits_of[group.number] = self._fits(job, shape_id, group)
                _, bounded, group_kappa, group_mu = both[prune]
                if not bounded:
                    unbounded.append(group)
                else:
                    if group_kappa < kappa:
                        kappa = group_kappa
                    if group_mu < mu:
                        mu = group_mu
            scan = self._unbounded[(shape_id, prune)] = (self._created, unbounded, kappa, mu)
        return scan[1], scan[2], scan[3]

    def _numbers(self, job: Job) -> tuple[int, dict[int, float], int, float, dict[int, _Pair]]:
        """The job's shape id, its ``A`` (s) per sub-batch, whether dominated sub-batches may be
        dropped, its smallest ``A`` and its pairs (group number → :data:`_Pair`), memoised."""
        p = self._profile
        shape_ids = self._memo.shape_ids
        # the memo's "shape" is the profile's answer key (the gang size changes no option); the
        # options also depend on the sub-batch floor and on whether unknown pairs may share,
        # which may change between rounds
        shape_key = (answer_key(job), self._min_sub, self._unknown_ok)
        shape_id = shape_ids.setdefault(shape_key, len(shape_ids))
        remaining = job.remaining_iterations
        times_key = (shape_id, job.iter_time_s, remaining)
        times = self._memo.times.get(times_key)
        if times is None:
            subs = p.sub_batches(job, self._min_sub)
            a_of = {sub: remaining * p.iter_time_s(job, sub) for sub in subs}
            # a smaller sub-batch is never faster → dominated options may be dropped (see _fits)
            prune = int(all(a_of[big] <= a_of[small] for big, small in zip(subs, subs[1:], strict=False)))
            times = self._memo.times[times_key] = (a_of, prune, min(a_of.values()))
        pairs = self._memo.pairs.get(times_key)
        if pairs is None:
            pairs = self._memo.pairs[times_key] = {}
        return shape_id, times[0], times[1], times[2], pairs

    def find(self, job: Job, need: int) -> SharePlan | str:
        """Beneficial partners for ``need`` GPUs in ascending ``T_con``, or why the job waits."""
        memo = self._memo
        # the same (frozen) job object searched again under the same floor: its numbers are known
        known = memo.jobs.get(job.id)
        if (
            known is not None
            and known[0] is job
            and known[1] == self._min_sub
            and known[2] == self._unknown_ok
        ):
            shape_id, a_of, prune, a_min, pairs = known[3:]
        else:
            shape_id, a_of, prune, a_min, pairs = self._numbers(job)
            memo.jobs[job.id] = (job, self._min_sub, self._unknown_ok, shape_id, a_of, prune, a_min, pairs)
        gaps_after = memo.gaps_after
        heap: list[tuple] = []
        visited: set[int] = set()

        def visit(group: _Group) -> None:
            number = group.number
            visited.add(number)
            entries = group.entries
            if not entries:
                return
            pair = pairs.get(number)
            if pair is None:  # the same job (A) against the same group: the same numbers
                options = self._options(job, shape_id, group, prune)[0]
                # residents with B at or below every option's threshold cannot pay (the relative
                # margin keeps rounding from skipping one that does: each is then judged exactly)
                lows: list[float] = []  # each option's threshold (s)
                raw: list[tuple[int, float, float, float]] = []
                for sub, xi_a, xi_b, c in options:
                    a_s = a_of[sub]
                    lows.append(c * a_s)
                    raw.append((sub, xi_a, xi_b, a_s))
                threshold = min(lows, default=math.inf) * (1 - 1e-9)
                with_a = prepare_options(raw)
                # the gaps are computed once a scan of this pair has judged in vain (_push_next)
                gaps = None if self._memo.gaps and len(with_a) <= _GAP_OPTIONS else _NO_GAPS
                pair = pairs[number] = [threshold, with_a, gaps]
                self._memo.pair_count += 1
            threshold, with_a = pair[0], pair[1]
            if not with_a or threshold >= entries[-1][0]:
                return
            start = bisect_right(entries, (threshold, math.inf)) if threshold > 0 else 0
            _push_next(heap, group, pair, start, gaps_after)

        unbounded, kappa, mu = self._scan(job, shape_id, prune)
        fits_of = self._memo.fits.get(shape_id)
        if fits_of is None:  # no group was scanned yet
            fits_of = self._memo.fits[shape_id] = {}
        for group in unbounded:
            visit(group)
        by_head = self._by_head
        partners: list[tuple[Resident, tuple[int, ...]]] = []
        subs_chosen: list[int] = []
        remaining: list[float] = []  # the partners' B (s)
        got = 0
        position = 0
        deferred: list[tuple[float, int, _Group]] = []  # groups whose own bound exceeded the best then
        while got < need:
            best = heap[0][0] if heap else math.inf
            while True:
                if deferred and deferred[0][0] <= best:
                    visit(heapq.heappop(deferred)[2])
                elif position < len(by_head):
                    head, number, group = by_head[position]
                    # with nothing found yet (best = ∞) no bound can exceed it: every group is visited
                    if best < math.inf:
                        low, high = a_min * 0.5 + kappa * head, head * 0.5 + mu * a_min
                        if (high if high < low else low) > best:
                            break  # nor can any later group: the bound grows with the smallest B
                    position += 1
                    if number in visited:
                        continue
                    if best < math.inf:
                        both = fits_of.get(number)
                        _, _, group_kappa, group_mu = (
                            both[prune] if both is not None else self._options(job, shape_id, group, prune)
                        )
                        # the job's threshold against the group, when kept from an earlier round:
                        # every resident it could join there has a larger B, so the bound grows
                        pair = pairs.get(number)
                        if pair is not None and pair[0] > head:
                            head = pair[0]
                        low, high = a_min * 0.5 + group_kappa * head, head * 0.5 + group_mu * a_min
                        own = high if high < low else low
                        if own > best:
                            visited.add(number)
                            heapq.heappush(deferred, (own, number, group))
                            continue
                    visit(group)
                else:
                    break
                best = heap[0][0] if heap else math.inf
            if not heap:
                break
            _, _, _, job_id, index, group, pair, sub = heapq.heappop(heap)
            resident, _, b_s = self._where[job_id]
            take = resident.gpu_ids[: need - got]
            partners.append((resident, take))
            remaining.append(b_s)
            subs_chosen.append(sub)
            got += len(take)
            _push_next(heap, group, pair, index + 1, gaps_after)
        if got < need:
            if not self._explain:
                return "sharing pays on too few resident GPUs"
            fitting = sum(
                len(g.entries) for g in self._groups.values() if self._options(job, shape_id, g, prune)[0]
            )
            return (
                f"needs {need} more GPUs than the idle ones; sharing pays (T_con < T_seq) on only "
                f"{got} resident GPUs ({fitting} resident jobs have memory room for it)"
            )
        return self._plan(job, partners, min(subs_chosen), remaining)

    def refit(self, job: Job, plan: SharePlan, sub_batch: int) -> SharePlan | str:
        """``plan``'s partners at the smaller ``sub_batch`` (samples), settled and judged again as
        a found gang is (:meth:`_plan`: memory, allowed pairs, every pair paying at the gang's
        pace); or why not."""
        return self._plan(job, list(plan.partners), sub_batch)

    def _plan(
        self,
        job: Job,
        partners: list[tuple[Resident, tuple[int, ...]]],
        sub: int,
        remaining: list[float] | None = None,
    ) -> SharePlan | str:
        """Settle one sub-batch for the whole gang (the smallest the pairs chose, so memory fits every
        partner) and re-judge every pair at it with the gang's slowest-GPU pace (ours);
        ``remaining``: the partners' ``B`` (s) as indexed (computed again when ``None``)."""
        p = self._profile
        memory = p.memory_mb(job, sub)
        for resident, _ in partners:
            if memory > resident.room_mb:
                return f"no common sub-batch fits the memory of all {len(partners)} partners"
        # each pair was found allowed at its own sub-batch; the common one may be another pair
        # (incompatible, or of unknown slowdown): LearnedProfile.pair_allowed, docs/LEARNING.md
        for resident, _ in partners:
            if not p.pair_allowed(job, sub, resident.job, resident.sub_batch, self._unknown_ok):
                return (
                    f"at the common sub-batch {sub} not every one of its {len(partners)} partners may "
                    f"share with it (incompatible, or a slowdown nobody knows)"
                )
        explained = gang_shares(p, job, sub, [(r.job, r.sub_batch, ids) for r, ids in partners], remaining)
        for share in explained:
            if not shares(share.t_seq_s, share.t_con_s):
                return (
                    f"sharing pays pair by pair, but not for the gang at the common sub-batch {sub} "
                    f"with {len(partners)} partners"
                )
        return SharePlan(sub, tuple(partners), explained, self._reason)


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
    # never preempts; a GPU holding one job is usable. Sharing with a resident pays iff its
    # remaining time exceeds a threshold set by the incoming job (scheduling.core.sharing), and
    # remaining times only shrink, so while time alone passes the beneficial partners only shrink
    skip_rule = SkipRule(capacity=True, shares=True, horizon=never)

    def __init__(self, *, incremental: bool = True, gaps_after: int = 2) -> None:
        self._memo: BestBenefitMemo | None = None
        # a pair's losing gaps of B are computed once a scan judged this many residents in vain
        # (BestBenefitMemo); the tests set 0 so that small cases use them too
        self.gaps_after = gaps_after
        # the SJF order and the memo kept between rounds (caches: incremental=False sorts from
        # scratch and starts every round with an empty memo)
        self.incremental = incremental
        self._ranking = PendingRanking.timeless(sjf_key)

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round; deterministic, mutates none of its inputs (it keeps pure caches
        of profile answers and of the SJF order between rounds, see :class:`BestBenefitMemo`)."""
        if not self.incremental:  # from scratch: nothing remembered from an earlier round
            self._memo = None
        memo = self._memo = (
            BestBenefitMemo(profile, gaps=self.incremental, gaps_after=self.gaps_after)
            if self._memo is None
            else self._memo.fresh(profile)
        )
        decisions = sharing_round(
            snapshot,
            memo.profile,
            self.name,
            lambda state, _profile: BestBenefitFinder(state, memo, explain=explain),
            explain=explain,
            order=self._ranking.order(snapshot, self.incremental, sjf_key),
        )
        self._ranking.started({s.job_id for s in decisions.starts})
        return decisions


def _push_next(heap: list, group: _Group, pair: _Pair, index: int, gaps_after: int) -> None:
    """Push the group's first resident at or after ``index`` with whom sharing pays, as
    ``(T_con, B, submit_time, id, index, group, pair, sub_batch)``. Residents whose ``B`` lies in one
    of the pair's gaps (:func:`~scheduling.core.sharing.losing_gaps`: sharing provably does not
    pay there) are skipped by bisection; every other one is judged exactly. A pair's gaps are
    computed the first time a scan judged more than ``gaps_after`` residents in vain."""
    entries = group.entries
    options = pair[1]
    gaps = pair[2]
    los, his = _NO_GAPS if gaps is None else gaps
    n = len(entries)
    i = index
    vain = 0
    while i < n:
        b_s, submit, job_id = entries[i]
        if los:
            gap = bisect_left(los, b_s) - 1
            if gap >= 0 and b_s < his[gap]:  # lo < B < hi: jump to the first B ≥ hi
                i = bisect_left(entries, (his[gap],), i + 1)
                continue
        best = best_prepared(options, b_s)
        if best is not None and best[0] < best[1]:
            heapq.heappush(heap, (best[0], b_s, submit, job_id, i, group, pair, options[best[2]][0]))
            return
        i += 1
        vain += 1
        if gaps is None and vain > gaps_after:
            gaps = pair[2] = losing_gaps(options)
            los, his = gaps


def _with_bound(options: list[tuple[int, float, float, float]]) -> _Fits:
    kappa = mu = math.inf
    bounded = True
    for _, xi_a, xi_b, _ in options:
        branch_kappa, branch_mu = xi_b * (1 - 1 / (2 * xi_a)), xi_a * (1 - 1 / (2 * xi_b))
        kappa = branch_kappa if branch_kappa < kappa else kappa  # min(kappa, ·), without the call
        mu = branch_mu if branch_mu < mu else mu
        bounded = bounded and xi_a >= 1 and xi_b >= 1
    return tuple(options), bounded, kappa, mu
