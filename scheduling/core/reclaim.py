"""How an owner gets its lent GPUs back by preemption (pure Python; docs/FAIRNESS.md, **ours**).

With reclaim mode ``"preempt"`` or ``"both"``, a preemptive policy (``sjf-bsbf-fair``) calls
:func:`reclaim_preemptions`: an owner with a waiting job that fits its unused guarantee gets the
GPUs of other tenants' *borrowed* jobs preempted (checkpoint/restart: the simulator charges a
restart cost when they run again).

A running job is *borrowed* if it is part of its tenant's usage above the guarantee, counting the
tenant's jobs in start order (the latest-started jobs are the borrowed ones, :func:`borrowed_jobs`)
— a property of the snapshot alone, so the service needs no extra state. The quotas themselves
and the gate every start goes through are :mod:`scheduling.core.quota`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from scheduling.core.quota import NO_QUOTA, normalise, usage_by_tenant
from scheduling.core.types import Job, JobId, Preempt, RunningJob, Snapshot, TenantQuota


def borrowed_jobs(running: Iterable[RunningJob], quotas: Mapping[str, TenantQuota]) -> list[RunningJob]:
    """The running jobs that hold GPUs above their tenant's guarantee.

    Per tenant, jobs are counted in start order ``(start_time, id)``; once the running sum of gangs
    exceeds ``g_t``, that job and every later one are borrowed. Returned latest start first.
    """
    by_tenant: dict[str, list[RunningJob]] = {}
    for rj in running:
        by_tenant.setdefault(rj.job.tenant, []).append(rj)
    borrowed: list[RunningJob] = []
    for tenant, jobs in by_tenant.items():
        guaranteed = quotas.get(tenant, NO_QUOTA).guaranteed_gpus
        held = 0
        for rj in sorted(jobs, key=lambda r: (r.placement.start_time, r.job.id)):
            held += rj.job.gpus
            if held > guaranteed:
                borrowed.append(rj)
    borrowed.sort(key=lambda r: (-r.placement.start_time, -r.job.id))
    return borrowed


def idle_gpu_ids(snapshot: Snapshot) -> set[int]:
    """Healthy GPUs holding no running job."""
    held = {g for rj in snapshot.running for g in rj.placement.gpu_ids}
    return {g.id for g in snapshot.cluster.gpus if g.healthy and g.id not in held}


def reclaim_preemptions(
    snapshot: Snapshot, order: Iterable[Job], policy: str, can_start: Callable[[Job], bool] | None = None
) -> tuple[tuple[Preempt, ...], tuple[JobId, ...]]:
    """Preempt other tenants' borrowed jobs so that owners' waiting jobs get their guarantees.

    Returns ``(preemptions, claimed)``: ``claimed`` are the owners' jobs, in ``order``, whose GPUs
    are now idle or freed by the preemptions — the policy starts them first, so that no other job
    (another owner sharing, say) takes the GPUs reclaimed for them.

    ``order``: the pending jobs in the policy's order. Walking it, a job ``j`` of tenant ``s`` with
    ``u_s + G_j ≤ g_s`` (it fits the unused guarantee) claims ``G_j`` of the idle GPUs; if too
    few are idle, borrowed jobs of tenants other than ``s`` (:func:`borrowed_jobs`) are chosen as
    victims — the one with the most remaining exclusive time ``P`` first (ties: latest start), as
    SRTF would: a borrowed job near its end is left to finish (docs/FAIRNESS.md §5 measures the
    choice) — until the GPUs they leave idle
    (healthy GPUs whose every job is a victim) cover the shortfall; then each chosen victim whose
    GPUs turn out not to be needed (it shares a GPU with a job that stays, say) is spared again,
    the last chosen first. If even all of them cannot cover it, nothing is preempted for ``j``.
    Jobs for which ``can_start`` is false (they could never start on the cluster as it is, e.g.
    :func:`scheduling.core.placement.unfit_reason`) claim nothing.
    Returns nothing without quotas or when ``snapshot.config.reclaim`` is ``"bound"``.
    """
    if not snapshot.tenant_quotas or snapshot.config.reclaim == "bound":
        return (), ()
    quotas = normalise(snapshot.tenant_quotas)
    usage = usage_by_tenant(snapshot.running)
    candidates = sorted(
        borrowed_jobs(snapshot.running, quotas),
        key=lambda r: (-r.job.remaining_time_s, -r.placement.start_time, -r.job.id),
    )
    on_gpu: dict[int, set[JobId]] = {}
    for rj in snapshot.running:
        for g in rj.placement.gpu_ids:
            on_gpu.setdefault(g, set()).add(rj.job.id)
    healthy = {g.id for g in snapshot.cluster.gpus if g.healthy}
    available = len(idle_gpu_ids(snapshot))
    victims: dict[JobId, RunningJob] = {}
    claimed: list[JobId] = []

    gpus_of = {rj.job.id: rj.placement.gpu_ids for rj in snapshot.running}

    def freed_by(gone: set[JobId]) -> int:  # healthy GPUs emptied by ``gone``, beyond earlier victims
        # a GPU emptied only by earlier victims holds no newly gone job, so only theirs can count
        new = {g for jid in gone if jid not in victims for g in gpus_of[jid]}
        return sum(1 for g in new if g in healthy and on_gpu[g] <= gone)

    for job in order:
        tenant = job.tenant
        if usage.get(tenant, 0) + job.gpus > quotas.get(tenant, NO_QUOTA).guaranteed_gpus:
            continue
        if can_start is not None and not can_start(job):
            continue
        if job.gpus <= available:
            available -= job.gpus
            usage[tenant] = usage.get(tenant, 0) + job.gpus
            claimed.append(job.id)
            continue
        chosen: list[RunningJob] = []
        freed = 0
        gone = set(victims)
        for rj in candidates:
            if rj.job.id in victims or rj.job.tenant == tenant:
                continue
            chosen.append(rj)
            gone.add(rj.job.id)
            freed = freed_by(gone)
            if available + freed >= job.gpus:
                break
        if available + freed < job.gpus:
            continue
        for rj in reversed(chosen[:-1]):  # spare the victims not needed after all
            without = gone - {rj.job.id}
            if available + freed_by(without) >= job.gpus:
                gone = without
                chosen.remove(rj)
        freed = freed_by(gone)
        for rj in chosen:
            victims[rj.job.id] = rj
            usage[rj.job.tenant] -= rj.job.gpus
        available += freed - job.gpus
        usage[tenant] = usage.get(tenant, 0) + job.gpus
        claimed.append(job.id)
    return tuple(
        Preempt(
            jid,
            f"{policy}: borrowed GPUs of tenant {rj.job.tenant} reclaimed for an owner's job "
            f"within its guarantee (checkpoint and restart later)",
        )
        for jid, rj in sorted(victims.items())
    ), tuple(claimed)
