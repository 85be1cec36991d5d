"""Each tenant's GPUs in use against its quota, now: borrowed and over-quota GPUs, in total and per
GPU type (docs/FAIRNESS.md §1, "Over quota"; the rule is
:func:`scheduling.core.quota_state.quota_state`).

*In use* is the quota use the configured policy's gate counts (docs/FAIRNESS.md §1):
``sjf-bsbf-fair`` charges a shared GPU by the normalised split (``ξ_b / (ξ_a + ξ_b)`` to job
``a``, the same pair rule as the windowed GPU-hours, :func:`~scheduling.service.gpu_hours.pair_rule`),
so a shared GPU counts once in all; the other policies count the GPUs of the running gangs, a
shared GPU once for each of its two jobs. Both come from the active ``Placement`` rows. The
**total** is held against the tenant's quota rows summed
(:func:`~scheduling.service.fairness.summed_quotas`, what the core enforces). **Per GPU type**: a
row for type ``T`` is held against the use on GPUs of type ``T``, a row for any type
(``gpu_type`` empty) against the use on the types that have no row of their own **(ours)**.
Units: GPUs (fractions of a GPU under the split).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cluster.compiled import kept_rows
from cluster.job_tenants import tenants_of
from cluster.models import Placement, Quota, Tenant
from scheduling.core.charge import charge_rates
from scheduling.core.quota import NO_QUOTA
from scheduling.core.quota_state import QuotaState, quota_state
from scheduling.core.types import JobId, TenantQuota, splits_quota_use
from scheduling.service.fairness import scheduler_config, summed_quotas
from scheduling.service.gpu_hours import note_slowdown, pair_rule
from scheduling.service.rounds import policy_named


@dataclass(frozen=True, slots=True)
class TenantQuotaUse:
    """A tenant's :class:`QuotaState` in ``total`` and ``per_type`` (``{gpu_type: QuotaState}``, one
    per quota row; ``""``: the row for any type)."""

    total: QuotaState
    per_type: dict[str, QuotaState]

    @property
    def over_quota(self) -> bool:
        """Over its summed quota or over any one row's cap."""
        return self.total.over_quota or any(s.over_quota for s in self.per_type.values())


#: A quota row as :func:`quota_use` reads it: (tenant id, GPU type or "", guaranteed GPUs,
#: borrow limit or ``None``).
QuotaRow = tuple[int, str, int, int | None]


def quota_rows() -> list[QuotaRow]:
    """Every tenant's quota rows (:data:`QuotaRow`), one query: for a caller that needs them
    for :func:`quota_use` and for the guarantees (:func:`~scheduling.service.fairness.summed_quotas`)."""
    return kept_rows(_quota_rows)


def _quota_rows() -> Any:
    """The query of :func:`quota_rows` (:func:`cluster.compiled.kept_rows`)."""
    return Quota.objects.order_by().values_list("tenant_id", "gpu_type", "guaranteed_gpus", "borrow_limit")


