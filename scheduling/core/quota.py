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

With reclaim mode ``"preempt"`` or ``"both"``, a preemptive policy (``sjf-bsbf-fair``) also gets
lent GPUs back by preempting borrowed work (:mod:`scheduling.core.reclaim`).

Without quotas in the snapshot (an empty mapping) nothing here applies and every policy decides
exactly as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from scheduling.core.charge import charge_split
from scheduling.core.types import Job, JobId, RunningJob, Share, Snapshot, TenantQuota

NO_QUOTA = TenantQuota(0, None)
"""The quota of a tenant missing from a non-empty quota mapping: no guarantee, may borrow."""

EPS = 1e-9
"""Slack (GPUs) of quota comparisons: normalised usage is a sum of fractions (no effect on ints)."""


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


def reclaim_in_effect(reclaim: str, can_preempt: bool) -> str:
    """How lent GPUs actually come back: the configured ``reclaim`` mode
    (:attr:`~scheduling.core.types.SchedulerConfig.reclaim`) for a policy that reclaims by
    preemption (``can_preempt``, sjf-bsbf-fair), else ``"bound"`` — a policy that never preempts
    can only bound borrowers' remaining time, whatever the setting says. The quota gate and the
    dashboard's words both follow this one answer."""
    return reclaim if can_preempt else "bound"


def charged_usage(running: Iterable[RunningJob], charges: Mapping[JobId, float] | None) -> dict[str, float]:
    """Tenant → its quota use: with ``charges`` (running job id → normalised GPUs,
    :func:`scheduling.core.charge.running_charges`) their sum, else the sum of gangs
    (:func:`usage_by_tenant`)."""
    if charges is None:
        return dict(usage_by_tenant(running))
    usage: dict[str, float] = {}
    for rj in running:
        usage[rj.job.tenant] = usage.get(rj.job.tenant, 0.0) + charges.get(rj.job.id, float(rj.job.gpus))
    return usage


def gpus_text(count: float) -> str:
    """``count`` GPUs in words, singular for exactly one: ``"1 GPU"``, ``"2 GPUs"``, ``"1.5 GPUs"``
    (normalised usage may count fractions)."""
    return f"{count:g} GPU" if abs(count - 1) < EPS else f"{count:g} GPUs"


