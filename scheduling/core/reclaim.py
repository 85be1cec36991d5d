"""How lent GPUs come back by preemption (pure Python; docs/FAIRNESS.md §1, docs/PRIORITY.md, **ours**).

With reclaim mode ``"preempt"`` or ``"both"``, a preemptive policy (``sjf-bsbf-fair``) calls
:func:`reclaim_preemptions` once per round. It preempts (checkpoint/restart: the simulator charges
a restart cost when they run again) only *borrowed* work — GPUs a tenant holds above its
guarantee — and never so much that the victim's tenant would drop below its own guarantee:

1. **owners**: a waiting job that fits its tenant's unused guarantee gets idle GPUs, or other
   tenants' borrowed jobs are preempted to free them;
2. **co-location** (with normalised usage only): a tenant with jobs waiting whose running jobs
   were joined by another tenant's borrowed jobs, taking it below its guarantee in normalised
   GPUs (:mod:`scheduling.core.charge`), gets those partners preempted;
3. **priority**: a waiting job that would borrow gets lower-priority borrowed jobs (of any tenant,
   its own included) preempted when only they stand in its way (docs/PRIORITY.md).

Walks 2 and 3 can be switched off (``SchedulerConfig.reclaim_colocated``,
``SchedulerConfig.priority_preemption``; docs/FAIRNESS.md §5 measures their price); walk 1 and
the victim rule below cannot.

Victims, each time: whole gangs; the fewest GPUs that meet the need — a single job if one
suffices (the smallest such gang), else borrowed jobs in candidate order with those not needed
spared again, largest first. Candidate order: jobs borrowed in start order first
(:func:`borrowed_jobs`), then the most remaining exclusive time ``P`` first, as SRTF would (a
borrowed job near its end is left to finish; docs/FAIRNESS.md §5), ties latest start. The walk
passes over a job that could free no GPU whatever else went: one whose every GPU also holds a job
that cannot go (it alone would take its tenant below its guarantee, or it is not eligible), since
taking it would only use up its tenant's room above the guarantee. The walk stays greedy: it can
still miss a set of victims that exists.

A running job is *borrowed* if it is part of its tenant's usage above the guarantee, counting the
tenant's jobs in start order (the latest-started jobs are the borrowed ones, :func:`borrowed_jobs`)
— a property of the snapshot alone, so the service needs no extra state. The quotas themselves
and the gate every start goes through are :mod:`scheduling.core.quota`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from scheduling.core.quota import EPS, NO_QUOTA, charged_usage, normalise, wait_s
from scheduling.core.types import Job, JobId, Preempt, RunningJob, Snapshot, TenantQuota

GpuShares = Mapping[int, Mapping[JobId, float]]
"""GPU id → running job id → its share of the GPU's time (:func:`scheduling.core.charge.gpu_shares`)."""


def borrowed_jobs(
    running: Iterable[RunningJob],
    quotas: Mapping[str, TenantQuota],
    charges: Mapping[JobId, float] | None = None,
) -> list[RunningJob]:
    """The running jobs that hold GPUs above their tenant's guarantee.

    Per tenant, jobs are counted in start order ``(start_time, id)``; once the running sum of gangs
    (with ``charges``, of normalised GPUs) exceeds ``g_t``, that job and every later one are
    borrowed. Returned latest start first.
    """
    by_tenant: dict[str, list[RunningJob]] = {}
    for rj in running:
        by_tenant.setdefault(rj.job.tenant, []).append(rj)
    borrowed: list[RunningJob] = []
    for tenant, jobs in by_tenant.items():
        guaranteed = quotas.get(tenant, NO_QUOTA).guaranteed_gpus
        held = 0.0
        for rj in sorted(jobs, key=lambda r: (r.placement.start_time, r.job.id)):
            held += rj.job.gpus if charges is None else charges.get(rj.job.id, rj.job.gpus)
            if held > guaranteed + EPS:
                borrowed.append(rj)
    borrowed.sort(key=lambda r: (-r.placement.start_time, -r.job.id))
    return borrowed


def idle_gpu_ids(snapshot: Snapshot) -> set[int]:
    """Healthy GPUs holding no running job."""
    held = {g for rj in snapshot.running for g in rj.placement.gpu_ids}
    return {g.id for g in snapshot.cluster.gpus if g.healthy and g.id not in held}