def quota_use(
    tenant_ids: Iterable[int] | None = None,
    *,
    rows: Iterable[QuotaRow] | None = None,
    every_tenant: bool = False,
) -> dict[int, TenantQuotaUse]:
    """``{tenant id: TenantQuotaUse}`` of the given tenants (``None``: every tenant), in 3 queries.

    A tenant without a quota row has no guarantee and no borrow limit (it may only borrow), so it
    is never over quota; its ``per_type`` is empty. ``rows``: the quota rows (:func:`quota_rows`,
    at least the given tenants') when the caller has read them, and then ``tenant_ids`` are
    taken as existing tenants (not read again): 1 query. ``every_tenant``: ``tenant_ids`` are
    every tenant, so the active placements need not be narrowed to their GPUs.
    """
    tenants = Tenant.objects.order_by()
    ids = None if tenant_ids is None else list(tenant_ids)
    # every job on the tenants' GPUs counts (a partner's share of a shared GPU changes theirs):
    # the active placements are read whole and narrowed in Python to the GPUs that hold one of
    # the tenants' jobs (the same rows as a semi-join in SQL, which read every job of the tenants)
    narrow_to = None if ids is None or every_tenant else set(ids)
    if ids is not None:
        tenants = tenants.filter(pk__in=ids)
    if rows is None:
        read = Quota.objects.order_by()
        read = read if ids is None else read.filter(tenant_id__in=ids)
        quota_rows = list(read.values_list("tenant_id", "gpu_type", "guaranteed_gpus", "borrow_limit"))
    else:
        wanted = None if ids is None else set(ids)
        quota_rows = [r for r in rows if wanted is None or r[0] in wanted]
    used = _use_per_type(splits_quota_use(policy_named(), scheduler_config()), narrow_to)
    summed = summed_quotas((t, g, b) for t, _, g, b in quota_rows)
    typed: dict[int, dict[str, TenantQuota]] = defaultdict(dict)
    for tenant_id, gpu_type, g, b in quota_rows:
        typed[tenant_id][gpu_type] = TenantQuota(g, b)
    out = {}
    for tenant_id in tenants.values_list("pk", flat=True) if rows is None or ids is None else ids:
        mine, rows_of = used.get(tenant_id, {}), typed.get(tenant_id, {})
        per_type = {}
        for gpu_type, quota in sorted(rows_of.items()):
            if gpu_type:
                n = mine.get(gpu_type, 0.0)
            else:
                n = sum((k for t, k in mine.items() if t not in rows_of), 0.0)
            per_type[gpu_type] = quota_state(round(n, 6), quota)
        total = quota_state(round(sum(mine.values(), 0.0), 6), summed.get(tenant_id, NO_QUOTA))
        out[tenant_id] = TenantQuotaUse(total, per_type)
    return out


def _active_placements() -> Any:
    """``(job, GPU, GPU type, partner, ξ measured, ξ predicted)`` of every active placement (a
    queryset, :func:`cluster.compiled.kept_rows`; the tenant comes from
    :func:`cluster.job_tenants.tenants_of`, not a join of every job)."""
    return (
        Placement.objects.filter(active=True)
        .order_by()
        .values_list(
            "job_id",
            "gpu_id",
            "gpu__gpu_type",
            "shared_with",
            "measured_slowdown",
            "predicted_slowdown",
        )
    )


def _use_per_type(split: bool, narrow_to: set[int] | None = None) -> dict[int, dict[str, float]]:
    """``{tenant id: {GPU type: use}}`` of the active placements: 1 per job and
    GPU, or with ``split`` the job's share of the GPU (:func:`scheduling.core.charge.charge_rates`
    with :func:`~scheduling.service.gpu_hours.pair_rule`). ``narrow_to``: tenant ids; only the
    placements on GPUs that hold a job of one of them count (``None``: every placement)."""
    rows = kept_rows(_active_placements)  # ints, a string and floats: nothing to convert
    tenants = tenants_of({row[0] for row in rows})
    # a job deleted since the rows were read (with its placements) holds nothing
    rows = [row for row in rows if row[0] in tenants]
    if narrow_to is not None:
        theirs = {gpu for job, gpu, *_ in rows if tenants[job] in narrow_to}
        rows = [row for row in rows if row[1] in theirs]
    used: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    if not split:
        # each job counts each of its GPUs once, whoever shares them (a job is on a GPU once)
        for job, _, gpu_type, *_ in rows:
            used[tenants[job]][gpu_type] += 1.0
        return used
    on_gpu: dict[int, list[JobId]] = defaultdict(list)
    gpu_type_of: dict[int, str] = {}
    xi: dict[tuple[JobId, JobId], float] = {}
    for job, gpu, gpu_type, partner, measured, predicted in rows:
        on_gpu[gpu].append(job)
        gpu_type_of[gpu] = gpu_type
        note_slowdown(xi, job, partner, measured, predicted)
    pair = pair_rule(xi)
    for gpu, jobs in on_gpu.items():
        for job, share in charge_rates([jobs], pair).items():
            used[tenants[job]][gpu_type_of[gpu]] += share
    return used