class QuotaGate:
    """Quota bookkeeping for one round, shared by every policy's round skeleton
    (:mod:`scheduling.core.rounds`); mutable, private to one ``decide`` call.

    Build with :func:`gate_for` (``None`` when the snapshot has no quotas). ``can_preempt``: the
    policy reclaims lent GPUs by preemption, so borrowing needs no time bound unless the reclaim
    mode asks for one. ``can_start``: whether a pending job could ever start on the cluster as it
    is (:func:`scheduling.core.placement.unfit_reason`); jobs that cannot are owed no GPUs, so
    they never keep idle GPUs from borrowers. ``charges`` (running job id → normalised GPUs,
    :func:`scheduling.core.charge.running_charges`; ``sjf-bsbf-fair``): usage counts a shared GPU
    by the normalised split instead of once per job, and a start may not co-locate onto another
    tenant's GPUs if that takes the tenant below its guarantee while it has jobs waiting
    (:meth:`share_refusal`); without, every figure is in whole GPUs as before. ``requeued``: the
    jobs preempted this round (already gone from ``snapshot.running``; ``sjf-bsbf-fair``'s
    reclaim) — they wait again from the next round on, so they count as waiting jobs here too
    (owed GPUs, the co-location guard): the next round's reclaim judges by the same waiting jobs
    (docs/FAIRNESS.md §1).
    """

    def __init__(
        self,
        snapshot: Snapshot,
        *,
        can_preempt: bool = False,
        can_start: Callable[[Job], bool] | None = None,
        charges: Mapping[JobId, float] | None = None,
        requeued: Sequence[Job] = (),
    ) -> None:
        self.quotas = normalise(snapshot.tenant_quotas)
        self.usage = charged_usage(snapshot.running, charges)
        self.normalised = charges is not None
        self.guard = self.normalised and snapshot.config.colocation_guard
        self._tenant_of = {rj.job.id: rj.job.tenant for rj in snapshot.running} if self.normalised else {}
        waiting = (*snapshot.pending, *requeued)
        self._waiting = {j.tenant for j in waiting}
        # job tenant → (the tenant it may not co-locate onto, why): later jobs of the same tenant
        # in this round skip the partner search (it would find the same residents) until that
        # tenant starts a job of its own (its usage grows)
        self._refused: dict[str, tuple[str, str]] = {}
        config = snapshot.config
        bounded = reclaim_in_effect(config.reclaim, can_preempt) in ("bound", "both")
        self.borrow_bound_s: float | None = config.borrow_bound_s if bounded else None
        self.starvation_bound_s = config.starvation_bound_s
        self.now = snapshot.now
        self._gangs = startable_gangs(waiting, can_start)  # tenant → pending gang size → how many
        self._owed: dict[str, float] = {t: self._owed_of(t) for t in self._gangs}
        self._owed_total = sum(self._owed.values())

    def quota(self, tenant: str) -> TenantQuota:
        """The tenant's quota (:data:`NO_QUOTA` when it has none)."""
        return self.quotas.get(tenant, NO_QUOTA)

    def _owed_of(self, tenant: str) -> float:
        unused = self.quota(tenant).guaranteed_gpus - self.usage.get(tenant, 0)
        waiting = sum(size * n for size, n in self._gangs.get(tenant, {}).items() if size <= unused + EPS)
        return max(0, min(unused, waiting))

    def over_cap(self, job: Job) -> bool:
        """Whether starting ``job`` would take its tenant above its cap ``g_t + b_t``."""
        return self.usage.get(job.tenant, 0) + job.gpus > self.quota(job.tenant).cap + EPS

    def within_guarantee(self, job: Job) -> bool:
        """Whether starting ``job`` keeps its tenant within its guarantee (``u_t + G_j ≤ g_t``)."""
        return self.usage.get(job.tenant, 0) + job.gpus <= self.quota(job.tenant).guaranteed_gpus + EPS

    def owed_to_others(self, tenant: str) -> float:
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
        if after > quota.cap + EPS:
            return (
                f"tenant {job.tenant} would hold {after:g} GPUs, above its quota cap of {quota.cap:.0f} "
                f"({quota.guaranteed_gpus} guaranteed + {quota.borrow_limit} borrowable)"
            )
        if after <= quota.guaranteed_gpus + EPS:
            return None
        borrow = after - max(quota.guaranteed_gpus, self.usage.get(job.tenant, 0))
        if (
            self.borrow_bound_s is not None
            and job.remaining_time_s > self.borrow_bound_s
            and wait_s(job, self.now) < self.starvation_bound_s
        ):
            return (
                f"would borrow {gpus_text(borrow)} beyond tenant {job.tenant}'s guarantee of "
                f"{quota.guaranteed_gpus}, but its remaining time {job.remaining_time_s:.0f} s exceeds "
                f"the borrow bound of {self.borrow_bound_s:.0f} s"
            )
        owed = self.owed_to_others(job.tenant)
        if idle_after < owed - EPS:
            # the number is what other tenants are owed, not GPUs idle now (there may be none)
            left = "no GPU" if idle_after <= 0 else gpus_text(idle_after)
            return (
                f"would borrow {gpus_text(borrow)} beyond tenant {job.tenant}'s guarantee of "
                f"{quota.guaranteed_gpus}, but other tenants' waiting jobs are owed {gpus_text(owed)} "
                f"within their guarantees and starting it would leave {left} idle"
            )
        return None

    def _losses(self, job: Job, shares: Sequence[Share]) -> dict[str, float]:
        """Tenant → normalised GPUs its residents lose when ``job`` joins them (``shares``): a
        resident alone was charged 1 per GPU, beside ``job`` ``ξ_job / (ξ_job + ξ_resident)``."""
        lost: dict[str, float] = {}
        for share in shares:
            tenant = self._tenant_of.get(share.partner_id)
            if tenant is not None:
                kept = charge_split(share.xi_partner, share.xi_self)[0]
                lost[tenant] = lost.get(tenant, 0.0) + len(share.gpu_ids) * (1.0 - kept)
        return lost

    def share_refusal(self, job: Job, shares: Sequence[Share]) -> str | None:
        """Why ``job`` may not co-locate as ``shares`` say (``None``: it may): with normalised usage
        only, joining a resident of another tenant that has jobs waiting must not take that tenant
        below its guarantee — co-location onto an owner's GPUs is borrowing from it."""
        if not self.guard:  # SchedulerConfig.colocation_guard off: co-location is never refused
            return None
        for tenant, lost in self._losses(job, shares).items():
            if tenant == job.tenant or tenant not in self._waiting:
                continue
            guaranteed = self.quota(tenant).guaranteed_gpus
            if self.usage.get(tenant, 0) - lost < guaranteed - EPS:
                why = (
                    f"co-locating onto tenant {tenant}'s GPUs would take it below its guarantee of "
                    f"{guaranteed} GPUs (normalised split) while it has jobs waiting"
                )
                self._refused[job.tenant] = (tenant, why)
                return why
        return None

    def refused_before(self, job: Job) -> str | None:
        """The co-location refusal of an earlier job of ``job``'s tenant in this round, while it
        holds (:meth:`share_refusal`; ``None``: none) — the partner search may be skipped."""
        refused = self._refused.get(job.tenant)
        return None if refused is None else refused[1]

    def _change(self, job: Job, gpus: float, started: bool) -> None:
        tenant = job.tenant
        self.usage[tenant] = self.usage.get(tenant, 0) + gpus
        if started:
            gangs = self._gangs.get(tenant, {})
            if gangs.get(job.gpus, 0) > 0:
                gangs[job.gpus] -= 1
        self._refresh(tenant)

    def _refresh(self, tenant: str) -> None:
        if tenant not in self._gangs:
            return  # owed nothing: no waiting job that could start
        self._owed_total -= self._owed.get(tenant, 0)
        self._owed[tenant] = self._owed_of(tenant)
        self._owed_total += self._owed[tenant]

    def admit(self, job: Job, shares: Sequence[Share] = ()) -> None:
        """Record that pending ``job`` started (its tenant's usage grows by ``G_j``; with normalised
        usage and ``shares``, by its share of the shared GPUs, and its partners' tenants lose theirs)."""
        if self._refused:
            self._refused = {t: r for t, r in self._refused.items() if r[0] != job.tenant}
        if not self.normalised or not shares:
            self._change(job, job.gpus, True)
            return
        lost = self._losses(job, shares)
        shared = sum(len(share.gpu_ids) for share in shares)
        gained = sum(len(sh.gpu_ids) * charge_split(sh.xi_self, sh.xi_partner)[0] for sh in shares)
        self._change(job, job.gpus - shared + gained, True)
        for tenant, gpus in lost.items():
            self.usage[tenant] = self.usage.get(tenant, 0) - gpus
            self._refresh(tenant)

    def release(self, job: Job) -> None:
        """Record that running ``job`` was preempted this round (it waits again next round)."""
        self._change(job, -job.gpus, False)