class ReclaimPass:
    """The state of one reclaim pass: usage as victims go and jobs are claimed, idle GPUs."""

    def __init__(self, snapshot: Snapshot, shares: GpuShares | None, *, memo: bool = True) -> None:
        self.quotas = normalise(snapshot.tenant_quotas)
        self.shares = shares
        charges: dict[JobId, float] | None = None
        if shares is not None:
            charges = {}
            for on_gpu in shares.values():
                for jid, w in on_gpu.items():
                    charges[jid] = charges.get(jid, 0.0) + w
        self.charge = {rj.job.id: float(rj.job.gpus) for rj in snapshot.running} | (charges or {})
        self.usage = charged_usage(snapshot.running, charges)
        borrowed = {rj.job.id for rj in borrowed_jobs(snapshot.running, self.quotas, charges)}
        self.candidates = sorted(
            snapshot.running,
            key=lambda r: (
                r.job.id not in borrowed,
                -r.job.remaining_time_s,
                -r.placement.start_time,
                -r.job.id,
            ),
        )
        self.on_gpu: dict[int, set[JobId]] = {}
        for rj in snapshot.running:
            for g in rj.placement.gpu_ids:
                self.on_gpu.setdefault(g, set()).add(rj.job.id)
        self.gpus_of = {rj.job.id: rj.placement.gpu_ids for rj in snapshot.running}
        self.by_id = {rj.job.id: rj for rj in snapshot.running}
        self.healthy = {g.id for g in snapshot.cluster.gpus if g.healthy}
        self.available = len(idle_gpu_ids(snapshot))
        self.victims: dict[JobId, tuple[RunningJob, str]] = {}
        # pick's answers since the pass last changed (a take or a claim), by (need, not_of,
        # below_priority): a walk asks the same question for every waiting job of one gang size
        # and priority (1,140 picks at 8,369 pending of the Kueue-shaped scenario, about 4
        # distinct), and the answer is a function of those and of this state alone
        self.memo = memo
        self._picks: dict[tuple[int, str | None, int | None], list[RunningJob] | None] = {}

    def guarantee(self, tenant: str) -> int:
        return self.quotas.get(tenant, NO_QUOTA).guaranteed_gpus

    def empties(self, gpu: int, gone: set[JobId]) -> bool:
        """Whether ``gpu`` is healthy and every job on it is in ``gone``."""
        return gpu in self.healthy and self.on_gpu[gpu] <= gone

    def freed_by(self, gone: set[JobId]) -> int:
        """Healthy GPUs emptied by ``gone`` beyond those the victims so far emptied."""
        # a GPU emptied only by earlier victims holds no newly gone job, so only theirs can count
        new = {g for jid in gone if jid not in self.victims for g in self.gpus_of[jid]}
        return sum(1 for g in new if self.empties(g, gone))

    def above_floor(self, rj: RunningJob, loss: Mapping[str, float]) -> bool:
        """Whether ``rj``'s tenant stays at or above its guarantee without it (and ``loss``)."""
        tenant = rj.job.tenant
        left = self.usage.get(tenant, 0) - loss.get(tenant, 0.0) - self.charge[rj.job.id]
        return left >= self.guarantee(tenant) - EPS

    def pick(
        self, need: int, *, not_of: str | None = None, below_priority: int | None = None
    ) -> list[RunningJob] | None:
        """Victims that free ``need`` GPUs beyond the idle ones (module docstring), or ``None``:
        jobs of tenants other than ``not_of`` / of priority below ``below_priority``. The same
        question asked again before the pass changes (:meth:`take`, :meth:`claim`) gets the list
        worked out the first time (callers only read it); with ``memo`` off, every answer is
        worked out afresh (the tests compare the two)."""
        if not self.memo:
            return self.choose(need, not_of, below_priority)
        key = (need, not_of, below_priority)
        if key not in self._picks:
            self._picks[key] = self.choose(need, not_of, below_priority)
        return self._picks[key]

    def choose(self, need: int, not_of: str | None, below_priority: int | None) -> list[RunningJob] | None:
        """:meth:`pick`'s answer worked out from the pass's state (victims, usage, idle GPUs)."""

        def eligible(rj: RunningJob) -> bool:
            if not_of is not None and rj.job.tenant == not_of:
                return False
            return below_priority is None or rj.job.priority < below_priority

        gone = set(self.victims)
        # the jobs that could go at all: each alone keeps its tenant at or above its guarantee
        free = [
            rj
            for rj in self.candidates
            if rj.job.id not in self.victims and eligible(rj) and self.above_floor(rj, {})
        ]
        fits = [rj for rj in free if self.available + self.freed_by(gone | {rj.job.id}) >= need]
        if fits:
            return [min(fits, key=lambda r: r.job.gpus)]  # stable: the first in candidate order
        # a job none of whose GPUs the jobs that could go at all (and the victims so far) could
        # empty frees nothing, whatever else goes: taking it would only use up its tenant's room
        # above the guarantee and block a victim that does free GPUs
        could_go = gone | {rj.job.id for rj in free}
        chosen: list[RunningJob] = []
        loss: dict[str, float] = {}
        for rj in self.candidates:
            if rj.job.id in self.victims or not eligible(rj) or not self.above_floor(rj, loss):
                continue
            if not any(self.empties(g, could_go) for g in self.gpus_of[rj.job.id]):
                continue
            chosen.append(rj)
            gone.add(rj.job.id)
            loss[rj.job.tenant] = loss.get(rj.job.tenant, 0.0) + self.charge[rj.job.id]
            if self.available + self.freed_by(gone) >= need:
                break
        else:
            return None
        for rj in sorted(chosen, key=lambda r: -r.job.gpus):  # spare those not needed, largest first
            without = gone - {rj.job.id}
            if len(chosen) > 1 and self.available + self.freed_by(without) >= need:
                gone = without
                chosen.remove(rj)
        return chosen

    def take(self, victims: Sequence[RunningJob], why: str) -> None:
        """Preempt ``victims`` (``why``: the reason, ``{tenant}`` the victim's tenant): their GPUs are
        freed, their tenants' usage falls (and the partners they leave alone on a GPU are charged
        that whole GPU again)."""
        gone = set(self.victims) | {rj.job.id for rj in victims}
        self.available += self.freed_by(gone)
        self._picks.clear()
        for rj in victims:
            reason = why.replace("{tenant}", rj.job.tenant).replace("{priority}", str(rj.job.priority))
            self.victims[rj.job.id] = (rj, reason)
            self.usage[rj.job.tenant] -= self.charge[rj.job.id]
            if self.shares is None:
                continue
            for g in rj.placement.gpu_ids:
                for partner, _ in self.shares.get(g, {}).items():
                    if partner not in gone:  # alone on g now: charged the victim's share too
                        gained = self.shares[g][rj.job.id]
                        tenant = self.by_id[partner].job.tenant
                        self.usage[tenant] = self.usage.get(tenant, 0) + gained
                        self.charge[partner] += gained

    def claim(self, job: Job) -> None:
        """Record that waiting ``job`` gets GPUs this round (idle or freed): fewer idle GPUs, more
        use for its tenant."""
        self.available -= job.gpus
        self.usage[job.tenant] = self.usage.get(job.tenant, 0) + job.gpus
        self._picks.clear()


