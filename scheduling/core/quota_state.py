"""Where a tenant stands against its quota (pure; docs/FAIRNESS.md §1, "Over quota").

A tenant with ``TenantQuota(g, b)`` using ``u`` GPUs (its quota use as the gate counts it: the
sum of its gangs, or under ``sjf-bsbf-fair`` its GPUs charged by the normalised split, so ``u``
may be fractional) **(ours)**:

- *borrowed* = ``max(0, min(u, g + b) − g)``: GPUs above the guarantee within the borrow limit
  (with no limit, ``b = ∞``, every GPU above ``g`` is borrowed);
- *over quota* = ``max(0, u − (g + b))``: GPUs above the cap. They are not borrowed: the tenant
  was never allowed them. It happens only when an admin lowers a quota below what the tenant
  already runs; the quota gate admits none of its jobs that would keep it above the cap, and its
  running work is left alone (reclaim takes only *borrowed* work from other tenants' owners).

So ``min(u, g) + borrowed + over = u`` always.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.core.types import TenantQuota


@dataclass(frozen=True, slots=True)
class QuotaState:
    """``gpus_in_use`` (GPUs), the quota's ``guaranteed_gpus`` and ``borrow_limit`` (``None``:
    unlimited), and of the GPUs in use how many are ``gpus_borrowed`` and ``gpus_over_quota``
    (module docstring)."""

    gpus_in_use: float
    guaranteed_gpus: int
    borrow_limit: int | None
    gpus_borrowed: float
    gpus_over_quota: float

    @property
    def over_quota(self) -> bool:
        """Whether the tenant uses more GPUs than its cap ``g + b`` (beyond rounding, 10⁻⁶ GPUs)."""
        return self.gpus_over_quota > OVER_EPS


#: Over-quota GPUs below this count as none (a split's floating-point rounding, GPUs).
OVER_EPS = 1e-6


def quota_state(gpus_in_use: float, quota: TenantQuota) -> QuotaState:
    """How ``gpus_in_use`` GPUs (≥ 0) stand against ``quota``: borrowed and over-quota GPUs (module
    docstring); the three counts are floats whatever was given (a table of them reads ``0.0``
    beside ``2.5``, not ``0``). Raises ``ValueError`` for a negative count."""
    if gpus_in_use < 0:
        raise ValueError(f"GPUs in use must be ≥ 0, got {gpus_in_use}")
    used, g = float(gpus_in_use), quota.guaranteed_gpus
    within_cap = used if quota.borrow_limit is None else min(used, float(g + quota.borrow_limit))
    return QuotaState(
        gpus_in_use=used,
        guaranteed_gpus=g,
        borrow_limit=quota.borrow_limit,
        gpus_borrowed=max(0.0, within_cap - g),
        gpus_over_quota=used - within_cap,
    )
