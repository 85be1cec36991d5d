"""The multi-tenant inputs of a round (docs/FAIRNESS.md §1–2): each tenant's quota from its
``Quota`` rows, and the fairness settings as the core's
:class:`~scheduling.core.types.SchedulerConfig`.

Units: GPUs, seconds (s).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from cluster.models import Quota
from scheduling.core import types as core


def scheduler_config() -> core.SchedulerConfig:
    """The :class:`~scheduling.core.types.SchedulerConfig` of every round, from the settings
    ``SHAREWISE_STARVATION_BOUND_S`` (s), ``SHAREWISE_AGING_S`` (s), ``SHAREWISE_RECLAIM``
    (``preempt``, ``bound`` or ``both``), ``SHAREWISE_BORROW_BOUND_S`` (s) (docs/FAIRNESS.md
    §1–2), sjf-bsbf-fair's switches ``SHAREWISE_SPLIT_CHARGE``, ``SHAREWISE_COLOCATION_GUARD``,
    ``SHAREWISE_RECLAIM_COLOCATED`` and ``SHAREWISE_PRIORITY_PREEMPTION`` (§5),
    ``SHAREWISE_SHARE_UNKNOWN`` (docs/LEARNING.md: may a job of unknown memory, or a
    pair of unknown slowdown, share), ``SHAREWISE_PLACEMENT`` and the ``SHAREWISE_TIRESIAS_*``
    knobs (docs/FIDELITY.md); defaults in ``config/settings.py``. Raises
    ``ImproperlyConfigured`` for a non-positive time, an unknown reclaim mode or placement, or
    bad Tiresias knobs."""
    try:
        return core.SchedulerConfig(
            starvation_bound_s=float(settings.SHAREWISE_STARVATION_BOUND_S),
            aging_s=float(settings.SHAREWISE_AGING_S),
            reclaim=str(settings.SHAREWISE_RECLAIM),
            borrow_bound_s=float(settings.SHAREWISE_BORROW_BOUND_S),
            split_charge=bool(settings.SHAREWISE_SPLIT_CHARGE),
            colocation_guard=bool(settings.SHAREWISE_COLOCATION_GUARD),
            reclaim_colocated=bool(settings.SHAREWISE_RECLAIM_COLOCATED),
            priority_preemption=bool(settings.SHAREWISE_PRIORITY_PREEMPTION),
            share_unknown=bool(settings.SHAREWISE_SHARE_UNKNOWN),
            placement=str(settings.SHAREWISE_PLACEMENT),
            tiresias=core.TiresiasConfig(
                thresholds=tuple(float(t) for t in settings.SHAREWISE_TIRESIAS_THRESHOLDS),
                service=str(settings.SHAREWISE_TIRESIAS_SERVICE),
                starvation_guard=bool(settings.SHAREWISE_TIRESIAS_STARVATION_GUARD),
                starvation_factor=float(settings.SHAREWISE_TIRESIAS_STARVATION_FACTOR),
                demoted=str(settings.SHAREWISE_TIRESIAS_DEMOTED),
            ),
        )
    except (TypeError, ValueError) as exc:
        raise ImproperlyConfigured(f"scheduler settings: {exc}") from exc


def summed_quotas(rows: Iterable[tuple[Any, int, int | None]]) -> dict[Any, core.TenantQuota]:
    """``{key: TenantQuota}`` from ``Quota`` rows ``(key, guaranteed_gpus, borrow_limit)`` (key: a
    tenant's name or id), summed over a tenant's rows (one per GPU type): the core has no GPU types
    in its quotas, so ``guaranteed_gpus`` = Σ guaranteed and ``borrow_limit`` = ``None``
    (unlimited) if any row has no limit, else Σ borrow limits **(ours)**."""
    guaranteed: dict[Any, int] = defaultdict(int)
    borrow: dict[Any, int | None] = {}
    for key, gpus, limit in rows:
        guaranteed[key] += gpus
        so_far = borrow.get(key, 0)
        borrow[key] = None if so_far is None or limit is None else so_far + limit
    return {key: core.TenantQuota(total, borrow[key]) for key, total in guaranteed.items()}


def tenant_quotas() -> dict[str, core.TenantQuota]:
    """Each tenant's :class:`~scheduling.core.types.TenantQuota` by tenant name, from its ``Quota``
    rows (1 query; :func:`summed_quotas`). Tenants without a row are absent (no guarantee; they may
    only borrow, docs/FAIRNESS.md §1)."""
    return summed_quotas(
        Quota.objects.order_by().values_list("tenant__name", "guaranteed_gpus", "borrow_limit")
    )
