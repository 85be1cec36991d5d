"""GPU usage per bin and Jain's index inputs, by hand."""

from __future__ import annotations

import pytest

from frontend.payloads.bins import Bins, usage_bins
from frontend.payloads.timeline import shared_intervals
from scheduling.core.usage import Interval, charge_segments


def test_bins_split_an_interval_across_partial_and_full_bins() -> None:
    bins = Bins(start_s=1000.0, width_s=10.0, bins=4)
    bins.add(7, 1005.0, 1027.0, 1.0)  # 5 s in bin 0, 10 s in bin 1, 7 s in bin 2
    bins.add(7, 990.0, 1050.0, 0.5)  # clipped to [1000, 1040]: 5 GPU-s per bin
    bins.add(8, 1031.0, 1033.0, 2.0)  # inside bin 3: 2 × 2 s
    assert bins.totals() == {
        7: pytest.approx([10.0, 15.0, 12.0, 5.0]),
        8: pytest.approx([0.0, 0.0, 0.0, 4.0]),
    }


def test_a_shared_gpu_is_split_by_normalised_progress() -> None:
    # GPU 1: tenant 7's job 1 on [0, 20], tenant 8's job 2 on [10, 30]; GPU 2: tenant 8's job 3
    # alone on [0, 30]; bins of 10 s
    intervals = [
        Interval(1, "7", (1,), 0.0, 20.0),
        Interval(2, "8", (1,), 10.0, 30.0),
        Interval(3, "8", (2,), 0.0, 30.0),
    ]
    even = usage_bins(charge_segments(intervals, lambda a, b: 1.0), 0.0, 10.0, 3)
    # equal slowdowns, ½ each: tenant 7 10 s alone + ½ × 10 s = [10, 5, 0];
    # tenant 8: GPU 1 ½ × 10 then 10 alone, plus GPU 2 10 per bin = [10, 15, 20]
    assert even == {7: pytest.approx([10.0, 5.0, 0.0]), 8: pytest.approx([10.0, 15.0, 20.0])}
    # never counted twice: per bin the charges add up to the busy GPU-seconds (2 GPUs × 10 s = 20)
    assert [a + b for a, b in zip(even[7], even[8], strict=True)] == pytest.approx([20.0, 20.0, 20.0])
    # ξ_1 = 1, ξ_2 = 3 while shared: job 1 pays 3/4 of [10, 20], job 2 1/4
    xi = {(1, 2): 1.0, (2, 1): 3.0}
    split = usage_bins(charge_segments(intervals, lambda a, b: xi[(a, b)]), 0.0, 10.0, 3)
    assert split == {7: pytest.approx([10.0, 7.5, 0.0]), 8: pytest.approx([10.0, 12.5, 20.0])}


def test_shared_intervals_are_where_two_placements_overlap() -> None:
    rows = [
        ("node-00:0", 0, 1, "a", 7, "t", 0.0, 20.0),
        ("node-00:0", 1, 2, "b", 8, "u", 10.0, 30.0),
        ("node-00:1", 0, 3, "c", 7, "t", 0.0, 30.0),
    ]
    assert shared_intervals(rows) == [("node-00:0", 10.0, 20.0)]
