"""Each tenant's GPUs in use against its quota, now: borrowed and over-quota GPUs, in total and per
GPU type (docs/FAIRNESS.md §1, "Over quota"; the rule is
:func:`scheduling.core.quota_state.quota_state`).

*In use* counts the GPUs of the tenant's running gangs, a shared GPU for each of its two jobs, as
the quota gate does (the active ``Placement`` rows, one per job and GPU). The **total** is held
against the tenant's quota rows summed (:func:`~scheduling.service.fairness.summed_quotas`,
what the core enforces). **Per GPU type**: a row for type ``T`` is held against the GPUs of type
``T`` the tenant uses, and a row for any type (``gpu_type`` empty) against the GPUs of the types
that have no row of their own **(ours)**. Units: GPUs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count

from cluster.models import Placement, Quota, Tenant
from scheduling.core.quota import NO_QUOTA
from scheduling.core.quota_state import QuotaState, quota_state
from scheduling.core.types import TenantQuota
from scheduling.service.fairness import summed_quotas


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


def quota_use(tenant_ids: Iterable[int] | None = None) -> dict[int, TenantQuotaUse]:
    """``{tenant id: TenantQuotaUse}`` of the given tenants (``None``: every tenant), in 2 queries.

    A tenant without a quota row has no guarantee and no borrow limit (it may only borrow), so it
    is never over quota; its ``per_type`` is empty.
    """
    tenants = Tenant.objects.order_by()
    rows = Quota.objects.order_by()
    placements = Placement.objects.filter(active=True).order_by()
    if tenant_ids is not None:
        ids = list(tenant_ids)
        tenants, rows = tenants.filter(pk__in=ids), rows.filter(tenant_id__in=ids)
        placements = placements.filter(job__tenant_id__in=ids)
    quota_rows = list(rows.values_list("tenant_id", "gpu_type", "guaranteed_gpus", "borrow_limit"))
    used: dict[int, dict[str, int]] = defaultdict(dict)
    for tenant_id, gpu_type, n in placements.values_list("job__tenant_id", "gpu__gpu_type").annotate(
        n=Count("id")
    ):
        used[tenant_id][gpu_type] = n
    summed = summed_quotas((t, g, b) for t, _, g, b in quota_rows)
    typed: dict[int, dict[str, TenantQuota]] = defaultdict(dict)
    for tenant_id, gpu_type, g, b in quota_rows:
        typed[tenant_id][gpu_type] = TenantQuota(g, b)
    out = {}
    for tenant_id in tenants.values_list("pk", flat=True):
        mine, rows_of = used.get(tenant_id, {}), typed.get(tenant_id, {})
        per_type = {}
        for gpu_type, quota in sorted(rows_of.items()):
            if gpu_type:
                n = mine.get(gpu_type, 0)
            else:
                n = sum(k for t, k in mine.items() if t not in rows_of)
            per_type[gpu_type] = quota_state(n, quota)
        total = quota_state(sum(mine.values()), summed.get(tenant_id, NO_QUOTA))
        out[tenant_id] = TenantQuotaUse(total, per_type)
    return out
