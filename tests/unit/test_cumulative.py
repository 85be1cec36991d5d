"""The cumulative charge curve (scheduling/core/cumulative.py), by hand and against the bins."""

from __future__ import annotations

import math
import random

import pytest

from frontend.payloads.bins import Bins
from scheduling.core.cumulative import Cumulative


def test_charge_so_far_by_hand() -> None:
    # rate 1 on [0, 10], rate 0.5 on [5, 20]: F(5) = 5, F(10) = 10 + 2.5, F(20) = 10 + 7.5
    curve = Cumulative([(0.0, 10.0, 1.0), (5.0, 20.0, 0.5)])
    assert curve.at(-1.0) == 0.0
    assert curve.at(5.0) == 5.0
    assert curve.at(10.0) == 12.5
    assert curve.at(20.0) == 17.5
    assert curve.at(100.0) == 17.5
    # bins of 5 s from 0: [5, 7.5, 2.5, 2.5], then nothing
    assert curve.bins(0.0, 5.0, 5) == [5.0, 7.5, 2.5, 2.5, 0.0]


def test_an_open_segment_is_charged_for_ever_after() -> None:
    curve = Cumulative([(10.0, math.inf, 0.75)])
    assert curve.at(10.0) == 0.0
    assert curve.at(14.0) == 3.0
    assert curve.bins(8.0, 4.0, 2) == [1.5, 3.0]


def test_empty_and_degenerate_segments_charge_nothing() -> None:
    assert Cumulative([]).bins(0.0, 1.0, 3) == [0.0, 0.0, 0.0]
    assert Cumulative([(5.0, 5.0, 1.0), (6.0, 4.0, 1.0), (1.0, 2.0, 0.0)]).bins(0.0, 2.0, 4) == [0.0] * 4


def test_bins_equal_the_difference_array_bins() -> None:
    rng = random.Random(7)
    segments = []
    for _ in range(300):
        lo = rng.uniform(0, 1000)
        segments.append((lo, lo + rng.uniform(0, 300), rng.choice([1.0, 0.5, 0.25, 0.75, 2.0])))
    reference = Bins(start_s=100.0, width_s=23.5, bins=30)
    for lo, hi, rate in segments:
        reference.add(1, lo, hi, rate)
    got = Cumulative(segments).bins(100.0, 23.5, 30)
    assert got == pytest.approx(reference.totals()[1], rel=1e-12, abs=1e-9)
    assert all(v >= 0.0 for v in got)
