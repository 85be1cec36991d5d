"""Tenant quotas with borrowing, and how an owner gets its GPUs back (pure Python).

Design (docs/FAIRNESS.md, **ours** — the SJF-BSBF paper has no tenants): a tenant ``t`` has a
:class:`~scheduling.core.types.TenantQuota` of ``g_t`` guaranteed GPUs and a borrow limit ``b_t``.
Its *usage* ``u_t`` is the sum of the gangs of its running jobs (a GPU shared by two jobs counts
for both). In every round, for every policy, a pending job ``j`` of ``t`` (``G_j`` GPUs) may start
only if (:meth:`QuotaGate.refusal`):

1. **cap**: ``u_t + G_j ≤ g_t + b_t``;
2. if it **borrows** (``u_t + G_j > g_t``):

   - **owners first**: the idle GPUs left after the start still cover what the *other* tenants
     are owed: ``Σ_{s≠t} min(g_s − u_s, W_s)``, ``W_s`` the GPUs of the waiting jobs of ``s``
     whose gang fits its unused guarantee ``g_s − u_s`` (a gang larger than that would have to
     borrow itself, so it claims nothing);
   - **bounded borrowing** (reclaim mode ``"bound"`` or ``"both"``, and always for a policy that
     cannot preempt): ``P_j`` (remaining exclusive time, s) ≤ ``borrow_bound_s``, so an owner
     arriving later waits at most about ``borrow_bound_s`` (times the slowdown ``ξ`` if shared) —
     unless the job has waited ``starvation_bound_s`` already: a gang larger than its tenant's
     guarantee with a long ``P_j`` could otherwise never start (liveness before the bound).

With reclaim mode ``"preempt"`` or ``"both"``, a preemptive policy (``sjf-bsbf-fair``) also calls
:func:`reclaim_preemptions`: an owner with a waiting job that fits its unused guarantee gets the
GPUs of other tenants' *borrowed* jobs preempted (checkpoint/restart: the simulator charges a
restart cost when they run again).

A running job is *borrowed* if it is part of its tenant's usage above the guarantee, counting the
tenant's jobs in start order (the latest-started jobs are the borrowed ones, :func:`borrowed_jobs`)
— a property of the snapshot alone, so the service needs no extra state.

Without quotas in the snapshot (an empty mapping) nothing here applies and every policy decides
exactly as before.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

from scheduling.core.types import Job, JobId, Preempt, RunningJob, Snapshot, TenantQuota

NO_QUOTA = TenantQuota(0, None)
"""The quota of a tenant missing from a non-empty quota mapping: no guarantee, may borrow."""


def normalise(quotas: Mapping[str, int | TenantQuota]) -> dict[str, TenantQuota]:
    """Tenant → :class:`TenantQuota`; a plain int ``n`` means ``TenantQuota(n)`` (guaranteed
    GPUs, unlimited borrowing). Raises ``ValueError`` for a negative count or another type."""
    out: dict[str, TenantQuota] = {}
    for tenant, quota in quotas.items():
        if isinstance(quota, TenantQuota):
            out[tenant] = quota
        elif isinstance(quota, int) and not isinstance(quota, bool):
            out[tenant] = TenantQuota(quota)
        else:
            raise ValueError(f"quota of tenant {tenant!r} must be an int or a TenantQuota, got {quota!r}")
    return out


def usage_by_tenant(running: Iterable[RunningJob]) -> dict[str, int]:
    """Tenant → GPUs held by its running jobs (the sum of their gangs)."""
    usage: dict[str, int] = {}
    for rj in running:
        usage[rj.job.tenant] = usage.get(rj.job.tenant, 0) + rj.job.gpus
    return usage


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


class QuotaGate:
    """Quota bookkeeping for one round, shared by every policy's round skeleton
    (:mod:`scheduling.core.rounds`); mutable, private to one ``decide`` call.

    Build with :func:`gate_for` (``None`` when the snapshot has no quotas). ``can_preempt``: the
    policy reclaims lent GPUs by preemption, so borrowing needs no time bound unless the reclaim
    mode asks for one. ``can_start``: whether a pending job could ever start on the cluster as it
    is (:func:`scheduling.core.placement.unfit_reason`); jobs that cannot are owed no GPUs, so
    they never keep idle GPUs from borrowers.
    """

    def __init__(
        self, snapshot: Snapshot, *, can_preempt: bool = False, can_start: Callable[[Job], bool] | None = None
    ) -> None:
        self.quotas = normalise(snapshot.tenant_quotas)
        self.usage = usage_by_tenant(snapshot.running)
        config = snapshot.config
        bounded = not can_preempt or config.reclaim in ("bound", "both")
        self.borrow_bound_s: float | None = config.borrow_bound_s if bounded else None
        self.starvation_bound_s = config.starvation_bound_s
        self.now = snapshot.now
        self._gangs: dict[str, dict[int, int]] = {}  # tenant → pending gang size → how many
        for job in snapshot.pending:
            if can_start is not None and not can_start(job):
                continue  # a job that can never start is owed nothing
            gangs = self._gangs.setdefault(job.tenant, {})
            gangs[job.gpus] = gangs.get(job.gpus, 0) + 1
        self._owed: dict[str, int] = {t: self._owed_of(t) for t in self._gangs}
        self._owed_total = sum(self._owed.values())

    def quota(self, tenant: str) -> TenantQuota:
        """The tenant's quota (:data:`NO_QUOTA` when it has none)."""
        return self.quotas.get(tenant, NO_QUOTA)

    def _owed_of(self, tenant: str) -> int:
        unused = self.quota(tenant).guaranteed_gpus - self.usage.get(tenant, 0)
        waiting = sum(size * n for size, n in self._gangs.get(tenant, {}).items() if size <= unused)
        return max(0, min(unused, waiting))

    def over_cap(self, job: Job) -> bool:
        """Whether starting ``job`` would take its tenant above its cap ``g_t + b_t``."""
        return self.usage.get(job.tenant, 0) + job.gpus > self.quota(job.tenant).cap

    def within_guarantee(self, job: Job) -> bool:
        """Whether starting ``job`` keeps its tenant within its guarantee (``u_t + G_j ≤ g_t``)."""
        return self.usage.get(job.tenant, 0) + job.gpus <= self.quota(job.tenant).guaranteed_gpus

    def owed_to_others(self, tenant: str) -> int:
        """GPUs the other tenants are owed now: ``Σ_{s≠t} min(g_s − u_s, W_s)`` with ``W_s`` the
        GPUs of the pending jobs of ``s`` whose gang fits its unused guarantee ``g_s − u_s``."""
        return self._owed_total - self._owed.get(tenant, 0)

    def refusal(self, job: Job, idle_after: int) -> str | None:
        """Why ``job`` may not start under its tenant's quota (``None``: it may).

        ``idle_after``: idle GPUs left once the job has taken its GPUs (s of the start it is about
        to make). Rules in the module docstring.
        """
        quota = self.quota(job.tenant)
        after = self.usage.get(job.tenant, 0) + job.gpus
        if after > quota.cap:
            return (
                f"tenant {job.tenant} would hold {after} GPUs, above its quota cap of {quota.cap:.0f} "
                f"({quota.guaranteed_gpus} guaranteed + {quota.borrow_limit} borrowable)"
            )
        if after <= quota.guaranteed_gpus:
            return None
        borrow = after - max(quota.guaranteed_gpus, self.usage.get(job.tenant, 0))
        if (
            self.borrow_bound_s is not None
            and job.remaining_time_s > self.borrow_bound_s
            and wait_s(job, self.now) < self.starvation_bound_s
        ):
            return (
                f"would borrow {borrow} GPUs beyond tenant {job.tenant}'s guarantee of "
                f"{quota.guaranteed_gpus}, but its remaining time {job.remaining_time_s:.0f} s exceeds "
                f"the borrow bound of {self.borrow_bound_s:.0f} s"
            )
        owed = self.owed_to_others(job.tenant)
        if idle_after < owed:
            return (
                f"would borrow {borrow} GPUs beyond tenant {job.tenant}'s guarantee of "
                f"{quota.guaranteed_gpus}, but {owed} idle GPUs are kept for other tenants' "
                f"waiting jobs within their guarantees"
            )
        return None

    def _change(self, job: Job, gpus: int, started: bool) -> None:
        tenant = job.tenant
        self.usage[tenant] = self.usage.get(tenant, 0) + gpus
        if started:
            gangs = self._gangs.get(tenant, {})
            if gangs.get(job.gpus, 0) > 0:
                gangs[job.gpus] -= 1
        self._owed_total -= self._owed.get(tenant, 0)
        self._owed[tenant] = self._owed_of(tenant)
        self._owed_total += self._owed[tenant]

    def admit(self, job: Job) -> None:
        """Record that pending ``job`` started (its tenant's usage grows by ``G_j``)."""
        self._change(job, job.gpus, True)

    def release(self, job: Job) -> None:
        """Record that running ``job`` was preempted this round (it waits again next round)."""
        self._change(job, -job.gpus, False)


