"""Fair accounting and fairness metrics across tenants (pure functions; docs/FAIRNESS.md).

Used by the simulator's report, the fairness benchmark and the service's dashboard. Times in
seconds (s), GPU-time in GPU-seconds (GPU-s) unless a name says hours.

- **Accounting**: the normalised split of a shared GPU, :mod:`scheduling.core.charge`.
- **Finish-time fairness** ρ (Mahajan et al., "Themis: Fair and Efficient GPU Cluster
  Scheduling", NSDI 2020): ``ρ = T_shared / T_independent`` — a tenant's mean JCT in the shared
  cluster over its mean JCT when it runs alone on its own partition (its guaranteed GPUs).
  ρ ≤ 1: sharing the cluster did not hurt it.
- **Jain's index** over tenants' normalised shares ``x_t = 1/ρ_t`` (the fraction of its
  independent speed the tenant got; :func:`scheduling.core.metrics.jain_index`).
- **Usage vs quota**: GPU-hours charged to a tenant ÷ (guaranteed GPUs × the window in hours).
- **Waits**: per job total pending time (``JobOutcome.queue_s``): max and p99.
- **Quota checks on a snapshot** (:func:`guarantee_violations`, :func:`cap_violations`), as the
  fairness benchmark applies them at every round.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from scheduling.core.metrics import JobOutcome, jain_index, mean, percentile
from scheduling.core.quota import EPS, NO_QUOTA, charged_usage, normalise, usage_by_tenant, wait_s
from scheduling.core.reclaim import borrowed_jobs
from scheduling.core.types import JobId, RunningJob, Snapshot, TenantQuota


def finish_time_fairness(shared_jct_s: float, independent_jct_s: float) -> float:
    """Themis' ρ = ``shared_jct_s / independent_jct_s`` (both s, the second > 0).

    Raises ``ValueError`` for a non-positive independent time or a negative shared time."""
    if not independent_jct_s > 0 or shared_jct_s < 0:
        raise ValueError(
            f"need an independent JCT > 0 s and a shared JCT ≥ 0 s, got "
            f"{independent_jct_s} and {shared_jct_s}"
        )
    return shared_jct_s / independent_jct_s


def tenant_rho(shared: Sequence[JobOutcome], independent: Sequence[JobOutcome]) -> dict[str, float]:
    """Tenant → ρ: mean JCT of its jobs in ``shared`` over mean JCT of the same tenant's jobs in
    ``independent`` (each tenant run alone on its own partition). Tenants missing from either side
    are left out."""

    def by_tenant(outcomes: Sequence[JobOutcome]) -> dict[str, float]:
        groups: dict[str, list[float]] = {}
        for o in outcomes:
            groups.setdefault(o.tenant, []).append(o.jct_s)
        return {t: mean(v) for t, v in groups.items()}

    mine, alone = by_tenant(shared), by_tenant(independent)
    return {t: finish_time_fairness(mine[t], alone[t]) for t in sorted(mine) if alone.get(t, 0) > 0}


def wait_stats(outcomes: Sequence[JobOutcome]) -> dict[str, float]:
    """``{"max_wait_s", "p99_wait_s", "avg_wait_s"}`` over the jobs' total pending time (s);
    ``nan`` for no job."""
    waits = [o.queue_s for o in outcomes]
    if not waits:
        return dict.fromkeys(("max_wait_s", "p99_wait_s", "avg_wait_s"), math.nan)
    return {"max_wait_s": max(waits), "p99_wait_s": percentile(waits, 99), "avg_wait_s": mean(waits)}


def usage_vs_quota(
    outcomes: Iterable[JobOutcome], quotas: Mapping[str, int | TenantQuota], window_s: float
) -> dict[str, dict[str, float]]:
    """Tenant → ``{"gpu_hours", "quota_gpu_hours", "usage_over_quota"}`` over a window of
    ``window_s`` seconds: GPU-hours charged (``JobOutcome.gpu_s``), the guarantee's GPU-hours
    (``g_t × window``), and their ratio (``inf`` for a tenant with usage and no guarantee, 0 with
    neither). Tenants with quotas or jobs, sorted."""
    q = normalise(quotas)
    used: dict[str, float] = {}
    for o in outcomes:
        used[o.tenant] = used.get(o.tenant, 0.0) + o.gpu_s / 3600.0
    out: dict[str, dict[str, float]] = {}
    for tenant in sorted(set(q) | set(used)):
        hours = used.get(tenant, 0.0)
        entitled = q.get(tenant, NO_QUOTA).guaranteed_gpus * max(window_s, 0.0) / 3600.0
        ratio = hours / entitled if entitled > 0 else (math.inf if hours > 0 else 0.0)
        out[tenant] = {"gpu_hours": hours, "quota_gpu_hours": entitled, "usage_over_quota": ratio}
    return out


def jain_of_rho(rho: Mapping[str, float]) -> float:
    """Jain's index of the tenants' normalised shares ``1/ρ_t`` (``nan`` for no tenant)."""
    return jain_index(1.0 / r for r in rho.values() if r > 0)


def _lent_gpus(
    snapshot: Snapshot,
    quotas: Mapping[str, TenantQuota],
    keep_guarantees: bool = False,
    charges: Mapping[JobId, float] | None = None,
) -> tuple[int, dict[str, int], int]:
    """``(idle GPUs, tenant → lent GPUs holding a job of that tenant, lent GPUs)``: a *lent* GPU is a
    healthy GPU whose every job is borrowed (:func:`~scheduling.core.reclaim.borrowed_jobs`). The GPUs
    a tenant could get back from *other* tenants are ``lent − lent holding its own jobs``.
    ``keep_guarantees``: a borrowed job counts only if its tenant keeps ``≥ g_s`` GPUs without it
    (whole gangs, each alone) — the jobs reclaim may take (docs/FAIRNESS.md §4); a gang only partly
    above its guarantee is not lent. ``charges``: usage and borrowing in normalised GPUs, as the
    policy counts them (:func:`~scheduling.core.quota.charged_usage`)."""
    usage = charged_usage(snapshot.running, charges)
    lent_ids = {
        rj.job.id
        for rj in borrowed_jobs(snapshot.running, quotas, charges)
        if not keep_guarantees
        or usage[rj.job.tenant] - (rj.job.gpus if charges is None else charges.get(rj.job.id, rj.job.gpus))
        >= quotas.get(rj.job.tenant, NO_QUOTA).guaranteed_gpus - EPS
    }
    on_gpu: dict[int, list[RunningJob]] = {}
    for rj in snapshot.running:
        for g in rj.placement.gpu_ids:
            on_gpu.setdefault(g, []).append(rj)
    idle = lent = 0
    own: dict[str, int] = {}
    for gpu in snapshot.cluster.gpus:
        if not gpu.healthy:
            continue
        jobs = on_gpu.get(gpu.id)
        if not jobs:
            idle += 1
        elif all(rj.job.id in lent_ids for rj in jobs):
            lent += 1
            for tenant in {rj.job.tenant for rj in jobs}:
                own[tenant] = own.get(tenant, 0) + 1
    return idle, own, lent


def guarantee_violations(
    snapshot: Snapshot,
    quotas: Mapping[str, int | TenantQuota],
    grace_s: float = 0.0,
    *,
    keep_guarantees: bool = False,
    charges: Mapping[JobId, float] | None = None,
) -> list[JobId]:
    """Pending jobs whose guarantee is broken at this instant (ids, sorted).

    A pending job ``j`` of tenant ``t`` is a violation when it has waited at least ``grace_s``
    (s; 0: any pending job), fits its tenant's unused guarantee (``u_t + G_j ≤ g_t``), and too few
    GPUs are idle but enough would be without other tenants' borrowed jobs
    (:func:`~scheduling.core.reclaim.borrowed_jobs`): its owner is kept waiting by lent GPUs.
    ``quotas`` are passed explicitly so a run without quotas in its snapshots can be checked too.
    ``keep_guarantees`` (a policy that reclaims, sjf-bsbf-fair): only jobs whose tenant keeps its
    guarantee without them count as lent, as reclaim takes only those (:func:`_lent_gpus`);
    ``charges`` (running job id → normalised GPUs, :func:`scheduling.core.charge.running_charges`):
    usage by the normalised split, as sjf-bsbf-fair's quota gate and reclaim count it.
    A job may have waited for other reasons before it became entitled (its tenant held more);
    :class:`GuaranteeMonitor` measures how long each job stays entitled and blocked.
    """
    q = normalise(quotas)
    if not q:
        return []
    usage = charged_usage(snapshot.running, charges)
    lent: tuple[int, dict[str, int], int] | None = None
    out: list[JobId] = []
    for job in snapshot.pending:
        if wait_s(job, snapshot.now) < grace_s:
            continue
        if usage.get(job.tenant, 0) + job.gpus > q.get(job.tenant, NO_QUOTA).guaranteed_gpus + EPS:
            continue
        if lent is None:
            lent = _lent_gpus(snapshot, q, keep_guarantees, charges)
        idle, own, total = lent
        if idle < job.gpus <= idle + total - own.get(job.tenant, 0):
            out.append(job.id)
    return sorted(out)


def cap_violations(snapshot: Snapshot, quotas: Mapping[str, int | TenantQuota]) -> dict[str, int]:
    """Tenant → GPUs held above its cap ``g_t + b_t`` (only tenants above it)."""
    q = normalise(quotas)
    if not q:
        return {}
    out: dict[str, int] = {}
    for tenant, used in usage_by_tenant(snapshot.running).items():
        over = used - q.get(tenant, NO_QUOTA).cap
        if over > 0:
            out[tenant] = int(over)
    return out


class GuaranteeMonitor:
    """Follows :func:`guarantee_violations` (at grace 0) over successive snapshots: a job is a
    violation once it has stayed entitled-and-blocked for more than ``grace_s`` seconds, counted
    from the first snapshot in which it was (a streak ends when it is not). ``violated``: the ids.
    Also counts snapshots with a tenant above its cap (``cap_snapshots``). ``keep_guarantees``: see
    :func:`guarantee_violations` (on for a policy that reclaims by preemption)."""

    def __init__(
        self, quotas: Mapping[str, int | TenantQuota], grace_s: float, *, keep_guarantees: bool = False
    ) -> None:
        self.quotas = normalise(quotas)
        self.grace_s = grace_s
        self.keep_guarantees = keep_guarantees
        self.since: dict[JobId, float] = {}
        self.violated: set[JobId] = set()
        self.longest_s = 0.0
        self.cap_snapshots = 0

    def observe(self, snapshot: Snapshot, charges: Mapping[JobId, float] | None = None) -> None:
        """Check one snapshot (times must not go backwards); ``charges``: see
        :func:`guarantee_violations`."""
        now = snapshot.now
        blocked = set(
            guarantee_violations(snapshot, self.quotas, keep_guarantees=self.keep_guarantees, charges=charges)
        )
        for job_id in list(self.since):
            if job_id not in blocked:
                del self.since[job_id]
        for job_id in blocked:
            start = self.since.setdefault(job_id, now)
            self.longest_s = max(self.longest_s, now - start)
            if now - start > self.grace_s:
                self.violated.add(job_id)
        if cap_violations(snapshot, self.quotas):
            self.cap_snapshots += 1