def startable_gangs(
    waiting: Sequence[Job], can_start: Callable[[Job], bool] | None
) -> dict[str, dict[int, int]]:
    """Tenant → gang size (GPUs) → how many of the ``waiting`` jobs of that tenant and size could
    ever start (``can_start``; ``None``: all), tenants and sizes in the order of their first such
    job (the owed total is a float sum in that order). Every caller's ``can_start`` is
    :func:`~scheduling.core.placement.never_fits_reason`, cached per job shape for the round, so
    a job costs one dictionary lookup here."""
    gangs: dict[str, dict[int, int]] = {}
    for job in waiting:
        if can_start is not None and not can_start(job):
            continue  # a job that can never start is owed nothing
        sizes = gangs.get(job.tenant)
        if sizes is None:
            sizes = gangs[job.tenant] = {}
        sizes[job.gpus] = sizes.get(job.gpus, 0) + 1
    return gangs


def gate_for(
    snapshot: Snapshot,
    *,
    can_preempt: bool = False,
    can_start: Callable[[Job], bool] | None = None,
    charges: Mapping[JobId, float] | None = None,
    requeued: Sequence[Job] = (),
) -> QuotaGate | None:
    """A :class:`QuotaGate` for the snapshot, or ``None`` when it carries no quotas."""
    if not snapshot.tenant_quotas:
        return None
    return QuotaGate(
        snapshot, can_preempt=can_preempt, can_start=can_start, charges=charges, requeued=requeued
    )


def wait_s(job: Job, now: float) -> float:
    """How long ``job`` has been waiting now (s): ``now − job.waiting_since``, never negative."""
    return max(0.0, now - job.waiting_since)