def gate_for(
    snapshot: Snapshot, *, can_preempt: bool = False, can_start: Callable[[Job], bool] | None = None
) -> QuotaGate | None:
    """A :class:`QuotaGate` for the snapshot, or ``None`` when it carries no quotas."""
    if not snapshot.tenant_quotas:
        return None
    return QuotaGate(snapshot, can_preempt=can_preempt, can_start=can_start)


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


def wait_s(job: Job, now: float) -> float:
    """How long ``job`` has been waiting now (s): ``now − job.waiting_since``, never negative."""
    return max(0.0, now - job.waiting_since)


def aged_key(job: Job, now: float, aging_s: float) -> float:
    """Aging priority (smaller first) **(ours)**: ``P_j / (1 + wait/aging_s)`` (s) — SJF's key,
    shrunk as the job waits; after one ``aging_s`` of waiting a job competes as if it were half as
    long. Raises ``ValueError`` for a non-positive ``aging_s``."""
    if not aging_s > 0 or math.isinf(aging_s):
        raise ValueError(f"aging_s must be a positive finite number of seconds, got {aging_s}")
    return job.remaining_time_s / (1.0 + wait_s(job, now) / aging_s)


def quotas_from_json(data: object) -> dict[str, TenantQuota]:
    """Quotas from parsed JSON: ``{"tenant": 4}`` or ``{"tenant": {"guaranteed_gpus": 4,
    "borrow_limit": 2}}`` (``borrow_limit`` optional, ``null`` = unlimited). Raises ``ValueError``
    with the offending tenant for anything else (not an object, negative or non-integer counts,
    unknown keys)."""
    if not isinstance(data, dict) or not data:
        raise ValueError(
            "quotas must be a non-empty JSON object: tenant → GPUs or {guaranteed_gpus, borrow_limit}"
        )
    out: dict[str, TenantQuota] = {}
    for tenant, value in data.items():
        if isinstance(value, dict):
            unknown = set(value) - {"guaranteed_gpus", "borrow_limit"}
            if unknown or "guaranteed_gpus" not in value:
                raise ValueError(
                    f"quota of tenant {tenant!r}: expected keys guaranteed_gpus and optional "
                    f"borrow_limit, got {sorted(value)}"
                )
            guaranteed, limit = value["guaranteed_gpus"], value.get("borrow_limit")
        else:
            guaranteed, limit = value, None
        for name, count, optional in (("guaranteed_gpus", guaranteed, False), ("borrow_limit", limit, True)):
            if optional and count is None:
                continue
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise ValueError(
                    f"quota of tenant {tenant!r}: {name} must be a whole number ≥ 0, got {count!r}"
                )
        out[str(tenant)] = TenantQuota(guaranteed, limit)
    return out


def proportional_quotas(weights: Mapping[str, float], gpus: int) -> dict[str, TenantQuota]:
    """Guarantees proportional to ``weights`` summing to ``gpus`` (largest-remainder rounding,
    Hamilton's method; ties by tenant name), unlimited borrowing. Raises ``ValueError`` for no
    positive weight or a negative one."""
    if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ValueError("quota weights must be ≥ 0 with a positive sum")
    mass = sum(weights.values())
    exact = {t: gpus * w / mass for t, w in weights.items()}
    out = {t: math.floor(v) for t, v in exact.items()}
    for t in sorted(exact, key=lambda t: (-(exact[t] - out[t]), t))[: gpus - sum(out.values())]:
        out[t] += 1
    return {t: TenantQuota(g) for t, g in out.items()}


def demand_gpu_s(jobs: Iterable[Job]) -> dict[str, float]:
    """Tenant → exclusive work of its jobs, ``Σ G_j × P_j`` (GPU-seconds)."""
    out: dict[str, float] = {}
    for j in jobs:
        out[j.tenant] = out.get(j.tenant, 0.0) + j.gpus * j.remaining_time_s
    return out