def reclaim_preemptions(
    snapshot: Snapshot,
    order: Iterable[Job],
    policy: str,
    can_start: Callable[[Job], bool] | None = None,
    shares: GpuShares | None = None,
    *,
    memo: bool = True,
) -> tuple[tuple[Preempt, ...], tuple[JobId, ...]]:
    """Preempt borrowed work so that owners get their guarantees and higher priorities go first.

    Returns ``(preemptions, claimed)``: ``claimed`` are the waiting jobs, in ``order``, whose GPUs
    are now idle or freed by the preemptions — the policy starts them first, so that no other job
    (another owner sharing, say) takes the GPUs reclaimed for them.

    ``order``: the pending jobs in the policy's order; the three walks over it and the victim rule
    are in the module docstring. ``shares`` (:func:`scheduling.core.charge.gpu_shares`): quota use
    by the normalised split (and the co-location walk); without, in whole gangs. A job of tenant
    ``s`` *fits its unused guarantee* when ``u_s + G_j ≤ g_s``. Jobs for which ``can_start`` is
    false (they could never start on the cluster as it is, e.g.
    :func:`scheduling.core.placement.unfit_reason`) claim nothing. If no victims can cover a job's
    need, nothing is preempted for it. Returns nothing without quotas or when
    ``snapshot.config.reclaim`` is ``"bound"``; walks 2 and 3 only when
    ``snapshot.config.reclaim_colocated`` / ``priority_preemption`` are on. ``memo`` off: the
    victims are worked out afresh for every job instead of once per question while nothing
    changed (the same answers, slower; for the tests).
    """
    if not snapshot.tenant_quotas or snapshot.config.reclaim == "bound":
        return (), ()
    order = list(order)
    startable = (lambda job: True) if can_start is None else can_start
    state = ReclaimPass(snapshot, shares, memo=memo)
    claimed: list[JobId] = []
    for job in order:  # 1. owners
        tenant = job.tenant
        if state.usage.get(tenant, 0) + job.gpus > state.guarantee(tenant) + EPS or not startable(job):
            continue
        if job.gpus > state.available:
            victims = state.pick(job.gpus, not_of=tenant)
            if victims is None:
                continue
            state.take(
                victims,
                f"{policy}: borrowed GPUs of tenant {{tenant}} reclaimed for an owner's job "
                f"within its guarantee (checkpoint and restart later)",
            )
        state.claim(job)
        claimed.append(job.id)
    if shares is not None and snapshot.config.reclaim_colocated:
        _colocation_walk(state, order, policy)
    if snapshot.config.priority_preemption:
        _priority_walk(snapshot, state, order, policy, claimed, startable)
    preemptions = tuple(Preempt(jid, why) for jid, (_, why) in sorted(state.victims.items()))
    return preemptions, tuple(claimed)


