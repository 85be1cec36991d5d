"""GPU types in the service: per-type quotas and a job's accepted types for the snapshot
(docs/FAIRNESS.md §GPU types; the rules themselves are :mod:`scheduling.core.gpu_types`).

A tenant's ``Quota`` rows with a ``gpu_type`` are, besides their part of the summed total
(:func:`scheduling.service.fairness.summed_quotas`, the tenant's *any* quota), a cap on the GPUs of
that type the tenant's running jobs may hold (guaranteed + borrow limit of the row).
"""

from __future__ import annotations

import json
from typing import Any

from cluster.models import Quota
from scheduling.core import types as core


def type_quotas() -> dict[str, dict[str, core.TenantQuota]]:
    """Tenant name → GPU type → :class:`~scheduling.core.types.TenantQuota` of its typed ``Quota``
    rows (1 query); tenants without a typed row are absent."""
    out: dict[str, dict[str, core.TenantQuota]] = {}
    rows = (
        Quota.objects.exclude(gpu_type="")
        .order_by()
        .values_list("tenant__name", "gpu_type", "guaranteed_gpus", "borrow_limit")
    )
    for tenant, gpu_type, guaranteed, limit in rows:
        out.setdefault(tenant, {})[gpu_type] = core.TenantQuota(guaranteed, limit)
    return out


def accepted_types(value: Any) -> tuple[str, ...]:
    """A job's ``gpu_types`` column as the core's tuple: the database driver hands a JSON list
    either decoded (a list) or as its text; ``None`` or empty: any type (``()``)."""
    if isinstance(value, str):
        value = json.loads(value)
    return tuple(str(t) for t in value) if value else ()
