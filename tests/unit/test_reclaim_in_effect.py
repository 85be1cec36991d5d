"""One answer to "how do lent GPUs come back": ``reclaim_in_effect``, which the quota gate follows
and the dashboard's fairness summary and settings table show (docs/FAIRNESS.md §1)."""

from __future__ import annotations

import pytest

from scheduling.core.quota import QuotaGate, reclaim_in_effect
from scheduling.core.types import RECLAIM_MODES, Cluster, SchedulerConfig, Snapshot, TenantQuota


@pytest.mark.parametrize("mode", RECLAIM_MODES)
def test_a_policy_that_never_preempts_bounds_whatever_the_setting(mode: str) -> None:
    assert reclaim_in_effect(mode, can_preempt=False) == "bound"
    assert reclaim_in_effect(mode, can_preempt=True) == mode


@pytest.mark.parametrize("mode", RECLAIM_MODES)
@pytest.mark.parametrize("can_preempt", [False, True])
def test_the_quota_gate_bounds_borrowers_exactly_when_the_mode_in_effect_says_so(
    mode: str, can_preempt: bool
) -> None:
    config = SchedulerConfig(reclaim=mode, borrow_bound_s=600.0)
    snapshot = Snapshot(0.0, Cluster.uniform(1, 2), (), (), config, {"a": TenantQuota(1)})
    gate = QuotaGate(snapshot, can_preempt=can_preempt)
    bounded = reclaim_in_effect(mode, can_preempt) in ("bound", "both")
    assert gate.borrow_bound_s == (600.0 if bounded else None)
