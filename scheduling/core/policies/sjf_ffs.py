"""SJF-FFS: SJF order plus aggressive first-fit sharing, the "aggressive sharing" baseline of
Luo et al., IWQoS 2024 (MODEL.md §4): it co-locates with any resident whose memory fits, without
the pairwise benefit check of SJF-BSBF."""

from __future__ import annotations

from bisect import bisect_left, insort

from scheduling.core.profile_cache import CachedProfile
from scheduling.core.ranking import PendingRanking
from scheduling.core.round_state import Resident, RoundState
from scheduling.core.rounds import SharePlan, sharing_round, sjf_key
from scheduling.core.sharing import gang_shares
from scheduling.core.skip import SkipRule, never
from scheduling.core.types import Job, Profile, RoundDecisions, Snapshot


class FirstFitFinder:
    """Residents in order of their lowest GPU id; a job takes the first ones whose memory room
    holds it, at the largest sub-batch for which enough such GPUs exist."""

    def __init__(self, state: RoundState, profile: CachedProfile) -> None:
        self._profile = profile
        self._min_sub = state.min_sub_batch
        self._unknown_ok = state.share_unknown
        self._order: list[tuple[int, int]] = []  # (lowest GPU id, job id), sorted
        self._residents: dict[int, Resident] = {}
        for resident in state.residents.values():
            self.added(resident)

    def added(self, resident: Resident) -> None:
        """Index a new resident."""
        self._residents[resident.job.id] = resident
        insort(self._order, (resident.gpu_ids[0], resident.job.id))

    def removed(self, resident: Resident) -> None:
        """Drop a withdrawn resident."""
        del self._residents[resident.job.id]
        key = (resident.gpu_ids[0], resident.job.id)
        del self._order[bisect_left(self._order, key)]

    def find(self, job: Job, need: int) -> SharePlan | str:
        """First-fit partners for ``need`` GPUs at the largest sub-batch that allows it."""
        profile = self._profile
        subs = profile.sub_batches(job, self._min_sub)
        if not subs:
            return "the profile gives no sub-batch size for this job"
        for sub in subs:
            memory = profile.memory_mb(job, sub)
            partners: list[tuple[Resident, tuple[int, ...]]] = []
            got = 0
            for _, job_id in self._order:
                resident = self._residents[job_id]
                if resident.room_mb >= memory and profile.pair_allowed(
                    job, sub, resident.job, resident.sub_batch, self._unknown_ok
                ):
                    take = resident.gpu_ids[: need - got]
                    partners.append((resident, take))
                    got += len(take)
                    if got == need:
                        shares = gang_shares(
                            profile, job, sub, [(r.job, r.sub_batch, ids) for r, ids in partners]
                        )
                        names = ", ".join(str(r.job.id) for r, _ in partners)
                        return SharePlan(
                            sub,
                            tuple(partners),
                            shares,
                            f"first fit: shares with job {names} at sub-batch {sub} (no benefit check)",
                        )
        smallest = profile.memory_mb(job, subs[-1])
        return (
            f"needs {need} more GPUs than the idle ones; fewer resident GPUs have "
            f"{smallest:.0f} MB free (its smallest sub-batch, {subs[-1]})"
        )

    def refit(self, job: Job, plan: SharePlan, sub_batch: int) -> SharePlan | str:
        """``plan``'s partners at the smaller ``sub_batch`` (samples): memory fits them (a smaller
        sub-batch needs less), each pair must still be allowed; no benefit check, as in
        :meth:`find`."""
        profile = self._profile
        for resident, _ in plan.partners:
            if not profile.pair_allowed(job, sub_batch, resident.job, resident.sub_batch, self._unknown_ok):
                return f"job {resident.job.id} may not share with it at sub-batch {sub_batch}"
        partners = list(plan.partners)
        shares = gang_shares(profile, job, sub_batch, [(r.job, r.sub_batch, ids) for r, ids in partners])
        names = ", ".join(str(r.job.id) for r, _ in partners)
        return SharePlan(
            sub_batch,
            tuple(partners),
            shares,
            f"first fit: shares with job {names} at sub-batch {sub_batch} (no benefit check; "
            f"the largest that fits the idle GPUs it also takes)",
        )


class SjfFfsPolicy:
    """SJF order ``(P_j, submit_time, id)``; enough idle GPUs → exclusive start; otherwise all
    idle GPUs plus resident GPUs taken first-fit (lowest GPU id first) wherever memory fits,
    at the largest sub-batch that fits — no benefit check. At most two jobs per GPU; never
    preempts (:func:`scheduling.core.rounds.sharing_round`)."""

    name = "sjf-ffs"
    preemptive = False
    # never preempts; a GPU holding one job is usable (first fit); queue order, gang sizes and
    # memory do not change while time alone passes
    skip_rule = SkipRule(capacity=True, shares=True, horizon=never)

    def __init__(self, *, incremental: bool = True) -> None:
        # the SJF order kept between rounds (a cache: incremental=False sorts from scratch)
        self.incremental = incremental
        self._ranking = PendingRanking(lambda job, now: sjf_key(job))

    def decide(self, snapshot: Snapshot, profile: Profile, *, explain: bool = True) -> RoundDecisions:
        """Decisions for this round; deterministic, mutates nothing but its cache."""
        order = self._ranking.order(snapshot, self.incremental, sjf_key)
        decisions = sharing_round(snapshot, profile, self.name, FirstFitFinder, explain=explain, order=order)
        self._ranking.started({s.job_id for s in decisions.starts})
        return decisions
