"""Response shapes of a tenant's standing against its quota now (over quota, borrowed GPUs, per GPU
type) and of its GPU-hours over sliding windows, for ``GET /api/v1/tenant/`` and
``GET /api/v1/admin/usage/`` (docs/API.md, docs/FAIRNESS.md §1 "Over quota" and §4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers

from scheduling import service
from scheduling.core.quota_state import QuotaState


class QuotaStateSerializer(serializers.Serializer):
    """GPUs in use against one quota (the quota use the scheduler counts: under ``sjf-bsbf-fair``
    a shared GPU split by normalised progress, so possibly fractional): ``gpus_borrowed`` (above
    the guarantee, within the borrow limit) and ``gpus_over_quota`` (above guaranteed + borrow
    limit); ``borrow_limit`` null: unlimited. ``gpu_type`` empty: the row for any type (absent
    in the total)."""

    gpu_type = serializers.CharField(required=False)
    gpus_in_use = serializers.FloatField()
    guaranteed_gpus = serializers.IntegerField()
    borrow_limit = serializers.IntegerField(allow_null=True)
    gpus_borrowed = serializers.FloatField()
    gpus_over_quota = serializers.FloatField()
    over_quota = serializers.BooleanField()


class QuotaUseSerializer(serializers.Serializer):
    """``over_quota``: over the summed quota or any one row's; ``total``: against the quota rows
    summed (what the scheduler enforces); ``per_gpu_type``: one entry per quota row."""

    over_quota = serializers.BooleanField()
    total = QuotaStateSerializer()
    per_gpu_type = QuotaStateSerializer(many=True)


class TenantWindowSerializer(serializers.Serializer):
    """One window ending now: GPU-hours charged (a shared GPU split by normalised progress), the
    guarantee's GPU-hours over it, and their ratio (null without a guarantee)."""

    window_s = serializers.IntegerField()
    gpu_hours = serializers.FloatField()
    quota_gpu_hours = serializers.FloatField()
    share_of_quota = serializers.FloatField(allow_null=True)


class WindowFairnessSerializer(serializers.Serializer):
    """The windowed fairness of one window: Jain's index and max/min of ``GPU-hours ÷ guaranteed
    GPUs`` over the tenants with a guarantee that had work for at least half the window (null: no
    such tenant); ``tenants``: their names (admins only)."""

    window_s = serializers.IntegerField()
    jain_index = serializers.FloatField(allow_null=True)
    max_min_ratio = serializers.FloatField(allow_null=True)
    tenants = serializers.ListField(child=serializers.CharField(), required=False)


def state_data(state: QuotaState, gpu_type: str | None = None) -> dict[str, Any]:
    """One :class:`QuotaStateSerializer` body."""
    body = {
        "gpus_in_use": state.gpus_in_use,
        "guaranteed_gpus": state.guaranteed_gpus,
        "borrow_limit": state.borrow_limit,
        "gpus_borrowed": state.gpus_borrowed,
        "gpus_over_quota": state.gpus_over_quota,
        "over_quota": state.over_quota,
    }
    return body if gpu_type is None else {"gpu_type": gpu_type, **body}


def quota_use_data(use: service.TenantQuotaUse) -> dict[str, Any]:
    """One :class:`QuotaUseSerializer` body."""
    return {
        "over_quota": use.over_quota,
        "total": state_data(use.total),
        "per_gpu_type": [state_data(s, t) for t, s in use.per_type.items()],
    }


def windows_data(windows: list[service.TenantWindow]) -> list[dict[str, Any]]:
    """:class:`TenantWindowSerializer` bodies (GPU-hours to 4 decimals)."""
    return [
        {
            "window_s": w.window_s,
            "gpu_hours": round(w.gpu_hours, 4),
            "quota_gpu_hours": round(w.quota_gpu_hours, 4),
            "share_of_quota": None if w.share_of_quota is None else round(w.share_of_quota, 4),
        }
        for w in windows
    ]


def fairness_data(
    fairness: list[service.WindowFairness], names: Mapping[int, str] | None
) -> list[dict[str, Any]]:
    """:class:`WindowFairnessSerializer` bodies; ``names`` (``{tenant id: name}``) adds the tenants'
    names, ``None`` leaves them out (a member's view names no other tenant)."""
    out = []
    for f in fairness:
        body: dict[str, Any] = {
            "window_s": f.window_s,
            "jain_index": None if f.jain_index is None else round(f.jain_index, 4),
            "max_min_ratio": None if f.max_min_ratio is None else round(f.max_min_ratio, 4),
        }
        if names is not None:
            body["tenants"] = sorted(names[t] for t in f.tenants if t in names)
        out.append(body)
    return out
