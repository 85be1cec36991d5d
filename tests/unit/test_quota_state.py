"""Borrowed and over-quota GPUs (scheduling.core.quota_state, docs/FAIRNESS.md §1 "Over quota"),
by hand: guarantee g, borrow limit b, GPUs in use u."""

from __future__ import annotations

import pytest

from scheduling.core.quota_state import quota_state
from scheduling.core.types import TenantQuota


@pytest.mark.parametrize(
    ("u", "g", "b", "borrowed", "over"),
    [
        (3, 1, 0, 0, 2),  # the case: b = 0 borrows nothing; 3 − (1 + 0) = 2 over quota
        (3, 1, 1, 1, 1),  # cap 2: one borrowed, one over
        (3, 1, None, 2, 0),  # no limit: all above the guarantee is borrowed, never over quota
        (1, 2, 0, 0, 0),  # within the guarantee
        (0, 0, 0, 0, 0),
        (4, 0, 0, 0, 4),  # a guarantee lowered to 0 with no borrowing: everything over quota
    ],
)
def test_borrowed_is_within_the_limit_and_the_rest_is_over_quota(
    u: int, g: int, b: int | None, borrowed: int, over: int
) -> None:
    state = quota_state(u, TenantQuota(g, b))
    assert (state.gpus_borrowed, state.gpus_over_quota, state.over_quota) == (borrowed, over, over > 0)
    assert min(u, g) + state.gpus_borrowed + state.gpus_over_quota == u


def test_negative_use_is_refused() -> None:
    with pytest.raises(ValueError, match="≥ 0"):
        quota_state(-1, TenantQuota(1))


@pytest.mark.parametrize(("u", "g", "b"), [(0, 4, 2), (2, 4, 2), (7, 4, 2), (3, 1, None), (2.5, 1, 1)])
def test_the_counts_are_floats_whatever_the_use_given(u: float, g: int, b: int | None) -> None:
    # a dashboard table of them read 0 beside 2.0 (borrowed was max(0, …), an int, within the
    # guarantee; an empty use summed to the int 0)
    state = quota_state(u, TenantQuota(g, b))
    counts = (state.gpus_in_use, state.gpus_borrowed, state.gpus_over_quota)
    assert [type(c) for c in counts] == [float, float, float]