def _colocation_walk(state: ReclaimPass, order: Sequence[Job], policy: str) -> None:
    """2. Preempt other tenants' borrowed jobs co-located on the GPUs of a tenant that has jobs
    waiting and is below its guarantee in normalised GPUs, while it stays below."""
    assert state.shares is not None
    waiting = {j.tenant for j in order}
    for owner_rj in sorted(state.candidates, key=lambda r: (r.placement.start_time, r.job.id)):
        owner = owner_rj.job.tenant
        if owner not in waiting or owner_rj.job.id in state.victims:
            continue
        for g in owner_rj.placement.gpu_ids:
            if state.usage.get(owner, 0) >= state.guarantee(owner) - EPS:
                break
            for other in state.shares.get(g, {}):
                if other == owner_rj.job.id or other in state.victims:
                    continue
                rj = state.by_id[other]
                if rj.job.tenant == owner or not state.above_floor(rj, {}):
                    continue
                state.take(
                    [rj],
                    f"{policy}: borrowed job of tenant {{tenant}} co-located on GPUs of tenant {owner}, "
                    f"below its guarantee with jobs waiting (checkpoint and restart later)",
                )


def _priority_walk(
    snapshot: Snapshot,
    state: ReclaimPass,
    order: Sequence[Job],
    policy: str,
    claimed: list[JobId],
    startable: Callable[[Job], bool],
) -> None:
    """3. A waiting job blocked only by lower-priority borrowed work preempts it (docs/PRIORITY.md):
    it must stay within its tenant's cap, leave the idle GPUs other tenants' owners are owed, and
    in reclaim mode ``"both"`` obey the borrow bound."""
    running_priorities = [rj.job.priority for rj in snapshot.running]
    if not running_priorities:
        return
    lowest = min(running_priorities)
    config = snapshot.config
    for job in order:
        if job.priority <= lowest or job.id in claimed or job.gpus <= state.available:
            continue
        tenant, quota = job.tenant, state.quotas.get(job.tenant, NO_QUOTA)
        if not startable(job):
            continue
        if (
            config.reclaim == "both"
            and state.usage.get(tenant, 0) + job.gpus > quota.guaranteed_gpus + EPS
            and job.remaining_time_s > config.borrow_bound_s
            and wait_s(job, snapshot.now) < config.starvation_bound_s
        ):
            continue
        victims = state.pick(job.gpus, below_priority=job.priority)
        if victims is None:
            continue
        own = sum(state.charge[rj.job.id] for rj in victims if rj.job.tenant == tenant)
        if state.usage.get(tenant, 0) - own + job.gpus > quota.cap + EPS:
            continue
        gone = set(state.victims) | {rj.job.id for rj in victims}
        idle_after = state.available + state.freed_by(gone) - job.gpus
        if idle_after < _owed_except(state, order, claimed, tenant) - EPS:
            continue
        state.take(
            victims,
            f"{policy}: borrowed GPUs of tenant {{tenant}} (priority {{priority}}) preempted for job "
            f"{job.id} of priority {job.priority} (checkpoint and restart later)",
        )
        state.claim(job)
        claimed.append(job.id)


def _owed_except(state: ReclaimPass, order: Sequence[Job], claimed: Sequence[JobId], tenant: str) -> float:
    """GPUs owed to the owners of tenants other than ``tenant``: ``Σ_s min(g_s − u_s, W_s)`` over
    their unclaimed waiting jobs that fit the unused guarantee (the quota gate's owners-first rule)."""
    taken = set(claimed)
    waiting: dict[str, list[int]] = {}
    for j in order:
        if j.tenant != tenant and j.id not in taken:
            waiting.setdefault(j.tenant, []).append(j.gpus)
    owed = 0.0
    for s, gangs in waiting.items():
        unused = state.guarantee(s) - state.usage.get(s, 0)
        owed += max(0.0, min(unused, sum(g for g in gangs if g <= unused + EPS)))
    return owed
