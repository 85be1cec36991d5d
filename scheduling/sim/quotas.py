"""Quotas for a simulation: read from a JSON file, or derived from a trace's demand (**ours**,
docs/FAIRNESS.md). Counts in GPUs, work in GPU-seconds."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from scheduling.core.types import Job, TenantQuota


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
    positive weight, a negative one or an infinite one; weights too large for ``gpus × weight``
    to be a float are divided by the largest first (shares do not change with scale)."""
    if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
        raise ValueError("quota weights must be ≥ 0 with a positive sum")
    if not all(math.isfinite(w) for w in weights.values()):
        raise ValueError("quota weights must be finite")
    mass = sum(weights.values())
    if not math.isfinite(gpus * mass):  # only then: ordinary weights keep their exact shares
        top = max(weights.values())
        weights = {t: w / top for t, w in weights.items()}
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
